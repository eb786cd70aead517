"""Cancel while running, retry failed items, re-score keeps the old revision; the sweeper."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from runs.dispatch import claim_items, dispatch_lane
from runs.models import Attempt, GradeRevision, RunItem, RunLane, SweeperStatus
from runs.services.operations import run_cancel, run_rescore, run_retry_failed
from runs.services.runs import RunError
from runs.sweeper import sweep
from tests.fakes.agent_server import FakeAgent, ok, rate_limited, raw, slow
from tests.runs.runfactory import create_run, drive, echo_answer, hosted, publish

pytestmark = pytest.mark.django_db(transaction=True)


def _dispatch_in_thread(lane_id: int) -> threading.Thread:
    def work() -> None:
        try:
            dispatch_lane(lane_id, time_slice=30)
        finally:
            connection.close()

    thread = threading.Thread(target=work)
    thread.start()
    return thread


def test_cancel_while_running_ends_the_calls_in_flight_and_grades_nothing_more(personas):
    # The calls in flight used to finish and be graded into the cancelled run, whose
    # figures then changed after the cancel.
    version = publish(personas.workspace, cases=6)
    with FakeAgent() as agent:
        agent.default = slow(5, ok(echo_answer))
        dep = hosted(personas.workspace, agent.url, max_in_flight=2)
        run = create_run(personas.workspace, version, [dep])
        lane = RunLane.objects.get(run=run)
        thread = _dispatch_in_thread(lane.pk)
        agent.wait_for_calls(2, timeout=10)
        run_cancel(run=run)
        # Right away: every item is cancelled, the two claimed ones included.
        assert sorted(RunItem.objects.filter(run=run).values_list("state", flat=True)) == ["cancelled"] * 6
        thread.join(timeout=30)
        assert not thread.is_alive()
        assert agent.calls == 2  # nothing new started
    run.refresh_from_db()
    assert run.status == "cancelled"
    assert list(RunItem.objects.filter(run=run).exclude(status="").values_list("status", flat=True)) == []
    assert not Attempt.objects.filter(item__run=run).exists()
    lane.refresh_from_db()
    assert (lane.status, lane.cancelled, lane.pending, lane.passed) == ("cancelled", 6, 0, 0)
    assert run.items_open == 0
    with pytest.raises(RunError) as info:
        run_cancel(run=run)
    assert info.value.code == "run_finished"


def test_a_cancel_stops_the_retries_of_a_call_in_flight(personas):
    version = publish(personas.workspace, cases=1)
    with FakeAgent() as agent:
        # 503 with Retry-After 2: the retry would come 2 s later, after the cancel.
        agent.default = rate_limited("2", status=503)
        dep = hosted(personas.workspace, agent.url, max_attempts=3)
        run = create_run(personas.workspace, version, [dep])
        thread = _dispatch_in_thread(RunLane.objects.get(run=run).pk)
        agent.wait_for_calls(1, timeout=10)
        run_cancel(run=run)
        thread.join(timeout=30)
        assert agent.calls == 1
    item = RunItem.objects.get(run=run)
    assert (item.state, item.status, item.last_category) == ("cancelled", "", "cancelled")


def test_retry_failed_resends_only_infra_and_config_failures(personas):
    version = publish(personas.workspace, cases=3)
    with FakeAgent() as agent:
        agent.default = ok(echo_answer)
        agent.queue(raw("{}", status=401), case="c1")
        agent.queue(ok({"final_output": "wrong"}), case="c2")
        dep = hosted(personas.workspace, agent.url)
        run = drive(create_run(personas.workspace, version, [dep]))
        assert run.status == "completed"
        assert RunLane.objects.get(run=run).config_error == 1
        assert run_retry_failed(run=run, enqueue=False) == 1
        run.refresh_from_db()
        assert run.status == "running"
        run = drive(run)
        assert agent.calls_for("c1") == 2 and agent.calls_for("c2") == 1 and agent.calls_for("c0") == 1
    assert run.status == "completed"
    c1 = RunItem.objects.get(run=run, case_key="c1")
    assert c1.status == "PASSED"
    assert list(Attempt.objects.filter(item=c1).values_list("number", "category")) == [
        (1, "config_error"),
        (2, "ok"),
    ]
    lane = RunLane.objects.get(run=run)
    assert (lane.passed, lane.failed, lane.config_error) == (2, 1, 0)
    with pytest.raises(RunError) as info:
        run_retry_failed(run=run)
    assert info.value.code == "nothing_to_retry"


def test_rescore_regrades_recorded_evidence_and_keeps_the_old_revision(
    personas, monkeypatch, django_capture_on_commit_callbacks
):
    from runs import tasks

    sent = []
    monkeypatch.setattr(tasks.rescore_run, "delay", lambda *args: sent.append(args))
    version = publish(personas.workspace, cases=2)
    with FakeAgent() as agent:
        agent.default = ok(echo_answer)
        dep = hosted(personas.workspace, agent.url)
        run = drive(create_run(personas.workspace, version, [dep]))
        calls = agent.calls
        finished = (run.finished_at, RunLane.objects.get(run=run).finished_at)
        assert None not in finished
        with django_capture_on_commit_callbacks(execute=True):
            opened = run_rescore(run=run)
        assert opened.finished_at == finished[0]  # re-scoring is not running again
        # the request only opens the revision and enqueues the task
        assert (opened.status, opened.scoring_revision) == ("scoring", 2)
        assert sent == [(str(run.pk), 2)]
        assert set(RunItem.objects.filter(run=run).values_list("scoring_revision", flat=True)) == {1}
        assert set(RunLane.objects.filter(run=run).values_list("status", flat=True)) == {"scoring"}
        with pytest.raises(RunError) as info:
            run_rescore(run=opened)  # not twice at once
        assert info.value.code == "run_not_rescorable"
        assert tasks.rescore_run(str(run.pk), 2) == 2
        assert agent.calls == calls  # no agent was called
    run.refresh_from_db()
    assert (run.status, run.scoring_revision) == ("completed", 2)
    item = RunItem.objects.get(run=run, case_key="c0")
    assert (item.scoring_revision, item.status) == (2, "PASSED")
    old = GradeRevision.objects.get(item=item)
    assert (old.revision, old.status) == (1, "PASSED")
    assert old.grade["status"] == "PASSED"
    lane = RunLane.objects.get(run=run)
    assert (lane.passed, lane.failed, lane.status) == (2, 0, "completed")
    assert lane.counters["tally"]["executions"] == 2
    # the run and its lane finished when they first did: a rescore does not change a duration
    assert (run.finished_at, lane.finished_at) == finished
    assert run.stats["scoring_revision"] == 2
    # a redelivered task does nothing twice
    assert tasks.rescore_run(str(run.pk), 2) == 0
    assert GradeRevision.objects.filter(item__run=run).count() == 2


def _rescoring(personas, monkeypatch, *, cases: int, batch: int):
    """A completed run of ``cases`` items, rescored (revision 2, not enqueued), its
    re-grade to run in batches of ``batch`` items."""
    from runs.services import operations

    monkeypatch.setattr(operations, "RESCORE_BATCH", batch)
    version = publish(personas.workspace, cases=cases)
    with FakeAgent() as agent:
        agent.default = ok(echo_answer)
        run = drive(create_run(personas.workspace, version, [hosted(personas.workspace, agent.url)]))
    return run_rescore(run=run, enqueue=False)


def test_a_rescore_interrupted_midway_resumes_where_it_stopped(personas, monkeypatch):
    from runs import tasks
    from runs.scoring import finalize_run
    from runs.services import operations

    sent = []
    monkeypatch.setattr(tasks.rescore_run, "delay", lambda *args: sent.append(args))
    run = _rescoring(personas, monkeypatch, cases=5, batch=2)
    real = operations._regrade_batch
    batches = []

    def dies_after_one_batch(ctx, items, revision):
        if batches:
            # the worker is stopped (billiard exits a pool process on SIGTERM); an error of
            # the re-grade itself ends the run failed (tests/runs/test_rescore_failures.py)
            raise SystemExit("worker lost")
        batches.append(len(items))
        return real(ctx, items, revision)

    monkeypatch.setattr(operations, "_regrade_batch", dies_after_one_batch)
    with pytest.raises(SystemExit):
        operations.run_rescore_execute(run_id=run.pk, revision=2)
    assert RunItem.objects.filter(run=run, scoring_revision=2).count() == 2
    # the sweeper's finalize of a run stuck in scoring re-enqueues the re-grade, never completes it half done
    run.refresh_from_db()
    finalize_run(run)  # a batch was just written: the task may still be running
    run.refresh_from_db()
    assert run.status == "scoring" and sent == []
    GradeRevision.objects.filter(item__run=run).update(created_at=timezone.now() - timedelta(minutes=6))
    finalize_run(run)  # stalled: enqueued again
    run.refresh_from_db()
    assert run.status == "scoring" and sent == [(str(run.pk), 2)]
    monkeypatch.setattr(operations, "_regrade_batch", real)
    assert operations.run_rescore_execute(run_id=run.pk, revision=2) == 3
    run.refresh_from_db()
    assert (run.status, GradeRevision.objects.filter(item__run=run, revision=1).count()) == ("completed", 5)
    assert RunLane.objects.get(run=run).passed == 5


@pytest.mark.parametrize(
    ("lost", "expected"),
    [("grading 1", (0, 1)), ("grading 2", (1, 2)), ("after 1", (1, 1))],
)
def test_a_rescore_whose_lease_was_taken_over_writes_no_further_batch(
    personas, monkeypatch, caplog, lost, expected
):
    """A rescore worker whose lease lapsed and was claimed by another (it paused, or its
    connections were cut for longer than the lease) went on grading every remaining batch
    (its judge calls paid again) and writing the grades beside the new owner. It now does
    not write the batch it was grading when it lost the lease, grades no further batch,
    and logs why. ``expected``: (items written, items graded) of 3, one per batch."""
    from runs.models import Run
    from runs.services import operations

    run = _rescoring(personas, monkeypatch, cases=3, batch=1)
    real_grade, real_batch = operations.grade_evidence, operations._regrade_batch
    graded: list[int] = []

    def take_over() -> None:
        Run.objects.filter(pk=run.pk).update(
            scoring_owner="another-worker", scoring_until=timezone.now() + timedelta(minutes=1)
        )

    def grade(*args, **kwargs):
        graded.append(1)
        result = real_grade(*args, **kwargs)
        if lost == f"grading {len(graded)}":
            take_over()
        return result

    def batch(ctx, items, revision):
        written = real_batch(ctx, items, revision)
        if lost == "after 1":
            take_over()
        return written

    monkeypatch.setattr(operations, "grade_evidence", grade)
    monkeypatch.setattr(operations, "_regrade_batch", batch)
    done = operations.run_rescore_execute(run_id=run.pk, revision=2)
    assert (done, len(graded)) == expected
    assert RunItem.objects.filter(run=run, scoring_revision=2).count() == expected[0]
    run.refresh_from_db()
    assert (run.status, run.scoring_owner) == ("scoring", "another-worker")  # left to its owner
    assert "another process took the run over" in caplog.text


def test_a_rescore_whose_lease_was_taken_over_does_not_rebuild_the_lane_counters(
    personas, monkeypatch, caplog
):
    """After a lane's last batch the rescore rebuilds the lane's counters and status counts
    from its grades. A worker whose lease was taken over right then wrote that rebuild over
    the lane regardless (no fence): the new owner's writes since (an n_wise grade moves a
    lane's counters and counts under the lease) were replaced by figures it read before."""
    from runs.models import Run
    from runs.services import operations

    run = _rescoring(personas, monkeypatch, cases=2, batch=2)
    real_batch = operations._regrade_batch

    def batch(ctx, items, revision):
        written = real_batch(ctx, items, revision)
        Run.objects.filter(pk=run.pk).update(
            scoring_owner="another-worker", scoring_until=timezone.now() + timedelta(minutes=1)
        )
        RunLane.objects.filter(run=run).update(passed=7, counters={"by": "another-worker"})  # its writes
        return written

    monkeypatch.setattr(operations, "_regrade_batch", batch)
    assert operations.run_rescore_execute(run_id=run.pk, revision=2) == 2
    lane = RunLane.objects.get(run=run)
    assert (lane.passed, lane.counters) == (7, {"by": "another-worker"})
    run.refresh_from_db()
    assert (run.status, run.scoring_owner) == ("scoring", "another-worker")
    assert "another process took the run over" in caplog.text


