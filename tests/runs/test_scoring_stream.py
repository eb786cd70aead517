"""Run completion figures are streamed (runs/scoring.py): they must equal the figures of the
record-based computation (aggregate_lane / rank_lanes / run_health over every CaseRecord).

Run health goes through one accumulator either way (grading.engine.health): here the item
rows' path (``Row.fill``, the per-run case index) must feed it what ``record_from_grade``
does; its rules and wording are pinned in tests/grading/test_critique.py."""

from __future__ import annotations

import random
from typing import Any

from grading.engine.aggregate import aggregate_lane, record_from_grade
from grading.engine.compare import rank_lanes
from grading.engine.critique import run_health
from runs.models import Run, RunItem, RunLane
from runs.packdata import version_data
from runs.scoring import compute_stats, store_stats
from tests.runs.runfactory import create_run, hosted, publish


def _grade(item: RunItem, lane: RunLane, rng: random.Random) -> dict[str, Any]:
    roll = rng.random()
    if roll < 0.5:
        status, outcome, reason = "PASSED", "pass", None
    elif roll < 0.8:
        status, outcome, reason = "FAILED", "fail", "mismatch"
    elif roll < 0.9:
        status, outcome, reason = "UNAVAILABLE", "unavailable", "no_output"
    else:
        status, outcome, reason = "ERROR", "pack_error", "bad_ref"
    score = None if status in ("UNAVAILABLE", "ERROR") else round(rng.random(), 3)
    exp_status = status if status != "ERROR" else "ERROR"
    expectations = [
        {"key": "answer", "kind": "validator", "status": exp_status, "outcome_class": outcome,
         "reason_code": reason if rng.random() < 0.7 else None},
        {"key": "style", "kind": "judge", "status": "PASSED" if rng.random() < 0.6 else "FAILED",
         "outcome_class": "pass", "reason_code": "low_agreement" if rng.random() < 0.2 else None,
         "details": {"agreement": round(rng.random(), 3)}},
    ]  # fmt: skip
    if status == "ERROR" and rng.random() < 0.5:
        expectations = expectations[1:]  # a case-level pack error no expectation explains
    return {
        "status": status,
        "outcome_class": outcome,
        "reason_code": reason,
        "validity": rng.choice(["valid", "valid", "degraded"]),
        "scorecard": {
            "overall_score": score,
            "dimensions": [
                {"key": "correctness", "status": "PASSED", "score": score},
                {
                    "key": "steady",
                    "source": "reliability",
                    "status": "PASSED",
                    "score": round(rng.random(), 2),
                },
            ],
        },
        "gates": {"compliance_score": round(rng.random(), 2)},
        "expectations": expectations,
        "judge_usage": {"calls": 1, "input_tokens": 7, "output_tokens": 3, "cost_usd": 0.0005},
        "case": {
            "deployment": lane.deployment_name,
            "lane_id": str(lane.pk),
            "challenge_key": item.challenge_key,
            "case_key": item.case_key,
            "repetition": item.repetition,
        },
    }


def _grade_items(run: Any, seed: int) -> None:
    rng = random.Random(seed)
    lanes = {lane.pk: lane for lane in RunLane.objects.filter(run=run)}
    items = list(RunItem.objects.filter(run=run).order_by("id"))
    for item in items:
        if rng.random() < 0.05:
            continue  # never graded
        grade = _grade(item, lanes[item.lane_id], rng)
        item.grade = grade
        item.status = grade["status"]
        item.outcome_class = grade["outcome_class"]
        item.reason_code = grade["reason_code"] or ""
        item.score = grade["scorecard"]["overall_score"]
        item.latency_ms = rng.randint(5, 4000)
        item.input_tokens = rng.randint(1, 100)
        item.output_tokens = rng.randint(1, 100) if rng.random() < 0.9 else None
        item.cost_usd = round(rng.random() / 100, 5) if rng.random() < 0.8 else None
    RunItem.objects.bulk_update(
        items, ["grade", "status", "outcome_class", "reason_code", "score", "latency_ms", "input_tokens",
                "output_tokens", "cost_usd"],
    )  # fmt: skip
    for lane_id in lanes:  # the judge columns, as recording keeps them from each grade's judge_usage
        used = [item.grade["judge_usage"] for item in items if item.lane_id == lane_id and item.grade]
        RunLane.objects.filter(pk=lane_id).update(
            judge_calls=sum(u["calls"] for u in used),
            judge_input_tokens=sum(u["input_tokens"] for u in used),
            judge_output_tokens=sum(u["output_tokens"] for u in used),
            judge_cost_usd=sum(u["cost_usd"] for u in used),
        )


