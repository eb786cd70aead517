"""runs/judging.py: a run whose lanes are graded with the workspace's judge provider (the
fake over a real socket), the lane budget split, model claims, and the n_wise pass."""

from __future__ import annotations

import yaml
from django.test import Client

from grading.models import JudgeProviderConfig
from packs.services import pack_version_publish
from runs.judging import judge_for_lane, rank_run, record_run_judge_usage, with_model_claims
from runs.models import Run, RunItem, RunLane
from tests.fakes.agent_server import FakeAgent, ok
from tests.fakes.judge_provider import blocks, by_mode, content, mode_of, rank, verdict, without_usage
from tests.runs.runfactory import create_run, drive, hosted, pack_yaml


def publish_with_judges(workspace, judges, limits=None):
    doc = yaml.safe_load(pack_yaml(slug="judged", cases=2))
    spec = doc["version"]["evaluation_spec"]
    spec["judge_mode"] = "hybrid"
    spec["llm_judges"] = judges
    spec["scorecard"]["dimensions"].append(
        {"key": "q", "source": "llm_judge", "judge_key": judges[0]["key"], "weight": 0}
    )
    if limits:
        spec["scorecard"]["judge_limits"] = limits
    return pack_version_publish(workspace=workspace, data=yaml.safe_dump(doc).encode()).version


def setup_provider(workspace, fake):
    workspace.allow_private_endpoints = True
    workspace.save()
    JudgeProviderConfig.objects.create(workspace=workspace, kind="openai", base_url=fake.base_url)


def test_no_provider_means_no_judge(personas):
    version = publish_with_judges(
        personas.workspace, [{"key": "j", "mode": "assertion", "assertion": "x", "model": "gpt-4o-mini"}]
    )
    with FakeAgent() as agent:
        run = create_run(personas.workspace, version, [hosted(personas.workspace, agent.url)])
    lane = RunLane.objects.get(run=run)
    assert judge_for_lane(lane) is None


def test_run_lanes_judged_with_budget_share_and_n_wise(personas, fake):
    ws = personas.workspace
    setup_provider(ws, fake)
    judges = [
        {"key": "j", "mode": "assertion", "assertion": "says the word", "model": "gpt-4o-mini", "samples": 2},
        {
            "key": "best",
            "mode": "n_wise",
            "model": "gpt-4o-mini",
            "samples": 2,
            "prompt": "most exact answer",
        },
    ]
    version = publish_with_judges(ws, judges, limits={"max_tokens": 200000, "max_samples_per_judge": 2})

    def n_wise(body, path):
        found = dict(blocks(body))
        good = next(bid.split("/")[0] for bid, text in found.items() if not text.startswith("maybe"))
        return rank(lambda labels: [good] + [x for x in labels if x != good])(body, path)

    fake.default = by_mode(
        assertion=verdict({"pass": True}),
        n_wise=n_wise,
        claims=content('{"claims": []}'),
        critique=content('{"suggestions": [], "overall": "fine"}'),
    )
    with FakeAgent() as agent:
        agent.route(
            "/good", ok(lambda rec: {"final_output": rec.json["challenge"]["instructions"].split()[-1]})
        )
        agent.route(
            "/meh",
            ok(lambda rec: {"final_output": "maybe " + rec.json["challenge"]["instructions"].split()[-1]}),
        )
        good = hosted(ws, agent.url_for("/good"), name="good")
        meh = hosted(ws, agent.url_for("/meh"), name="meh")
        run = drive(create_run(ws, version, [good, meh]))  # dispatch grades with judge_for_lane
    assert run.status == "completed"  # the scoring stage ran rank_run (wired in runs.scoring)
    lanes = {lane.deployment_name: lane for lane in RunLane.objects.filter(run=run)}
    budget = judge_for_lane(lanes["good"]).budget
    assert budget.max_tokens == 100000 and budget.max_samples == 2 and budget.spent_tokens > 0
    items = list(RunItem.objects.filter(run=run).select_related("lane"))
    assert len(items) == 4
    for item in items:
        exps = {e["key"]: e for e in item.grade["expectations"]}
        assert exps["j"]["status"] == "PASSED"
        assert exps["best"]["score"] == (1.0 if item.lane.deployment_name == "good" else 0.0)
        assert exps["best"]["details"]["labels"]
    assert "good" not in str([b for b in fake.requests if "(mode: n_wise)" in str(b)])  # opaque labels
    ranking_calls = sum(1 for b in fake.requests if "(mode: n_wise)" in str(b))
    assert ranking_calls == 4  # 2 cases x 2 samples
    modes = [mode_of(b) for b in fake.requests]
    assert (modes.count("assertion"), modes.count("claims"), modes.count("critique")) == (8, 4, 1)
    # per lane: 2 cases x 2 samples, 2 claims calls, half of the 4 rankings; the critique call
    # is split between the lanes (its remainder to the first)
    assert sorted([lanes["good"].judge_calls, lanes["meh"].judge_calls]) == [8, 9]
    assert lanes["good"].agent_input_tokens == lanes["meh"].agent_input_tokens
    calls_before = fake.calls
    assert rank_run(run) == 0 and fake.calls == calls_before  # already ranked: nothing paid twice
    record_run_judge_usage(run)
    run = Run.objects.get(pk=run.pk)
    assert run.judge_calls == 17 == fake.calls