def test_a_cancel_after_a_rescores_last_batch_leaves_counters_that_agree_with_the_grades(
    personas, monkeypatch
):
    """A cancel is refused while re-grade batches are pending, not once the last is written:
    the lane's counters are still rebuilt then (from the grades written before the cancel),
    and nothing more (the run is not finalised)."""
    from runs.services import operations

    run = _rescoring(personas, monkeypatch, cases=2, batch=2)
    real_batch = operations._regrade_batch

    def batch(ctx, items, revision):
        written = real_batch(ctx, items, revision)
        run_cancel(run=run)
        RunLane.objects.filter(run=run).update(passed=7)
        return written

    monkeypatch.setattr(operations, "_regrade_batch", batch)
    assert operations.run_rescore_execute(run_id=run.pk, revision=2) == 2
    assert RunLane.objects.get(run=run).passed == 2
    run.refresh_from_db()
    assert run.status == "cancelled"


def test_sweeper_returns_expired_claims_and_gives_up_after_max_attempts(personas):
    version = publish(personas.workspace, cases=2)
    with FakeAgent() as agent:
        agent.default = ok(echo_answer)
        dep = hosted(personas.workspace, agent.url, max_attempts=2)
        run = create_run(personas.workspace, version, [dep])
        lane = RunLane.objects.get(run=run)
        rows = claim_items(lane=lane, run=run, deployment=dep, owner="dead-worker")
        assert len(rows) == 2
        past = timezone.now() - timedelta(seconds=1)
        RunItem.objects.filter(run=run).update(claim_deadline=past)
        RunItem.objects.filter(run=run, case_key="c1").update(claims=2)  # lost twice already
        result = sweep()
        assert result["returned_claims"] == 1 and result["ended_infra_error"] == 1
        assert SweeperStatus.objects.get(name="runs").last_result == result
        c1 = RunItem.objects.get(run=run, case_key="c1")
        assert (c1.state, c1.last_category) == ("done", "infra_error")
        assert Attempt.objects.get(item=c1).error_code == "claim_expired"
        run = drive(run)
    assert run.status == "completed"
    lane.refresh_from_db()
    assert (lane.passed, lane.infra_error, lane.pending) == (1, 1, 0)


