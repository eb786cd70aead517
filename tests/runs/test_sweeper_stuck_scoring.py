"""The sweeper scores again a run stuck in ``scoring`` (its scorer died): it looked at the
first 20 runs in scoring, in no order, and only then asked which were stuck. Runs scored for
a while by a live process (a re-score of a big run, an n_wise pass) filled those 20 every
sweep, and a stuck run behind them was never scored again."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from runs.models import Run, RunLane, Transition
from runs.sweeper import sweep
from tests.fakes.agent_server import FakeAgent, ok
from tests.runs.runfactory import create_run, drive, echo_answer, hosted, publish

pytestmark = pytest.mark.django_db(transaction=True)


def _in_scoring(run: Run, *, since: timedelta, leased: bool) -> None:
    now = timezone.now()
    RunLane.objects.filter(run=run).update(status="scoring")
    Transition.objects.filter(run=run).update(at=now - since)
    Run.objects.filter(pk=run.pk).update(
        status="scoring",
        items_open=0,
        scoring_owner="another-worker" if leased else "",
        scoring_until=now + timedelta(minutes=1) if leased else None,
    )


def test_a_stuck_run_behind_twenty_runs_scored_by_live_workers_is_scored_again(personas):
    version = publish(personas.workspace, cases=1)
    with FakeAgent() as agent:
        agent.default = ok(echo_answer)
        dep = hosted(personas.workspace, agent.url)
        stuck = drive(create_run(personas.workspace, version, [dep]))
        assert stuck.status == "completed"
        busy = [create_run(personas.workspace, version, [dep]) for _ in range(25)]
    for run in busy:  # scored for 10 minutes by live workers (their leases renewed)
        _in_scoring(run, since=timedelta(minutes=10), leased=True)
    _in_scoring(stuck, since=timedelta(minutes=10), leased=False)  # its worker died

    result = sweep()

    assert Run.objects.get(pk=stuck.pk).status == "completed"
    assert (result["closed_runs"], result["errors"]) == (1, 0)
    assert set(Run.objects.filter(pk__in=[r.pk for r in busy]).values_list("status", flat=True)) == {
        "scoring"
    }