def test_with_model_claims(personas, fake):
    from grading.engine import evidence_from_response, grade_case
    from tests.grading.judges.helpers import CTX, case

    setup_provider(personas.workspace, fake)
    from runs.judging import judge_for_workspace

    judge = judge_for_workspace(personas.workspace.pk)
    fake.default = verdict(
        lambda body: {
            "claims": [
                {
                    "claim": "Paris is the capital.",
                    "type": "factual",
                    "span": [0, 21],
                    "supported": True,
                    "citations": [{"id": "challenge_input"}],
                }
            ]
        },
        cite=False,
    )
    sp = {
        "validators": [
            {"key": "v", "type": "contains", "target": "final_output", "expected_from": "literal:a"}
        ],
        "llm_judges": [{"key": "j", "mode": "assertion", "assertion": "x", "model": "gpt-4o-mini"}],
        "scorecard": {"dimensions": ["correctness"]},
    }
    ev = evidence_from_response({"final_output": "Paris is the capital. Done."})
    g = grade_case(ev, case(), sp, context=CTX, judge=None)
    with_model_claims(judge, g, evidence=ev, case=case(), spec=sp, context=CTX)
    llm = [c for c in g.claims if c["source"] == "llm"]
    assert llm == [
        {
            "id": "llm1",
            "claim": "Paris is the capital.",
            "type": "factual",
            "kind": "llm",
            "source": "llm",
            "verified": True,
            "evidence": "supported by challenge_input",
            "span": [0, 21],
            "evidence_refs": ["challenge_input"],
        }
    ]
    assert g.judge_usage.calls == 1


def test_run_model_critique_and_grade_case_with_judge(personas, fake):
    from grading.engine import evidence_from_response
    from runs.judging import grade_case_with_judge, judge_for_workspace, run_model_critique
    from tests.grading.judges.helpers import CTX, case

    ws = personas.workspace
    setup_provider(ws, fake)
    version = publish_with_judges(
        ws, [{"key": "j", "mode": "assertion", "assertion": "says it", "model": "gpt-4o-mini", "samples": 1}]
    )
    with FakeAgent() as agent:
        run = create_run(ws, version, [hosted(ws, agent.url)])

    def critique(body):
        return {
            "suggestions": [
                {"assertion": "answer", "reason": "2 of 2 cases pass; add a negative case"},
                {"assertion": "nope", "reason": "unknown: dropped"},
                {"reason": "pack-wide advice"},
            ],
            "overall": "x",
        }

    fake.default = by_mode(critique=verdict(critique, cite=False), other=content("{}"))
    records = [{"challenge_key": "echo", "expectations": {"answer": ["PASSED", "pass", None]}}]
    found = run_model_critique(run, records)
    assert [s.get("assertion") for s in found] == ["answer", None]
    assert {s["source"] for s in found} == {"llm"} and {s["finding"] for s in found} == {"llm"}
    lane = RunLane.objects.get(run=run)
    assert lane.judge_calls == 1  # critic spend charged to the lanes, apart from agent spend
    assert lane.agent_input_tokens == 0

    fake.default = by_mode(
        assertion=verdict({"pass": True}), claims=content('{"claims": []}'), other=content("{}")
    )
    judge = judge_for_workspace(ws.pk)
    sp = {
        "validators": [
            {"key": "v", "type": "contains", "target": "final_output", "expected_from": "literal:a"}
        ],
        "llm_judges": [
            {"key": "j", "mode": "assertion", "assertion": "x", "model": "gpt-4o-mini", "samples": 1}
        ],
        "scorecard": {"dimensions": ["correctness"]},
    }
    g = grade_case_with_judge(
        evidence_from_response({"final_output": "a"}), case(), sp, context=CTX, judge=judge
    )
    assert g.judge_usage.calls == 2  # the judge sample and the claims call