def test_an_item_given_out_again_after_a_lost_claim_gets_a_higher_attempt_number(personas):
    """After a lost claim the item went out again as attempt 1: the agent saw (item_id,
    attempt 1) twice (agent-protocol.md: attempt numbers count every try, max_attempts
    counts them). The lost claim is now an infra_error attempt (claim_expired) and its
    numbers (the first and the in-place retries it may have sent) are never sent again."""
    version = publish(personas.workspace, cases=1)
    with FakeAgent() as agent:
        agent.default = ok(echo_answer)
        dep = hosted(personas.workspace, agent.url, max_attempts=2)
        run = create_run(personas.workspace, version, [dep])
        lane = RunLane.objects.get(run=run)
        (row,) = claim_items(lane=lane, run=run, deployment=dep, owner="dead-worker")
        # what the lost worker may have sent: its attempt and its in-place retry
        lost = set(range(row["attempt_count"] + 1, row["attempt_count"] + dep.max_attempts + 1))
        RunItem.objects.filter(run=run).update(claim_deadline=timezone.now() - timedelta(seconds=1))
        assert sweep()["returned_claims"] == 1
        run = drive(run)
        sent = [r.json["attempt"] for r in agent.requests]
    assert run.status == "completed"
    assert sent and not lost & set(sent)
    item = RunItem.objects.get(run=run)
    attempts = list(item.attempts.values_list("number", "category", "error_code"))
    assert attempts == [(1, "infra_error", "claim_expired"), (3, "ok", "")]
    assert "attempts 1 to 2 may have reached the agent" in item.attempts.get(number=1).error
    assert (item.status, item.attempt_count, item.last_category) == ("PASSED", 3, "ok")
    lane.refresh_from_db()
    assert (lane.passed, lane.infra_error, lane.pending) == (1, 0, 0)


