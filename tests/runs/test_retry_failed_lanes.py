"""Retry failed items of a run whose scoring failed: every lane of the run is scored again
with it. Only the lanes holding a retried item were reopened; the others stayed ``failed``,
and once the retried items were graded the run was ``completed`` with lanes still
``failed`` (their figures computed and stored like the others')."""

from __future__ import annotations

import pytest

from runs import scoring
from runs.models import RunLane
from runs.services.operations import run_retry_failed
from tests.fakes.agent_server import FakeAgent, ok, raw
from tests.runs.runfactory import create_run, drive, echo_answer, hosted, publish

pytestmark = pytest.mark.django_db(transaction=True)


def test_retrying_a_failed_run_completes_every_lane_with_it(personas, monkeypatch):
    version = publish(personas.workspace, cases=2)
    compute = scoring.compute_stats

    def broken(run, **kwargs):
        raise RuntimeError("the scorer broke")

    monkeypatch.setattr(scoring, "compute_stats", broken)
    with FakeAgent() as agent:
        agent.default = ok(echo_answer)
        agent.queue(raw("{}", status=401), case="c1")  # a config_error in the first lane only
        first = hosted(personas.workspace, agent.url, name="first")
        second = hosted(personas.workspace, agent.url, name="second")
        run = create_run(personas.workspace, version, [first, second])
        with pytest.raises(RuntimeError, match="the scorer broke"):
            drive(run)
        run.refresh_from_db()
        assert run.status == "failed"
        assert set(RunLane.objects.filter(run=run).values_list("status", flat=True)) == {"failed"}

        monkeypatch.setattr(scoring, "compute_stats", compute)
        assert run_retry_failed(run=run, enqueue=False) == 1
        run = drive(run)
    assert run.status == "completed"
    lanes = dict(RunLane.objects.filter(run=run).values_list("deployment_name", "status"))
    assert lanes == {"first": "completed", "second": "completed"}
    assert [lane["deployment"] for lane in run.stats["lanes"]] == ["first", "second"]
