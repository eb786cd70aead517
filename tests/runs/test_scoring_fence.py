"""A scorer whose database connection is cut cannot write the run's outcome beside another.

On PostgreSQL ``scoring_lock`` was a session advisory lock: when the scoring worker's
connection dropped (``pg_terminate_backend`` here; a network blip, a restart or a pooler in
life) the server released it while the worker went on once it connected again, so the
sweeper or another worker took the run and both scored it: judge calls paid twice, and the
scorecard written by whichever finished first. The lock is now the lease on the run's row on
every backend: it outlives the connection, and the outcome is written only by the lease's
owner, checked with the run's row locked in the writing transaction.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection

from runs import judging, scoring
from runs.models import Run, RunLane, Transition
from runs.scoring import check_run, finalize_run
from tests.fakes.agent_server import FakeAgent, ok
from tests.runs.runfactory import create_run, echo_answer, hosted, publish

pytestmark = pytest.mark.django_db(transaction=True)

DEADLINE_S = 30


@pytest.fixture
def postgres() -> None:
    if connection.vendor != "postgresql":
        pytest.skip("pg_terminate_backend needs PostgreSQL")


@pytest.fixture
def graded_run(personas, monkeypatch) -> Run:
    """A run whose two lanes graded every item and are left open (nothing scored yet)."""
    from runs.dispatch import dispatch_lane

    version = publish(personas.workspace, cases=3)
    with FakeAgent() as agent, monkeypatch.context() as patch:
        agent.default = ok(echo_answer)
        patch.setattr("runs.scoring.check_lane_and_run", lambda lane_id: None)
        deps = [hosted(personas.workspace, agent.url, name=f"agent{i}") for i in range(2)]
        run = create_run(personas.workspace, version, deps)
        for lane in RunLane.objects.filter(run=run):
            dispatch_lane(lane.pk, time_slice=10)
    run = Run.objects.get(pk=run.pk)
    assert (run.status, run.items_open) == ("running", 0)
    return run


@pytest.fixture
def scorers() -> Any:
    """The test's scorer threads: released and joined at its end, passed or not (a paused
    one would otherwise hold its connection to the test database)."""
    started: list[Scorer] = []
    yield started
    for scorer in started:
        scorer.go.set()
        scorer.thread.join(DEADLINE_S)


class Scorer:
    """``body()`` on a thread of its own (its own connection), pausing at ``pause()``: it
    says where it is (its backend's pid) and waits for ``go``."""

    def __init__(self, name: str, body: Callable[[], Any]) -> None:
        self.name, self.body = name, body
        self.paused, self.go = threading.Event(), threading.Event()
        self.pid: int | None = None
        self.result: Any = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name=name)

    def _run(self) -> None:
        try:
            self.result = self.body()
        except BaseException as exc:
            self.error = exc
        finally:
            self.paused.set()  # a scorer that ended early does not leave the test waiting
            connection.close()

    def pause(self) -> None:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            (self.pid,) = cursor.fetchone()
        self.paused.set()
        assert self.go.wait(DEADLINE_S)

    def start_and_wait_paused(self) -> Scorer:
        self.thread.start()
        assert self.paused.wait(DEADLINE_S)
        assert self.error is None, self.error
        return self

    def finish(self) -> Any:
        self.go.set()
        self.thread.join(DEADLINE_S)
        assert not self.thread.is_alive()
        if self.error is not None:
            raise self.error
        return self.result


def _pause_in(monkeypatch, where: str, scorers: dict[str, Scorer]) -> None:
    """Each scorer thread pauses once at ``where``: in its n_wise pass (``rank_run``, before
    any judge call) or right after its stats and critique (``compute_stats``, before the
    final writes). The stats say which scorer computed them (``scored_by``)."""
    real_rank, real_stats = judging.rank_run, scoring.compute_stats

    def rank_run(run: Any) -> int:
        if where == "rank_run" and (scorer := scorers.get(threading.current_thread().name)):
            scorer.pause()
        return real_rank(run)

    def compute_stats(run: Any, **kwargs: Any) -> dict[str, Any]:
        stats = {**real_stats(run, **kwargs), "scored_by": threading.current_thread().name}
        if where == "compute_stats" and (scorer := scorers.get(threading.current_thread().name)):
            scorer.pause()
        return stats

    monkeypatch.setattr(judging, "rank_run", rank_run)
    monkeypatch.setattr(scoring, "compute_stats", compute_stats)