def test_a_run_or_lane_that_raises_costs_the_sweep_only_itself(personas, monkeypatch, caplog):
    """One run whose scoring raises, or one lane whose claims cannot be returned, used to end
    the sweep: no later claim returned, no later run closed, the sweep's status not stored,
    on every sweep for as long as it raised. Each is now logged and counted in ``errors``."""
    from runs import scoring, sweeper

    version = publish(personas.workspace, cases=2)
    with FakeAgent() as agent:
        agent.default = ok(echo_answer)
        dep = hosted(personas.workspace, agent.url)
        monkeypatch.setattr("runs.scoring.check_lane_and_run", lambda lane_id: None)  # left open
        first, second = (create_run(personas.workspace, version, [dep]) for _ in range(2))
        for run in (first, second):
            dispatch_lane(RunLane.objects.get(run=run).pk, time_slice=10)
        monkeypatch.undo()
        # two runs with claims a dead worker left
        stale = [create_run(personas.workspace, version, [dep]) for _ in range(2)]
    for run in stale:
        lane = RunLane.objects.get(run=run)
        assert len(claim_items(lane=lane, run=run, deployment=dep, owner="dead-worker")) == 2
        RunItem.objects.filter(run=run).update(claim_deadline=timezone.now() - timedelta(seconds=1))
    bad_lane = RunLane.objects.get(run=stale[0]).pk
    return_claims, compute_stats = sweeper._return_lane_claims, scoring.compute_stats

    def flaky_return(lane_id, now):
        if lane_id == bad_lane:
            raise RuntimeError("lane boom")
        return return_claims(lane_id, now)

    def flaky_stats(run, **kwargs):
        if run.pk == first.pk:
            raise RuntimeError("stats boom")
        return compute_stats(run, **kwargs)

    monkeypatch.setattr(sweeper, "_return_lane_claims", flaky_return)
    monkeypatch.setattr(scoring, "compute_stats", flaky_stats)
    result = sweep()
    assert (result["returned_claims"], result["closed_runs"], result["errors"]) == (2, 1, 2)
    assert SweeperStatus.objects.get(name="runs").last_result == result
    first.refresh_from_db()
    second.refresh_from_db()
    assert (first.status, second.status) == ("failed", "completed")
    assert RunItem.objects.filter(run=stale[1], state="pending").count() == 2
    assert RunItem.objects.filter(run=stale[0], state="claimed").count() == 2  # next sweep's
    assert "returning the expired claims of lane" in caplog.text and "closing run" in caplog.text


