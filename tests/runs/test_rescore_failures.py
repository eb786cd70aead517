"""A re-score that cannot re-grade. The task raised out of its first item whose recorded
evidence could not be rebuilt (a timing document of another shape, a response the current
reader refuses) and the run stayed in ``scoring`` for good: the sweeper sent the re-grade
again every 5 minutes, it raised again, and a cancel was refused ("wait for the rescore to
finish"). Now such an item is graded ERROR / evaluator_error saying why (its evidence is
kept for a later re-score), as a grade that crashes is during a run; anything else that
stops the re-grade ends the run ``failed`` with the reason, as a failed scoring does, and
it can be re-scored again."""

from __future__ import annotations

import pytest

from runs import tasks
from runs.documents import run_document
from runs.models import Run, RunItem, RunLane
from runs.services import operations
from runs.services.operations import run_rescore
from tests.fakes.agent_server import FakeAgent, ok
from tests.runs.runfactory import create_run, drive, echo_answer, hosted, publish

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def completed(personas):
    version = publish(personas.workspace, cases=3)
    with FakeAgent() as agent:
        agent.default = ok(echo_answer)
        run = drive(create_run(personas.workspace, version, [hosted(personas.workspace, agent.url)]))
    assert run.status == "completed"
    return run


def test_an_item_whose_evidence_cannot_be_rebuilt_is_an_evaluator_error_and_the_rescore_completes(completed):
    item = RunItem.objects.get(run=completed, case_key="c1")
    evidence = {**item.evidence, "timing": {"recorded_by": "a later version"}}
    RunItem.objects.filter(pk=item.pk).update(evidence=evidence)
    run_rescore(run=completed, enqueue=False)

    assert tasks.rescore_run(str(completed.pk), 2) == 3

    run = Run.objects.get(pk=completed.pk)
    assert (run.status, run.scoring_revision) == ("completed", 2)
    item.refresh_from_db()
    assert (item.status, item.outcome_class, item.scoring_revision) == ("ERROR", "evaluator_error", 2)
    assert "could not be re-graded" in item.reason_code or "could not be re-graded" in str(item.grade)
    assert item.evidence == evidence  # kept: a later re-score reads it again
    lane = RunLane.objects.get(run=run)
    assert (lane.passed, lane.errored, lane.status) == (2, 1, "completed")


def test_a_regrade_that_raises_ends_the_run_failed_and_it_can_be_rescored_again(completed, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("the re-grade broke")

    monkeypatch.setattr(operations, "_regrade_batch", broken)
    run_rescore(run=completed, enqueue=False)
    with pytest.raises(RuntimeError, match="the re-grade broke"):
        tasks.rescore_run(str(completed.pk), 2)

    run = Run.objects.get(pk=completed.pk)
    assert run.status == "failed"
    assert "re-scoring failed" in run.status_reason and "the re-grade broke" in run.status_reason
    assert set(RunLane.objects.filter(run=run).values_list("status", flat=True)) == {"failed"}

    monkeypatch.undo()
    run_rescore(run=run, enqueue=False)
    assert tasks.rescore_run(str(run.pk), 3) == 3
    run.refresh_from_db()
    assert (run.status, run.scoring_revision) == ("completed", 3)
    assert set(RunItem.objects.filter(run=run).values_list("scoring_revision", flat=True)) == {3}


def test_a_failed_rescore_leaves_counts_that_agree_with_the_case_list(completed, monkeypatch):
    # The grades as an earlier engine gave them: every case FAILED.
    RunItem.objects.filter(run=completed).update(status="FAILED")
    RunLane.objects.filter(run=completed).update(passed=0, failed=3)
    monkeypatch.setattr(operations, "RESCORE_BATCH", 2)
    real, batches = operations._regrade_batch, []

    def second_batch_breaks(ctx, items, revision):
        if batches:
            raise RuntimeError("the re-grade broke")
        batches.append(len(items))
        return real(ctx, items, revision)

    monkeypatch.setattr(operations, "_regrade_batch", second_batch_breaks)
    run_rescore(run=completed, enqueue=False)
    with pytest.raises(RuntimeError):
        tasks.rescore_run(str(completed.pk), 2)

    run = Run.objects.get(pk=completed.pk)
    assert run.status == "failed"
    statuses = sorted(RunItem.objects.filter(run=run).values_list("status", flat=True))
    assert statuses == ["FAILED", "PASSED", "PASSED"]  # the first batch was re-graded
    doc = run_document(run)["lanes"][0]
    assert (doc["counts"]["PASSED"], doc["counts"]["FAILED"]) == (2, 1)
    # the figures come from the same grades (the counters), not the earlier revision's stats
    assert RunLane.objects.get(run=run).stats is None and doc["mean_score_interval"] is None


@pytest.mark.parametrize("stop", ["soft_time_limit", "connection_lost"])
def test_a_regrade_cut_short_by_its_time_limit_or_a_lost_connection_stays_to_be_resumed(
    completed, monkeypatch, stop
):
    # A big run's re-grade outlasts the task's soft time limit (15 minutes), or the database
    # goes away for a moment: the sweeper sends it again and it resumes where it stopped, as
    # before; neither is an error of the re-grade that ends the run failed.
    from celery.exceptions import SoftTimeLimitExceeded
    from django.db import OperationalError

    error = (
        SoftTimeLimitExceeded()
        if stop == "soft_time_limit"
        else OperationalError("server closed the connection")
    )
    monkeypatch.setattr(operations, "RESCORE_BATCH", 2)
    real, batches = operations._regrade_batch, []

    def cut_short(ctx, items, revision):
        if batches:
            raise error
        batches.append(len(items))
        return real(ctx, items, revision)

    monkeypatch.setattr(operations, "_regrade_batch", cut_short)
    run_rescore(run=completed, enqueue=False)
    with pytest.raises(type(error)):
        tasks.rescore_run(str(completed.pk), 2)
    assert Run.objects.get(pk=completed.pk).status == "scoring"

    monkeypatch.setattr(operations, "_regrade_batch", real)
    assert tasks.rescore_run(str(completed.pk), 2) == 1  # the rest
    assert Run.objects.get(pk=completed.pk).status == "completed"


def test_the_soft_time_limit_while_an_item_is_regraded_is_not_that_items_error(completed, monkeypatch):
    from celery.exceptions import SoftTimeLimitExceeded

    from runs.services import operations as ops

    def time_is_up(*args, **kwargs):
        raise SoftTimeLimitExceeded()

    monkeypatch.setattr(ops, "rebuild_evidence", time_is_up)
    run_rescore(run=completed, enqueue=False)
    with pytest.raises(SoftTimeLimitExceeded):
        tasks.rescore_run(str(completed.pk), 2)
    assert not RunItem.objects.filter(run=completed, status="ERROR").exists()
    assert Run.objects.get(pk=completed.pk).status == "scoring"  # resumed by the sweeper
