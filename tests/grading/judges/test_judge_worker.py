"""LLM judges end to end through a real ``celery worker -B`` (its beat sweeper dispatches the
queued lanes): two deployments of the example-style fake agent, an assertion, a rubric and an
n_wise judge answered by the fake judge provider over a loopback socket; one judge sample is
refused (retried), spend is booked per lane and never on the agent."""

from __future__ import annotations

import json

import pytest

from runs.models import Run, RunItem, RunLane
from tests.fakes.agent_server import FakeAgent, ok
from tests.fakes.judge_provider import blocks, by_mode, content, rank, verdict
from tests.grading.judges.test_judge_runs import publish_with_judges, setup_provider
from tests.processes import Worker, redis_server, wait_until
from tests.runs.runfactory import create_run, hosted

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

REFUSAL = json.dumps(
    {
        "id": "x",
        "model": "gpt-4o-mini",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": None, "refusal": "no"},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 50, "completion_tokens": 1},
    }
).encode()


def test_a_worker_grades_every_judge_mode_over_the_fake_provider(personas, fake, tmp_path):
    ws = personas.workspace
    setup_provider(ws, fake)
    judges = [
        {
            "key": "says",
            "mode": "assertion",
            "assertion": "names the word",
            "model": "gpt-4o-mini",
            "samples": 3,
        },
        {"key": "clear", "mode": "rubric", "rubric": "clear", "model": "gpt-4o-mini", "samples": 1},
        {"key": "best", "mode": "n_wise", "prompt": "most exact", "model": "gpt-4o-mini", "samples": 2},
    ]
    version = publish_with_judges(ws, judges, limits={"max_tokens": 500000})
    refused = []

    def assertion_reply(body, path):
        if not refused:  # the very first assertion call is refused: retried, never a verdict
            refused.append(1)
            return 200, {"Content-Type": "application/json"}, REFUSAL
        return verdict({"pass": True, "reasoning": "names it"})(body, path)

    def n_wise(body, path):
        found = dict(blocks(body))
        good = next(bid.split("/")[0] for bid, text in found.items() if not text.startswith("maybe"))
        return rank(lambda labels: [good] + [x for x in labels if x != good])(body, path)

    fake.default = by_mode(
        assertion=assertion_reply,
        rubric=verdict({"score": 4, "reasoning": "clear"}),
        n_wise=n_wise,
        claims=content('{"claims": []}'),
        critique=content('{"suggestions": [], "overall": "fine"}'),
    )
    with FakeAgent() as agent, redis_server() as port:
        agent.route(
            "/good", ok(lambda rec: {"final_output": rec.json["challenge"]["instructions"].split()[-1]})
        )
        agent.route(
            "/meh",
            ok(lambda rec: {"final_output": "maybe " + rec.json["challenge"]["instructions"].split()[-1]}),
        )
        run = create_run(
            ws,
            version,
            [hosted(ws, agent.url_for("/good"), name="good"), hosted(ws, agent.url_for("/meh"), name="meh")],
        )
        worker = Worker(
            broker_url=f"redis://127.0.0.1:{port}/0",
            queues=None,
            concurrency=2,
            beat=True,
            schedule_path=tmp_path / "beat",
            env={"RUNS_SWEEP_SECONDS": "0.5"},
            log_path=tmp_path / "worker.log",
        )
        try:
            wait_until(
                lambda: Run.objects.get(pk=run.pk).status in ("completed", "failed", "cancelled"),
                timeout=120,
                interval=0.2,
                message=f"the run to finish\n{worker.log()}",
            )
        finally:
            worker.stop()
    run.refresh_from_db()
    assert run.status == "completed", worker.log()
    items = list(RunItem.objects.filter(run=run).select_related("lane"))
    assert len(items) == 4
    for item in items:
        exps = {e["key"]: e for e in item.grade["expectations"]}
        good = item.lane.deployment_name == "good"
        assert exps["says"]["status"] == "PASSED", exps["says"]["evidence"]
        assert exps["clear"]["status"] == "PASSED" and exps["clear"]["score"] == 0.75
        assert exps["best"]["score"] == (1.0 if good else 0.0), exps["best"]["evidence"]
        assert all(s["citations"] for s in exps["says"]["details"]["samples"] if s["status"] == "ok")
    outcomes = [
        c["outcome"]
        for item in items
        for s in next(e for e in item.grade["expectations"] if e["key"] == "says")["details"]["samples"]
        for c in s["calls"]
    ]
    assert outcomes.count("invalid") == 1  # the refusal, retried once
    lanes = list(RunLane.objects.filter(run=run))
    assert sum(lane.judge_calls for lane in lanes) == fake.calls == run.judge_calls
    assert all(lane.judge_input_tokens > 0 for lane in lanes)
    assert lanes[0].agent_input_tokens == lanes[1].agent_input_tokens  # judge spend never on the agent