def test_retry_failed_drops_the_summary_and_comparisons_computed_without_the_retried_items(personas):
    # The run page kept the first summary ("Gates passed –", assertion health 0/0 for the
    # retried lane), its scoring revision being unchanged.
    from runs.compare_tasks import comparison_request, compute_comparison
    from runs.models import RunComparison, RunResultSummary
    from runs.result_tasks import compute_result_summary

    version = publish(personas.workspace, cases=2)
    with FakeAgent() as agent:
        agent.default = raw("{}", status=401)
        dep = hosted(personas.workspace, agent.url)
        run = drive(create_run(personas.workspace, version, [dep]))
        other = drive(create_run(personas.workspace, version, [dep]))
        compute_result_summary(str(run.id))
        comparison = comparison_request(baseline=other, candidate=run)
        compute_comparison(str(comparison.pk))
        health = RunResultSummary.objects.get(run=run).assertion_health
        assert all(sum(t.get("PASSED", 0) for t in h["lanes"].values()) == 0 for h in health)
        agent.default = ok(echo_answer)
        run_retry_failed(run=run, enqueue=False)
        assert not RunResultSummary.objects.filter(run=run).exists()
        assert not RunComparison.objects.filter(candidate=run).exists()
        run = drive(run)
    compute_result_summary(str(run.id))
    health = RunResultSummary.objects.get(run=run).assertion_health
    assert sum(t.get("PASSED", 0) for h in health for t in h["lanes"].values()) == 2