def _terminate(pid: int) -> None:
    """Ends a backend of this test's database (the scorer's); its next query connects again,
    as a worker's does after a dropped connection (``runs.dispatch`` closes it) or behind a
    pooler that recycled it."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid = %s AND datname = current_database()",
            [pid],
        )
        assert cursor.fetchone() == (True,)


def _resume_after_reconnect(scorer: Scorer) -> None:
    """The scorer's thread closes its dead connection when it goes on (see ``_terminate``)."""
    pause = scorer.pause

    def reconnecting() -> None:
        pause()
        connection.close()

    scorer.pause = reconnecting  # type: ignore[method-assign]


def _completions(run: Run) -> int:
    return Transition.objects.filter(run_id=run.pk, entity="run", to_state="completed").count()


def test_a_scorer_whose_connection_was_terminated_keeps_the_run_and_scores_it_once(
    postgres, graded_run, monkeypatch, scorers
):
    """With the advisory lock, the second ``finalize_run`` (the sweeper's) took the run as
    soon as the first scorer's backend was gone, and both scored it."""
    first = Scorer("first", lambda: check_run(graded_run.pk))
    scorers.append(first)
    _resume_after_reconnect(first)
    _pause_in(monkeypatch, "compute_stats", {"first": first})
    first.start_and_wait_paused()
    _terminate(first.pid)

    assert finalize_run(Run.objects.get(pk=graded_run.pk)) is False  # the lease outlived the connection
    assert Run.objects.get(pk=graded_run.pk).status == "scoring"

    assert first.finish() is True
    run = Run.objects.get(pk=graded_run.pk)
    assert (run.status, run.stats["scored_by"], _completions(run)) == ("completed", "first", 1)
    assert (run.scoring_owner, run.scoring_until) == ("", None)


@pytest.mark.parametrize("where", ["rank_run", "compute_stats"])
def test_a_scorer_whose_lease_was_taken_over_writes_nothing_and_stops(
    postgres, graded_run, monkeypatch, caplog, scorers, where
):
    """The first scorer's connections were cut for longer than its lease (its keeper could
    not renew it) and the sweeper's finalize took the run over. The first one goes on: it
    must not write the run's outcome while the new owner scores it (before, it completed the
    run with its own scorecard), and, stopped in its n_wise pass, asks no critique."""
    critiques: list[str] = []
    real_critique = judging.run_model_critique

    def counted(run: Any, records: Any) -> list[dict[str, Any]]:
        critiques.append(threading.current_thread().name)
        return real_critique(run, records)

    monkeypatch.setattr(judging, "run_model_critique", counted)
    first = Scorer("first", lambda: check_run(graded_run.pk))
    second = Scorer("second", lambda: finalize_run(Run.objects.get(pk=graded_run.pk)))
    scorers.extend([first, second])
    _resume_after_reconnect(first)
    _pause_in(monkeypatch, where, {"first": first, "second": second})
    first.start_and_wait_paused()
    _terminate(first.pid)
    Run.objects.filter(pk=graded_run.pk).update(scoring_until=None)  # the lease lapsed

    second.start_and_wait_paused()  # the new owner, mid-scoring
    assert Run.objects.get(pk=graded_run.pk).scoring_owner != ""
    with caplog.at_level(logging.WARNING, logger="runs.judging"):
        assert first.finish() is False
    run = Run.objects.get(pk=graded_run.pk)
    assert (run.status, run.stats, _completions(run)) == ("scoring", None, 0)
    assert "another process took the run over" in caplog.text

    assert second.finish() is True
    run = Run.objects.get(pk=graded_run.pk)
    assert (run.status, run.stats["scored_by"], _completions(run)) == ("completed", "second", 1)
    lanes = RunLane.objects.filter(run=run).order_by("position", "pk")
    assert [lane.stats for lane in lanes] == run.stats["lanes"]
    assert (run.scoring_owner, run.scoring_until) == ("", None)
    assert critiques == (["second"] if where == "rank_run" else ["first", "second"])
