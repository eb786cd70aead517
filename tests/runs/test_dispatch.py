"""Lane dispatch against a real-socket fake agent on PostgreSQL."""

from __future__ import annotations

import pytest

from runs.models import Attempt, GradeRevision, RunItem, RunLane
from tests.fakes.agent_server import FakeAgent, ok
from tests.runs.runfactory import create_run, drive, echo_answer, hosted, publish

pytestmark = pytest.mark.django_db(transaction=True)


def test_run_completes_and_grades_every_case(personas):
    version = publish(personas.workspace, cases=4)
    with FakeAgent() as agent:
        agent.default = ok(echo_answer)
        agent.queue(ok({"final_output": "wrong"}), case="c3")
        dep = hosted(personas.workspace, agent.url)
        run = drive(create_run(personas.workspace, version, [dep]))
    assert run.status == "completed"
    lane = RunLane.objects.get(run=run)
    assert (lane.passed, lane.failed, lane.pending) == (3, 1, 0)
    assert GradeRevision.objects.filter(item__run=run).count() == 4
    assert Attempt.objects.filter(item__run=run).count() == 4
    statuses = dict(RunItem.objects.filter(run=run).values_list("case_key", "status"))
    assert statuses == {"c0": "PASSED", "c1": "PASSED", "c2": "PASSED", "c3": "FAILED"}
    assert run.stats["lanes"][0]["pass_rate"] == 0.75
    assert run.stats["ranking"][0]["deployment"] == "agent"
    assert "eval_feedback" in run.stats