@pytest.mark.parametrize("step", ["check_run", "check_lane_and_run"])
def test_a_retry_landing_while_the_run_is_being_closed_keeps_it_running(personas, monkeypatch, step):
    """The closer read the run's (or lane's) counter at 0; a "retry failed items" on the
    running run committed before the closer moved the lane and the run to scoring. The moves
    were guarded by the status only, so the lane went to scoring and the run completed with
    the retried item pending, never dispatched again (a dispatcher leaves a scoring lane
    alone). Now the moves to scoring are guarded by the counters too."""
    import runs.scoring as scoring
    from runs.models import Run

    version = publish(personas.workspace, cases=2)
    with FakeAgent() as agent:
        agent.default = ok(echo_answer)
        agent.queue(raw("{}", status=401), case="c1")
        dep = hosted(personas.workspace, agent.url)
        run = drive(create_run(personas.workspace, version, [dep]))
        assert run.status == "completed"
        # as it was just before its last item's result closed it: running, nothing open
        Run.objects.filter(pk=run.pk).update(status="running")
        RunLane.objects.filter(run=run).update(status="running")
        lane = RunLane.objects.get(run=run)
        real = scoring.transition_lane
        raced = []

        def retry_first(*args, **kwargs):
            if not raced:
                raced.append(run_retry_failed(run=Run.objects.get(pk=run.pk), enqueue=False))
            return real(*args, **kwargs)

        monkeypatch.setattr(scoring, "transition_lane", retry_first)
        if step == "check_run":
            scoring.check_run(run.pk)
        else:
            scoring.check_lane_and_run(lane.pk)
        monkeypatch.setattr(scoring, "transition_lane", real)
        assert raced == [1]
        run.refresh_from_db()
        lane.refresh_from_db()
        assert (run.status, run.items_open, lane.status, lane.pending) == ("running", 1, "running", 1)
        run = drive(run)
        assert agent.calls_for("c1") == 2
    assert run.status == "completed"
    assert RunItem.objects.get(run=run, case_key="c1").status == "PASSED"
    assert RunLane.objects.get(run=run).passed == 2


def test_a_claim_is_kept_while_its_result_is_graded_past_the_claim_deadline(personas, monkeypatch, settings):
    """The claim deadline covers the item's calls (timeout x attempts + backoffs) plus a
    margin, not its grading: judges (60 s per call, retried, several samples) can take longer
    than the margin, and the sweeper then took the item back while it was being graded: its
    result was thrown away, and the item was called again or (claimed max_attempts times
    already) ended infra_error, claim_expired, a healthy agent's answer lost. Now the live
    dispatcher keeps its claims from expiring."""
    import time as _time

    from runs import dispatch as dispatch_module

    settings.RUNS_CLAIM_MARGIN_SECONDS = 0.5
    grading, release = threading.Event(), threading.Event()
    grade = dispatch_module.grade_outcomes

    def slow_grade(*args, **kwargs):
        if not grading.is_set():
            grading.set()
            release.wait(timeout=20)  # a judge taking its time
        return grade(*args, **kwargs)

    monkeypatch.setattr(dispatch_module, "grade_outcomes", slow_grade)
    version = publish(personas.workspace, cases=1)
    with FakeAgent() as agent:
        agent.default = ok(echo_answer)
        dep = hosted(personas.workspace, agent.url, timeout_seconds=1, max_attempts=1)
        run = create_run(personas.workspace, version, [dep])
        lane = RunLane.objects.get(run=run)
        thread = _dispatch_in_thread(lane.pk)
        try:
            assert grading.wait(timeout=20)
            item = RunItem.objects.get(run=run)
            first_deadline = item.claimed_at + timedelta(seconds=1 + 0.5)
            limit = _time.monotonic() + 20
            while timezone.now() <= first_deadline + timedelta(seconds=0.3):
                assert _time.monotonic() < limit
                _time.sleep(0.05)
            swept = sweep()
            item.refresh_from_db()
            assert (swept["returned_claims"], swept["ended_infra_error"], item.state) == (0, 0, "claimed")
        finally:
            release.set()
            thread.join(timeout=30)
        assert not thread.is_alive()
        assert agent.calls == 1
    item.refresh_from_db()
    assert (item.state, item.status, item.claims) == ("done", "PASSED", 1)
    assert RunLane.objects.get(run=run).passed == 1