def _record_stats(run: Any) -> dict[str, Any]:
    """The computation compute_stats replaced: every record in memory."""
    by_lane, aggregates, docs = {}, {}, []
    for lane in RunLane.objects.filter(run_id=run.pk).order_by("position"):
        rows = (
            RunItem.objects.filter(lane_id=lane.pk)
            .exclude(status="")
            .order_by("id")
            .values_list("grade", "input_tokens", "output_tokens", "cost_usd", "latency_ms")
        )
        records = [
            record_from_grade(
                g, metrics={"input_tokens": a, "output_tokens": b, "cost_usd": c, "latency_ms": d}
            )
            for g, a, b, c, d in rows
            if g
        ]
        by_lane[lane.deployment_name] = records
        agg = aggregate_lane(records, run_id=str(run.pk), deployment=lane.deployment_name)
        aggregates[lane.deployment_name] = agg
        doc = agg.to_dict()
        # every judge call of the lane: its columns (no run-level pass here: nothing more)
        # (a lane without a graded case: cost unknown, as its cases' sum says)
        cost = (
            None
            if doc["judge_usage"]["cost_usd"] is None and not lane.judge_cost_usd
            else lane.judge_cost_usd
        )
        doc["judge_usage"] = {
            "calls": lane.judge_calls,
            "input_tokens": lane.judge_input_tokens,
            "output_tokens": lane.judge_output_tokens,
            "cost_usd": cost,
            "run_level": {"calls": 0, "input_tokens": 0, "output_tokens": 0, "cost_usd": cost and 0.0},
        }
        docs.append(doc)
    ranking = rank_lanes(by_lane, run_id=str(run.pk), aggregates=aggregates)
    spec = version_data(run.pack_version, run.input_set.key if run.input_set_id else None).spec
    feedback = run_health([r for rows in by_lane.values() for r in rows], spec).to_dict()
    return {
        "scoring_revision": run.scoring_revision,
        "lanes": docs,
        "judge_usage": {
            **{k: sum(d["judge_usage"][k] for d in docs) for k in ("calls", "input_tokens", "output_tokens")},
            "cost_usd": sum(d["judge_usage"]["cost_usd"] or 0.0 for d in docs),
            "run_level": {"calls": 0, "input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0},
        },
        "ranking": [s.to_dict() for s in ranking],
        "eval_feedback": feedback,
    }


def test_streamed_stats_equal_the_record_computation(personas):
    version = publish(personas.workspace, cases=7)
    deps = [hosted(personas.workspace, "http://127.0.0.1:9/", name=f"agent{i}") for i in range(3)]
    run = create_run(personas.workspace, version, deps, repetitions=3)
    _grade_items(run, seed=11)
    streamed = compute_stats(run)
    expected = _record_stats(run)
    assert streamed == expected
    # the figures are not trivially empty: intervals, ranking pairs and findings exist
    lane = streamed["lanes"][0]
    assert lane["executions"] > 0 and lane["mean_score_interval"] is not None
    assert lane["pass_rate_interval"] is not None and lane["dimension_means"]["correctness"] is not None
    assert any(s["score_difference_interval"] for s in streamed["ranking"])
    findings = {s["finding"] for s in streamed["eval_feedback"]["suggestions"]}
    assert {"unstable_across_repeats", "pack_error", "judge_disagreement"} <= findings
    store_stats(run, streamed)
    assert RunLane.objects.get(pk=run.lanes.order_by("position")[0].pk).stats == lane
    assert Run.objects.get(pk=run.pk).stats == streamed


def test_streamed_stats_with_one_repetition_and_an_empty_lane(personas):
    version = publish(personas.workspace, cases=5)
    deps = [hosted(personas.workspace, "http://127.0.0.1:9/", name=f"agent{i}") for i in range(2)]
    run = create_run(personas.workspace, version, deps)
    _grade_items(run, seed=5)
    RunItem.objects.filter(lane__position=1, run=run).update(status="", grade=None)
    RunLane.objects.filter(position=1, run=run).update(
        judge_calls=0, judge_input_tokens=0, judge_output_tokens=0, judge_cost_usd=0.0
    )
    assert compute_stats(run) == _record_stats(run)


def test_model_critique_suggestions_are_counted_in_the_overall_line(personas, monkeypatch):
    from runs import judging

    version = publish(personas.workspace, cases=3)
    run = create_run(personas.workspace, version, [hosted(personas.workspace, "http://127.0.0.1:9/")])
    _grade_items(run, seed=3)
    before = compute_stats(run)["eval_feedback"]
    seen = {}

    def critique(run_arg, records):
        seen["table"] = judging_table(records)
        return [{"reason": "add a negative case", "finding": "llm", "source": "llm", "assertion": "answer"}]

    monkeypatch.setattr(judging, "run_model_critique", critique)
    Run.objects.filter(pk=run.pk).update(status="scoring")  # asked only while the run is scored
    after = compute_stats(run, critique=True)["eval_feedback"]
    assert len(after["suggestions"]) == len(before["suggestions"]) + 1
    n = len(after["suggestions"])
    assert after["overall"].startswith(f"{n} finding{'s' if n != 1 else ''}:") and "1 llm" in after["overall"]
    # the critic sees the same outcome table as from the records
    graded = RunItem.objects.filter(run=run).exclude(status="")
    expected: dict = {}
    for grade in graded.values_list("grade", flat=True):
        for e in grade["expectations"]:
            per = expected.setdefault("echo", {}).setdefault(e["key"], {})
            per[e["status"]] = per.get(e["status"], 0) + 1
    assert seen["table"] == expected


def judging_table(records):
    from grading.judges.model_pass import outcome_table

    return {c: {k: dict(v) for k, v in per.items()} for c, per in outcome_table(records).items()}


def test_a_completed_run_requests_its_result_summary(
    personas, monkeypatch, django_capture_on_commit_callbacks
):
    from runs import result_tasks
    from runs.models import RunResultSummary
    from tests.fakes.agent_server import FakeAgent, ok
    from tests.runs.runfactory import drive, echo_answer

    sent = []
    monkeypatch.setattr(result_tasks.compute_result_summary, "delay", lambda run_id: sent.append(run_id))
    version = publish(personas.workspace, cases=2)
    with FakeAgent() as agent:
        agent.default = ok(echo_answer)
        run = create_run(personas.workspace, version, [hosted(personas.workspace, agent.url)])
        with django_capture_on_commit_callbacks(execute=True):
            run = drive(run)
    assert run.status == "completed"
    assert sent == [str(run.id)]
    summary = RunResultSummary.objects.get(run=run)
    assert (summary.status, summary.scoring_revision) == ("pending", run.scoring_revision)
    result_tasks.compute_result_summary(str(run.id))
    assert RunResultSummary.objects.get(run=run).status == "ready"


def test_the_overview_ties_lanes_whose_same_scores_were_summed_in_another_order(personas):
    """Two lanes scoring each case's three repetitions 0.1, 0.2 and 0.3, written in opposite
    orders: their running per-case sums differ by 1e-16 (0.6000000000000001 against 0.6).
    The overview ranked them 1 and 2, the second not within noise; they now share rank 1 and
    both are winners, as the compare page calls such a delta within noise."""
    from runs.results import leaderboard

    version = publish(personas.workspace, cases=3)
    deps = [hosted(personas.workspace, "http://127.0.0.1:9/", name=name) for name in ("forward", "backward")]
    run = create_run(personas.workspace, version, deps, repetitions=3)
    orders = {"forward": (0.1, 0.2, 0.3), "backward": (0.3, 0.2, 0.1)}
    items = list(RunItem.objects.filter(run=run).select_related("lane").order_by("id"))
    seen: dict[tuple[int, str, str], int] = {}
    for item in items:  # the stream reads a lane's items in id order
        nth = seen.setdefault((item.lane_id, item.challenge_key, item.case_key), 0)
        seen[(item.lane_id, item.challenge_key, item.case_key)] = nth + 1
        score = orders[item.lane.deployment_name][nth]
        item.grade = {
            "status": "PASSED",
            "outcome_class": "pass",
            "scorecard": {"overall_score": score, "dimensions": []},
            "expectations": [],
            "case": {"lane_id": str(item.lane_id)},
        }
        item.status, item.outcome_class, item.score = "PASSED", "pass", score
    RunItem.objects.bulk_update(items, ["grade", "status", "outcome_class", "score"])
    assert sum(orders["forward"]) != sum(orders["backward"])

    stats = compute_stats(run)
    store_stats(run, stats)
    assert [lane["mean_score"] for lane in stats["lanes"]] == [0.2, 0.2]
    ranking = {s["deployment"]: s for s in stats["ranking"]}
    assert (ranking["backward"]["rank"], ranking["forward"]["rank"]) == (1, 1)
    assert ranking["forward"]["within_noise"] is True
    rows = leaderboard(Run.objects.get(pk=run.pk), list(RunLane.objects.filter(run=run).order_by("position")))
    assert [(row.lane.deployment_name, row.rank, row.winner) for row in rows] == [
        ("forward", 1, True),
        ("backward", 1, True),
    ]
