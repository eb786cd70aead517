"""An uploaded result is graded as the same response from a called agent would be: one run, a
hosted_http lane whose agent answers each case and a trace_import lane sent the same
responses; each case's grade, evidence and figures agree but for the lane and the times."""

from __future__ import annotations

import json

import pytest

from runs.models import RunItem, RunLane
from runs.services.deployments import deployment_create
from runs.services.trace_import import run_import_results
from tests.fakes.agent_server import FakeAgent, ok
from tests.runs.runfactory import create_run, drive, hosted, publish

pytestmark = pytest.mark.django_db(transaction=True)


def _response(case: str) -> dict:
    index = int(case[1:])
    return {
        "final_output": f"answer-{index}" if index != 1 else "no idea",
        "messages": [
            {"role": "user", "content": f"Say answer-{index}"},
            {"role": "assistant", "content": "ok"},
        ],
        "tool_calls": [{"name": "lookup", "args": {"q": case}, "result": {"hits": index}}],
        "metrics": {"input_tokens": 10 + index, "output_tokens": 5, "cost_usd": 0.25, "model": "m-1"},
    }


def _by_case(run, lane):
    return {i.case_key: i for i in RunItem.objects.filter(run=run, lane=lane)}


VOLATILE = {
    "started_at",
    "ended_at",
    "latency_ms",
    "graded_at",
    "deployment",
    "created_at",
    "lane_id",
    "timing",
}


def _stable(value):
    if isinstance(value, dict):
        return {k: _stable(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [_stable(v) for v in value]
    return value


def test_an_uploaded_response_is_graded_as_the_called_agents(personas):
    version = publish(personas.workspace, cases=3)
    with FakeAgent() as agent:
        for case in ("c0", "c1", "c2"):
            agent.queue(ok(_response(case)), case=case)
        called = hosted(personas.workspace, agent.url)
        uploaded = deployment_create(workspace=personas.workspace, name="ci", kind="trace_import").deployment
        run = create_run(personas.workspace, version, [called, uploaded])
        drive(run)
    lines = [json.dumps({"case_key": c, "deployment": "ci", **_response(c)}) for c in ("c0", "c1", "c2")]
    outcome = run_import_results(run=run, data="\n".join(lines).encode())
    assert (outcome.accepted, outcome.bad_lines) == (3, [])
    run.refresh_from_db()
    assert run.status == "completed"
    lanes = {lane.deployment_name: lane for lane in RunLane.objects.filter(run=run)}
    a, b = _by_case(run, lanes["agent"]), _by_case(run, lanes["ci"])
    for case in ("c0", "c1", "c2"):
        x, y = a[case], b[case]
        assert (x.status, x.score, x.input_tokens, x.output_tokens, x.cost_usd, x.attempt_count) == (
            y.status,
            y.score,
            y.input_tokens,
            y.output_tokens,
            y.cost_usd,
            y.attempt_count,
        ), case
        assert _stable(x.grade) == _stable(y.grade), case
        # the uploaded line's routing fields are kept with the response it sent, as sent
        sent = {
            **y.evidence,
            "response": {k: v for k, v in y.evidence["response"].items() if k != "case_key"},
        }
        assert _stable(x.evidence) == _stable(sent), case
    figures = ("passed", "failed", "agent_cost_usd", "input_tokens", "output_tokens")
    x, y = lanes["agent"], lanes["ci"]
    x.refresh_from_db()
    y.refresh_from_db()
    assert [getattr(x, f, None) for f in figures] == [getattr(y, f, None) for f in figures]
    assert (x.passed, x.failed) == (2, 1)