def test_a_summary_computed_while_a_retry_reopens_the_run_is_not_kept(personas, monkeypatch):
    """The summary task read the run's grades, then "retry failed items" dropped the summary
    row, then the task wrote its (now stale) figures as the ready summary of the same scoring
    revision: the run's completion found a ready summary and never computed it again, so the
    page kept assertion health without the retried items. Now the task writes only over the
    request it was started for (the row not deleted or requested again in between)."""
    from runs import result_tasks
    from runs.models import Run, RunResultSummary

    sent = []
    monkeypatch.setattr(result_tasks.compute_result_summary, "delay", lambda run_id: sent.append(run_id))
    version = publish(personas.workspace, cases=2)
    with FakeAgent() as agent:
        agent.default = raw("{}", status=401)
        dep = hosted(personas.workspace, agent.url)
        run = drive(create_run(personas.workspace, version, [dep]))
        assert run.status == "completed" and sent == [str(run.pk)]
        compute = result_tasks._compute

        def retried_meanwhile(run_):
            figures = compute(run_)
            agent.default = ok(echo_answer)
            run_retry_failed(run=Run.objects.get(pk=run_.pk), enqueue=False)
            return figures

        monkeypatch.setattr(result_tasks, "_compute", retried_meanwhile)
        result_tasks.compute_result_summary(str(run.pk))
        monkeypatch.setattr(result_tasks, "_compute", compute)
        assert not RunResultSummary.objects.filter(run=run, status="ready").exists()
        run = drive(run)
    assert run.status == "completed"
    assert sent == [str(run.pk), str(run.pk)]  # requested again at the second completion
    result_tasks.compute_result_summary(str(run.pk))
    summary = RunResultSummary.objects.get(run=run)
    assert summary.status == "ready"
    assert sum(t.get("PASSED", 0) for h in summary.assertion_health for t in h["lanes"].values()) == 2


def test_a_run_cannot_be_cancelled_halfway_through_its_rescore(personas, monkeypatch):
    """A cancel during a rescore ended the run while the re-grade task went on: items were
    re-graded and the lane counters rebuilt after the cancel (a cancelled run's figures
    changed), or, had the task stopped, the run would keep items of two revisions with
    counters of neither. Now a cancel is refused (409) while items wait for their re-grade;
    the rescore completes and the run can be used again."""
    from runs import tasks
    from runs.services import operations

    monkeypatch.setattr(tasks.rescore_run, "delay", lambda *args: None)
    monkeypatch.setattr(operations, "RESCORE_BATCH", 1)
    version = publish(personas.workspace, cases=2)
    with FakeAgent() as agent:
        agent.default = ok(echo_answer)
        dep = hosted(personas.workspace, agent.url)
        run = drive(create_run(personas.workspace, version, [dep]))
    run = run_rescore(run=run)
    regrade = operations._regrade_batch
    refused = []

    def cancel_between_batches(ctx, items, revision):
        written = regrade(ctx, items, revision)
        if not refused:
            with pytest.raises(RunError) as info:
                run_cancel(run=run)
            refused.append((info.value.code, info.value.status_code))
        return written

    monkeypatch.setattr(operations, "_regrade_batch", cancel_between_batches)
    assert tasks.rescore_run(str(run.pk), 2) == 2
    assert refused == [("run_rescoring", 409)]
    run.refresh_from_db()
    assert (run.status, run.scoring_revision) == ("completed", 2)
    assert set(RunItem.objects.filter(run=run).values_list("scoring_revision", flat=True)) == {2}
    lane = RunLane.objects.get(run=run)
    assert (lane.passed, lane.status, lane.cancelled) == (2, "completed", 0)