def test_a_run_probes_its_judges_on_the_empty_baseline_charged_to_the_lanes(personas, fake):
    from runs.probing import probe_run

    ws = personas.workspace
    setup_provider(ws, fake)
    doc = yaml.safe_load(pack_yaml(slug="probed", cases=2))
    spec = doc["version"]["evaluation_spec"]
    spec["judge_mode"] = "hybrid"
    spec["llm_judges"] = [{"key": "j", "mode": "assertion", "assertion": "x", "model": "gpt-4o-mini"}]
    spec["critique"] = {"probe_judges": True}
    version = pack_version_publish(workspace=ws, data=yaml.safe_dump(doc).encode()).version
    fake.default = verdict({"pass": True})  # passes anything, the empty answer included
    with FakeAgent() as agent:
        run = create_run(ws, version, [hosted(ws, agent.url, name="a"), hosted(ws, agent.url, name="b")])
        assert probe_run(run.pk) == "computed"
    run = Run.objects.get(pk=run.pk)
    findings = [f for per_case in run.case_findings.values() for f in per_case]
    judged = [f for f in findings if f.get("assertion") == "j"]
    assert len(judged) == 2 and {f["finding"] for f in judged} == {"trivially_satisfied"}
    lanes = list(RunLane.objects.filter(run=run).order_by("position"))
    assert sum(lane.judge_calls for lane in lanes) == fake.calls > 0  # critic spend, split over lanes
    assert all(lane.agent_input_tokens == 0 for lane in lanes)  # never an agent's figures


def test_without_the_setting_a_run_does_not_probe_its_judges(personas, fake):
    from runs.probing import probe_run

    ws = personas.workspace
    setup_provider(ws, fake)
    version = publish_with_judges(
        ws, [{"key": "j", "mode": "assertion", "assertion": "x", "model": "gpt-4o-mini"}]
    )
    fake.default = verdict({"pass": True})
    with FakeAgent() as agent:
        run = create_run(ws, version, [hosted(ws, agent.url)])
        assert probe_run(run.pk) == "computed"
    assert fake.calls == 0


