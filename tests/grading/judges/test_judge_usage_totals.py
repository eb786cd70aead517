"""grading.md §6.5: every judge, claims, judge-probe and critique call of a run is summed in
``judge_usage`` per case, lane and run. The run-level passes (``critique.probe_judges`` and
the LLM critique) belong to no case: they are split evenly over the lanes (remainder one each
to the first lanes) and shown apart as ``run_level``; a lane's usage is its cases' plus its share."""

from __future__ import annotations

import pytest
import yaml

from grading.models import JudgeProviderConfig
from packs.services import pack_version_publish
from runs.models import Run, RunItem, RunLane
from runs.probing import probe_run
from runs.results import lanes_of, leaderboard
from tests.fakes.agent_server import FakeAgent, ok
from tests.fakes.judge_provider import by_mode, content, mode_of, verdict
from tests.runs.runfactory import create_run, drive, hosted, pack_yaml

KEYS = ("calls", "input_tokens", "output_tokens")


def _sum(docs, key):
    return sum(d[key] for d in docs)


def test_probe_claims_and_critique_calls_add_up_in_case_lane_and_run_usage(personas, fake):
    ws = personas.workspace
    ws.allow_private_endpoints = True
    ws.save()
    JudgeProviderConfig.objects.create(workspace=ws, kind="openai", base_url=fake.base_url)
    doc = yaml.safe_load(pack_yaml(slug="judged", cases=2))
    spec = doc["version"]["evaluation_spec"]
    spec["judge_mode"] = "hybrid"
    spec["llm_judges"] = [
        {"key": "j", "mode": "assertion", "assertion": "says the word", "model": "gpt-4o-mini"}
    ]
    spec["scorecard"]["dimensions"].append({"key": "q", "source": "llm_judge", "judge_key": "j", "weight": 0})
    spec["critique"] = {"probe_judges": True}
    version = pack_version_publish(workspace=ws, data=yaml.safe_dump(doc).encode()).version
    fake.default = by_mode(
        assertion=verdict({"pass": True}),
        claims=content('{"claims": []}'),
        critique=content('{"suggestions": [], "overall": "fine"}'),
    )
    with FakeAgent() as agent:
        agent.route("/a", ok(lambda rec: {"final_output": "word"}))
        lanes_in = [hosted(ws, agent.url_for("/a"), name=name) for name in ("one", "two", "three")]
        run = create_run(ws, version, lanes_in)
        assert probe_run(run.pk) == "computed"
        probe_calls = fake.calls
        run = drive(run)
    assert run.status == "completed"
    modes = [mode_of(b) for b in fake.requests]
    assert modes.count("critique") == 1 and probe_calls > 0
    served = {"calls": fake.calls, "input_tokens": 120 * fake.calls, "output_tokens": 30 * fake.calls}

    run = Run.objects.get(pk=run.pk)
    usage = run.stats["judge_usage"]
    assert {k: usage[k] for k in KEYS} == served
    assert {k: getattr(run, f"judge_{k}") for k in KEYS} == served
    cases = [item.grade["judge_usage"] for item in RunItem.objects.filter(run=run)]
    run_level = usage["run_level"]
    assert run_level["calls"] == probe_calls + 1  # the probes and the critique call
    for key in KEYS:
        assert _sum(cases, key) + run_level[key] == served[key]
    assert usage["cost_usd"] == pytest.approx(_sum(cases, "cost_usd") + run_level["cost_usd"])
    assert usage["cost_usd"] == pytest.approx(
        served["input_tokens"] * 0.15e-6 + served["output_tokens"] * 0.6e-6
    )

    lanes = list(RunLane.objects.filter(run=run).order_by("position"))
    lane_docs = [lane.stats["judge_usage"] for lane in lanes]
    for key in KEYS:
        assert _sum(lane_docs, key) == served[key]
        assert _sum([d["run_level"] for d in lane_docs], key) == run_level[key]
    # split evenly, the remainder one each to the first lanes
    q, r = divmod(run_level["calls"], 3)
    assert [d["run_level"]["calls"] for d in lane_docs] == [q + (1 if i < r else 0) for i in range(3)]
    for lane, lane_doc in zip(lanes, lane_docs, strict=True):
        assert {k: lane_doc[k] for k in KEYS} == {k: getattr(lane, f"judge_{k}") for k in KEYS}
        own = [i.grade["judge_usage"] for i in RunItem.objects.filter(lane=lane)]
        assert _sum(own, "calls") + lane_doc["run_level"]["calls"] == lane_doc["calls"]
        # never in the agent's figures: those are the agent's own, item by item
        items = list(RunItem.objects.filter(lane=lane))
        agent_in = sum(i.input_tokens or 0 for i in items)
        assert lane.agent_input_tokens == agent_in == (lane.stats["agent"]["input_tokens"] or 0)
        assert agent_in < lane_doc["input_tokens"]
        assert all(
            (i.grade.get("metrics") or {}).get("input_tokens") in (None, i.input_tokens) for i in items
        )
    rows = leaderboard(run, lanes_of(run))
    assert sum(row.judge_cost_usd for row in rows) == pytest.approx(usage["cost_usd"])


def test_a_cancelled_run_keeps_its_judge_usage_on_the_run(personas, fake):
    from runs.dispatch import dispatch_lane
    from runs.scoring import check_run
    from runs.services.operations import run_cancel

    ws = personas.workspace
    ws.allow_private_endpoints = True
    ws.save()
    JudgeProviderConfig.objects.create(workspace=ws, kind="openai", base_url=fake.base_url)
    doc = yaml.safe_load(pack_yaml(slug="judged", cases=2))
    spec = doc["version"]["evaluation_spec"]
    spec["judge_mode"] = "hybrid"
    spec["llm_judges"] = [
        {"key": "j", "mode": "assertion", "assertion": "says the word", "model": "gpt-4o-mini"}
    ]
    spec["scorecard"]["dimensions"].append({"key": "q", "source": "llm_judge", "judge_key": "j", "weight": 0})
    version = pack_version_publish(workspace=ws, data=yaml.safe_dump(doc).encode()).version
    fake.default = by_mode(assertion=verdict({"pass": True}), claims=content('{"claims": []}'))
    with FakeAgent() as agent:
        agent.route("/a", ok(lambda rec: {"final_output": "word"}))
        run = create_run(ws, version, [hosted(ws, agent.url_for("/a"), name=n) for n in ("one", "two")])
        dispatch_lane(RunLane.objects.get(run=run, position=0).pk, time_slice=10)  # one lane graded
    assert fake.calls > 0
    run = run_cancel(run=Run.objects.get(pk=run.pk))
    check_run(run.pk)  # the cancelled run's figures over what was graded
    run = Run.objects.get(pk=run.pk)
    assert run.status == "cancelled" and run.stats["judge_usage"]["calls"] == fake.calls
    assert (run.judge_calls, run.judge_input_tokens, run.judge_output_tokens) == (
        fake.calls,
        120 * fake.calls,
        30 * fake.calls,
    )
    assert run.judge_cost_usd == pytest.approx(run.stats["judge_usage"]["cost_usd"])