def test_the_sweeper_does_not_score_a_run_again_while_its_scoring_still_runs(personas, monkeypatch):
    """The sweeper scores again a run in scoring for 5 minutes (its worker died), but it
    could not tell a lost scoring from a long one (an n_wise pass or a critique over a big
    run): a second finalize_run ran beside the first (every judge call twice, the ranked
    grades archived twice). Now the scoring process holds a lock the sweeper tries first."""
    from django.db import connection as conn

    from runs import judging
    from runs.models import Transition

    rank = judging.rank_run
    entered, swept = [], []

    def long_ranking(run):
        entered.append(run.pk)
        if len(entered) == 1:
            Transition.objects.filter(run_id=run.pk, entity="run").update(
                at=timezone.now() - timedelta(minutes=10)
            )

            def sweeper():
                try:
                    swept.append(sweep())
                finally:
                    conn.close()

            thread = threading.Thread(target=sweeper)
            thread.start()
            thread.join(timeout=60)
            assert not thread.is_alive()
        return rank(run)

    monkeypatch.setattr(judging, "rank_run", long_ranking)
    version = publish(personas.workspace, cases=2)
    with FakeAgent() as agent:
        agent.default = ok(echo_answer)
        dep = hosted(personas.workspace, agent.url)
        run = drive(create_run(personas.workspace, version, [dep]))
    assert run.status == "completed"
    assert len(entered) == 1
    assert swept and swept[0]["closed_runs"] == 0 and swept[0]["errors"] == 0


def test_a_rescore_batch_longer_than_the_stall_limit_is_not_started_twice(personas, monkeypatch):
    """A re-grade batch (500 items, judges) can take longer than RESCORE_STALL; the sweeper
    then took the live rescore for a lost one and enqueued it again, and a second task
    re-graded the same items beside the first (judge calls twice). Now the rescore task
    scores under the run's scoring lock: the sweeper's finalize, and a second task, find it
    held and leave the run alone."""
    from django.db import connection as conn

    from runs import tasks
    from runs.models import Transition
    from runs.services import operations

    sent = []
    monkeypatch.setattr(tasks.rescore_run, "delay", lambda *args: sent.append(args))
    run = _rescoring(personas, monkeypatch, cases=2, batch=1)
    real = operations._regrade_batch
    beside = []

    def slow_batch(ctx, items, revision):
        written = real(ctx, items, revision)
        if not beside:  # long after the last archived grade, as a slow batch is
            GradeRevision.objects.filter(item__run=run).update(
                created_at=timezone.now() - timedelta(minutes=6)
            )
            Transition.objects.filter(run_id=run.pk, entity="run").update(
                at=timezone.now() - timedelta(minutes=6)
            )

            def others():
                try:
                    beside.append((sweep()["closed_runs"], tasks.rescore_run(str(run.pk), 2)))
                finally:
                    conn.close()

            thread = threading.Thread(target=others)
            thread.start()
            thread.join(timeout=60)
            assert not thread.is_alive()
        return written

    monkeypatch.setattr(operations, "_regrade_batch", slow_batch)
    assert operations.run_rescore_execute(run_id=run.pk, revision=2) == 2
    assert beside == [(0, 0)] and sent == []
    run.refresh_from_db()
    assert run.status == "completed"
    assert GradeRevision.objects.filter(item__run=run).count() == 2


def test_a_lane_whose_last_claims_the_sweeper_ends_leaves_running(personas):
    """The sweeper ending a lane's last items (claimed max_attempts times) left the lane
    ``running`` while another lane of the run still ran: its page showed it working with
    nothing left to do until the whole run closed."""
    version = publish(personas.workspace, cases=1)
    with FakeAgent() as agent:
        agent.default = ok(echo_answer)
        lost = hosted(personas.workspace, agent.url, name="lost", max_attempts=1)
        other = hosted(personas.workspace, agent.url, name="other")
        run = create_run(personas.workspace, version, [lost, other])
        lane = RunLane.objects.get(run=run, deployment=lost)
        assert len(claim_items(lane=lane, run=run, deployment=lost, owner="dead-worker")) == 1
        RunItem.objects.filter(lane=lane).update(claim_deadline=timezone.now() - timedelta(seconds=1))
        assert sweep()["ended_infra_error"] == 1
        lane.refresh_from_db()
        assert (lane.status, lane.pending, lane.infra_error) == ("scoring", 0, 1)
        assert RunLane.objects.get(run=run, deployment=other).status == "queued"
        run.refresh_from_db()
        assert run.status in ("queued", "running")
        run = drive(run)
    assert run.status == "completed"
    lane.refresh_from_db()
    assert lane.status == "completed"