def test_a_resumed_lane_budget_counts_the_calls_whose_usage_was_not_reported(personas, fake):
    # A call whose provider reports no usage is charged its reservation (5bd0be6), but a lane
    # resuming in a new dispatcher slice rebuilt its budget from the stored token counters,
    # which hold only reported tokens: those calls counted 0, and max_tokens / max_calls_usd
    # could be exceeded across slices. The charged amount is now stored and rebuilt; the
    # spend shown stays as reported (0 tokens, cost unknown).
    ws = personas.workspace
    setup_provider(ws, fake)
    judges = [{"key": "j", "mode": "assertion", "assertion": "x", "model": "gpt-4o-mini", "samples": 1}]
    version = publish_with_judges(ws, judges, limits={"max_tokens": 10_000_000, "max_calls_usd": 100})
    fake.default = without_usage(
        by_mode(
            assertion=verdict({"pass": True}),
            claims=content('{"claims": []}'),
            critique=content('{"suggestions": [], "overall": "fine"}'),
        )
    )
    with FakeAgent() as agent:
        run = drive(create_run(ws, version, [hosted(ws, agent.url, name="a")]))
    assert run.status == "completed"
    lane = RunLane.objects.get(run=run)
    assert lane.judge_calls == fake.calls > 0
    budget = judge_for_lane(lane).budget  # what a new slice or a restarted worker starts from
    assert budget.spent_tokens > 1024 * lane.judge_calls  # each at least its output cap
    assert budget.spent_usd > 0
    assert budget.spent_tokens == lane.judge_charged_tokens
    charged = sum(
        (item.grade["judge_usage"].get("charged_tokens") or 0) for item in RunItem.objects.filter(run=run)
    )
    assert 0 < charged <= lane.judge_charged_tokens  # the rest: the run's critique call
    # shown as reported: no tokens, cost unknown
    assert (lane.judge_input_tokens, lane.judge_output_tokens, lane.judge_cost_usd) == (0, 0, 0.0)
    for item in RunItem.objects.filter(run=run):
        assert item.grade["judge_usage"]["cost_usd"] is None
    from runs.results import leaderboard

    row = leaderboard(run, list(RunLane.objects.filter(run=run)))[0]
    assert row.judge_cost_usd is None
    # The overview says what the budget counted, so a "budget reached" beside 0 tokens is
    # explained (it showed only the reported 0 tokens and a dash).
    assert row.judge_budget_only_tokens == lane.judge_charged_tokens
    client = Client()
    client.force_login(personas.owner)
    page = client.get(f"/runs/{run.id}/").content.decode()
    assert f"+{lane.judge_charged_tokens} counted against the budget" in page


def test_a_critique_call_in_flight_when_the_run_is_cancelled_is_not_booked(
    personas, fake, monkeypatch, caplog
):
    """The cancel lands while the critique's call is out: its answer is not used (the run is
    cancelled) and its spend was still added to the lanes' judge counters, so the cancelled
    run's figures changed after the cancel. As an n_wise answer that lands after a cancel
    is dropped with its spend, the critique's is now too (and logged)."""
    import grading.judges.model_pass  # noqa: F401
    from runs import judging
    from runs.services.operations import run_cancel

    ws = personas.workspace
    setup_provider(ws, fake)
    version = publish_with_judges(
        ws, [{"key": "j", "mode": "assertion", "assertion": "says it", "model": "gpt-4o-mini", "samples": 1}]
    )
    fake.default = by_mode(
        assertion=verdict({"pass": True}),
        claims=content('{"claims": []}'),
        critique=content('{"suggestions": [], "overall": "fine"}'),
    )
    spend = ("judge_calls", "judge_input_tokens", "judge_output_tokens", "judge_cost_usd")
    spend += ("judge_charged_tokens", "judge_charged_usd")
    at_cancel: dict = {}
    original = judging.model_critique

    def critique_then_cancel(*args, **kwargs):
        found = original(*args, **kwargs)  # the call went out and was answered
        run_cancel(run=Run.objects.get(pk=run.pk))
        at_cancel["lanes"] = list(RunLane.objects.filter(run=run).order_by("pk").values_list(*spend))
        at_cancel["run"] = Run.objects.values_list(*spend[:4]).get(pk=run.pk)
        return found

    monkeypatch.setattr(judging, "model_critique", critique_then_cancel)
    with FakeAgent() as agent:
        agent.default = ok(lambda rec: {"final_output": rec.json["challenge"]["instructions"].split()[-1]})
        run = create_run(ws, version, [hosted(ws, agent.url)])
        with caplog.at_level("INFO", logger="runs.judging"):
            run = drive(run)
    assert run.status == "cancelled"
    assert [mode_of(b) for b in fake.requests].count("critique") == 1
    assert at_cancel["lanes"][0][0] > 0  # the grades' judge calls were booked before the cancel
    assert list(RunLane.objects.filter(run=run).order_by("pk").values_list(*spend)) == at_cancel["lanes"]
    assert Run.objects.values_list(*spend[:4]).get(pk=run.pk) == at_cancel["run"]
    assert "cancelled while a judge pass ran: its 1 call(s)" in caplog.text
