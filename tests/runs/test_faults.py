"""Fault tests with real processes: a worker SIGKILLed mid-run, its broker restarted mid-run,
its database connections terminated mid-run.

Each test starts its own ``redis-server`` on a free loopback port and real ``celery worker
-B`` processes pointed at the test database; nothing is enqueued from the test: the beat
sweeper (every second here) finds the queued lane and dispatches it, as it recovers any lost
work. Polls use bounded deadlines.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from runs.models import Attempt, GradeRevision, Run, RunItem, RunLane
from tests.fakes.agent_server import FakeAgent, hang, ok, slow
from tests.processes import Worker, redis_server, wait_until
from tests.runs.runfactory import create_run, echo_answer, hosted, publish

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

FAST_RECOVERY = {
    "RUNS_SWEEP_SECONDS": "0.5",
    "RUNS_CLAIM_MARGIN_SECONDS": "1",
    "RUNS_DISPATCH_SLICE_SECONDS": "3",
    "RUNS_LEASE_MARGIN_SECONDS": "1",
}


def beat_worker(broker_url: str, tmp: Path, name: str) -> Worker:
    """``celery worker -B`` with its own beat schedule file, in its own process group."""
    return Worker(
        broker_url=broker_url,
        queues=None,
        concurrency=2,
        beat=True,
        schedule_path=tmp / f"{name}-beat",
        env=FAST_RECOVERY,
        log_path=tmp / f"{name}.log",
    )


def _wait_completed(run: Run, worker: Worker, after: str) -> None:
    wait_until(
        lambda: Run.objects.get(pk=run.pk).status == "completed",
        timeout=120,
        interval=0.2,
        message=f"the run to complete after {after}\n{worker.log()}",
    )


def _graded(run: Run) -> int:
    return RunItem.objects.filter(run=run).exclude(status="").count()


def _assert_graded_exactly_once(run: Run, cases: int, agent: FakeAgent) -> None:
    run.refresh_from_db()
    assert run.status == "completed"
    assert RunItem.objects.filter(run=run, status="PASSED").count() == cases
    # one ok attempt per item (a second grading would have written a second one); a lost
    # claim is an infra_error attempt of its own, and its numbers are never sent again
    attempts = Attempt.objects.filter(item__run=run)
    assert attempts.filter(category="ok").count() == cases
    assert set(attempts.exclude(category="ok").values_list("category", "error_code")) <= {
        ("infra_error", "claim_expired"),
        ("infra_error", "dispatcher_failed"),
    }
    sent = [(r.json["item_id"], r.json["attempt"]) for r in agent.requests]
    assert len(set(sent)) == len(sent), "an agent saw the same attempt of an item twice"
    assert GradeRevision.objects.filter(item__run=run).count() == 0
    lane = RunLane.objects.get(run=run)
    assert (lane.passed, lane.pending, lane.infra_error) == (cases, 0, 0)
    assert lane.counters["tally"]["executions"] == cases  # counted once each


def test_a_worker_killed_mid_run_loses_nothing_and_grades_nothing_twice(personas, tmp_path):
    cases = 24
    version = publish(personas.workspace, cases=cases)
    with FakeAgent() as agent, redis_server() as port:
        agent.default = slow(0.4, ok(echo_answer))
        dep = hosted(personas.workspace, agent.url, max_in_flight=4, timeout_seconds=2, max_attempts=2)
        run = create_run(personas.workspace, version, [dep])
        broker = f"redis://127.0.0.1:{port}/0"
        first = beat_worker(broker, tmp_path, "first")
        try:
            wait_until(lambda: _graded(run) >= 4, timeout=60, message=f"4 graded items\n{first.log()}")
            wait_until(
                lambda: RunItem.objects.filter(run=run, state="claimed").exists(),
                timeout=10,
                message="a claim",
            )
            first.kill()
        finally:
            first.stop()
        in_flight = RunItem.objects.filter(run=run, state="claimed").count()
        assert in_flight > 0 and _graded(run) < cases
        second = beat_worker(broker, tmp_path, "second")
        try:
            _wait_completed(run, second, "the restart")
        finally:
            second.stop()
        assert agent.calls >= cases + 1  # the lost claims were sent again
    _assert_graded_exactly_once(run, cases, agent)


def test_the_run_completes_when_its_broker_restarts_mid_run(personas, tmp_path):
    cases = 24
    version = publish(personas.workspace, cases=cases)
    with FakeAgent() as agent:
        agent.default = slow(0.3, ok(echo_answer))
        dep = hosted(personas.workspace, agent.url, max_in_flight=3, timeout_seconds=2, max_attempts=2)
        run = create_run(personas.workspace, version, [dep])
        with redis_server() as port:
            broker = f"redis://127.0.0.1:{port}/0"
            worker = beat_worker(broker, tmp_path, "worker")
            try:
                wait_until(lambda: _graded(run) >= 3, timeout=60, message=f"3 graded items\n{worker.log()}")
            except BaseException:
                worker.stop()
                raise
        # the broker is gone (and its queue with it: no persistence); bring up a new one
        assert _graded(run) < cases
        try:
            with redis_server(port):
                _wait_completed(run, worker, "the broker restart")
        finally:
            worker.stop()
    _assert_graded_exactly_once(run, cases, agent)


def test_the_run_completes_when_the_workers_database_connections_are_terminated(personas, tmp_path):
    """PostgreSQL ends every connection of the worker mid-run (``pg_terminate_backend``, as
    a database restart or failover does): the slice in progress fails, its claims expire and
    the sweeper gives them out again; nothing is lost and nothing graded twice."""
    from django.db import connection

    cases = 24
    version = publish(personas.workspace, cases=cases)
    with FakeAgent() as agent, redis_server() as port:
        agent.default = slow(0.3, ok(echo_answer))
        dep = hosted(personas.workspace, agent.url, max_in_flight=4, timeout_seconds=2, max_attempts=3)
        run = create_run(personas.workspace, version, [dep])
        worker = beat_worker(f"redis://127.0.0.1:{port}/0", tmp_path, "worker")
        try:
            wait_until(lambda: _graded(run) >= 4, timeout=60, message=f"4 graded items\n{worker.log()}")
            wait_until(
                lambda: RunItem.objects.filter(run=run, state="claimed").exists(),
                timeout=10,
                message="a claim",
            )
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                    " WHERE datname = current_database() AND pid <> pg_backend_pid()"
                )
                (terminated,) = cursor.fetchone()
            assert terminated >= 1
            assert _graded(run) < cases
            _wait_completed(run, worker, "its connections were terminated")
        finally:
            worker.stop()
    _assert_graded_exactly_once(run, cases, agent)


def test_a_worker_told_to_stop_gives_its_claims_back_and_the_next_worker_goes_on(personas, tmp_path):
    """SIGTERM to a worker (Celery's warm shutdown: a deploy, ``make run``'s Ctrl-C) with
    calls in flight to an agent that does not answer: its slice stops claiming, cancels the
    calls after its grace, gives the items back and exits. The claims would otherwise come
    back only after timeout x attempts + margin (here 60 x 2 + 600 s: past every deadline of
    this test). A new worker then runs every item once; the cancelled attempts count
    against nothing and their numbers are not sent again."""
    cases = 12
    version = publish(personas.workspace, cases=cases)
    with FakeAgent() as agent:
        agent.default = hang()
        dep = hosted(personas.workspace, agent.url, max_in_flight=4, timeout_seconds=60, max_attempts=2)
        run = create_run(personas.workspace, version, [dep])
        with redis_server() as port:
            broker = f"redis://127.0.0.1:{port}/0"
            slow_claims = {
                **FAST_RECOVERY,
                "RUNS_CLAIM_MARGIN_SECONDS": "600",
                "RUNS_DISPATCH_SLICE_SECONDS": "20",
            }
            first = Worker(
                broker_url=broker, queues=None, concurrency=2, beat=True,
                schedule_path=tmp_path / "first-beat", env=slow_claims, log_path=tmp_path / "first.log",
            )  # fmt: skip
            try:
                wait_until(lambda: agent.calls >= 4, timeout=60, message=f"4 calls in flight\n{first.log()}")
                held = set(RunItem.objects.filter(run=run, state="claimed").values_list("pk", flat=True))
                assert len(held) == 4
                first.proc.send_signal(signal.SIGTERM)  # the leader only, as a deploy or devserver does
                wait_until(
                    lambda: first.proc.poll() is not None,
                    timeout=60,
                    message=f"the worker to exit on SIGTERM\n{first.log()}",
                )
            finally:
                first.stop()
            assert first.proc.returncode == 0, first.log()
            # given back before the worker exited, not left to the sweeper
            assert not RunItem.objects.filter(run=run, state="claimed").exists()
            released = RunItem.objects.filter(run=run, pk__in=held)
            assert {(i.state, i.claims, i.attempt_count) for i in released} == {("pending", 0, 1)}
            stopped = Attempt.objects.filter(item__run=run, category="cancelled", error_code="worker_stopped")
            assert set(stopped.values_list("item_id", "number")) == {(pk, 1) for pk in held}
            calls_before = agent.calls
            agent.default = ok(echo_answer)
            second = Worker(
                broker_url=broker, queues=None, concurrency=2, beat=True,
                schedule_path=tmp_path / "second-beat", env=slow_claims, log_path=tmp_path / "second.log",
            )  # fmt: skip
            try:
                _wait_completed(run, second, "the warm shutdown")
            finally:
                second.stop()
        # the released items were re-claimed and sent again by the second worker, as attempt 2
        resent = {r.json["item_id"]: r.json["attempt"] for r in agent.requests[calls_before:]}
        first_sent = {r.json["item_id"] for r in agent.requests[:calls_before]}
        assert all(resent[item_id] == 2 for item_id in first_sent)
        assert len(resent) == cases
        sent = [(r.json["item_id"], r.json["attempt"]) for r in agent.requests]
    assert len(set(sent)) == len(sent), "an agent saw the same attempt of an item twice"
    run.refresh_from_db()
    assert run.status == "completed"
    attempts = Attempt.objects.filter(item__run=run)
    assert attempts.filter(category="ok").count() == cases  # graded exactly once each
    assert set(attempts.exclude(category="ok").values_list("category", "error_code")) == {
        ("cancelled", "worker_stopped")
    }
    assert set(RunItem.objects.filter(run=run).values_list("claims", flat=True)) == {1}
    assert GradeRevision.objects.filter(item__run=run).count() == 0
    lane = RunLane.objects.get(run=run)
    assert (lane.passed, lane.pending, lane.infra_error) == (cases, 0, 0)
    assert lane.counters["tally"]["executions"] == cases
