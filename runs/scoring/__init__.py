"""Closing lanes and runs, and the figures computed once when a run completes.

``check_lane_and_run(lane_id)`` moves a lane whose counter says nothing is pending to
``scoring`` and, when the run's ``items_open`` counter reaches 0, the run to ``scoring``
and finalises it (``finalize_run``): per-lane ``aggregate_lane`` (Wilson and bootstrap
intervals, seeds per interfaces.md §5 with the run id), the ranking (``rank_lanes``) and
run health (``run_health``), stored in ``Run.stats`` / ``RunLane.stats``; then lanes and run
are ``completed`` and the result pages' summary is requested (``result_summary_request``).
The guarded status UPDATE makes exactly one caller finalise.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import uuid
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

from django.db import DatabaseError, connection, transaction
from django.db.models import Q
from django.utils import timezone

from grading.engine.aggregate import LaneAggregate
from grading.engine.critique import overall_line
from grading.engine.types import Suggestion
from runs.models import LaneStatus, Run, RunLane, RunStatus
from runs.packdata import version_data
from runs.scoring.stream import Cases, LaneStream, RunHealth, rank, stream_lane
from runs.states import transition_lane, transition_run

log = logging.getLogger(__name__)

OPEN_RUN = (RunStatus.QUEUED, RunStatus.RUNNING)
OPEN_LANE = (LaneStatus.QUEUED, LaneStatus.RUNNING)


# The moves to scoring are guarded by the counters as they are when the UPDATE runs, not as
# they were read: a "retry failed items" that reopened items in between (it may, on a running
# run) keeps the lane and the run open. Guarded by the status only, the lane went to scoring
# (no dispatcher or sweeper serves a scoring lane) or the run completed with items pending.
NOTHING_PENDING = {"pending__lte": 0}
NOTHING_OPEN = {"items_open__lte": 0}


def check_lane_and_run(lane_id: int) -> None:
    check_run(close_lane(lane_id).run_id)


def close_lane(lane_id: int) -> RunLane:
    """Moves the lane to ``scoring`` when its counter says nothing is pending; the lane."""
    lane = RunLane.objects.get(pk=lane_id)
    if lane.status in OPEN_LANE and lane.pending <= 0:
        transition_lane(lane, LaneStatus.SCORING, reason="no item pending", guard=NOTHING_PENDING)
    return lane


def check_run(run_id: Any) -> bool:
    """Finalise the run when its counter says no item is pending or claimed. True when
    this call finalised it. A cancelled run gets its stats over what was graded once its
    last in-flight item is written."""
    run = Run.objects.light().get(pk=run_id)
    if run.status == RunStatus.CANCELLED and run.items_open <= 0:
        Run.objects.filter(pk=run.pk).update(stats=compute_stats(run))
        return False
    if run.status not in OPEN_RUN or run.items_open > 0:
        return False
    for lane in RunLane.objects.filter(run_id=run.pk, status__in=OPEN_LANE):
        transition_lane(lane, LaneStatus.SCORING, reason="no item pending", guard=NOTHING_PENDING)
    if not transition_run(run, RunStatus.SCORING, reason="every item finished", guard=NOTHING_OPEN):
        return False
    return finalize_run(run)


def compute_stats(run: Run, *, critique: bool = False) -> dict[str, Any]:
    """Every lane's aggregate, the ranking and run health (plus, with ``critique``, the
    judge model's critique suggestions); stores the lane stats too.

    One streamed pass per lane over the item columns and the few grade fields the figures
    need (``STREAM_CHUNK`` rows at a time): tallies, per-case sums in compact arrays and
    per-expectation counters; memory grows with the number of cases by a few dozen bytes,
    never with the grade documents."""
    lanes = list(RunLane.objects.filter(run_id=run.pk).order_by("position"))
    spec = version_data(run.pack_version, run.input_set.key if run.input_set_id else None).spec
    cases = Cases()
    health = RunHealth(spec)
    streamed: list[tuple[str, LaneStream, LaneAggregate]] = []
    lane_docs = []
    for lane in lanes:
        stream = stream_lane(lane, cases, health)
        agg = stream.aggregate(run_id=str(run.pk), deployment=lane.deployment_name)
        streamed.append((lane.deployment_name, stream, agg))
        doc = agg.to_dict()
        RunLane.objects.filter(pk=lane.pk).update(stats=doc)
        lane.stats = doc
        lane_docs.append(doc)
    ranking = rank(streamed, run_id=str(run.pk)) if streamed else []
    feedback = health.finish().to_dict()
    if critique:
        from runs.judging import run_model_critique

        extra = run_model_critique(run, health.outcome_records())
        if extra:
            feedback["suggestions"] = [*feedback.get("suggestions", []), *extra]
            feedback["overall"] = overall_line(Suggestion.from_dict(s) for s in feedback["suggestions"])
    return {
        "scoring_revision": run.scoring_revision,
        "lanes": lane_docs,
        "ranking": [standing.to_dict() for standing in ranking],
        "eval_feedback": feedback,
    }


@contextlib.contextmanager
def scoring_lock(run_id: Any) -> Iterator[bool]:
    """Whether this process may score the run: on PostgreSQL a session advisory lock keyed by
    the run, held while it scores (released when it ends, or when its connection dies with
    its worker); False when another process holds it. The sweeper scores again a run long in
    scoring, and cannot otherwise tell a lost scoring from a long one (n_wise, critique).
    Elsewhere (SQLite) a lease on the run's row (``scoring_lease``)."""
    if connection.vendor != "postgresql":
        with scoring_lease(run_id) as held:
            yield held
        return
    key = int.from_bytes(uuid.UUID(str(run_id)).bytes[:8], "big", signed=True)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s)", [key])
        (held,) = cursor.fetchone()
    try:
        yield bool(held)
    finally:
        if held:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_unlock(%s)", [key])


# A scoring lease lasts this long unless renewed (every third of it, by a helper thread):
# a worker that died while scoring leaves its run to the sweeper (which scores again a run
# stuck in scoring for STUCK_SCORING_SECONDS, 5 minutes) once it lapsed.
SCORING_LEASE_SECONDS = 60.0
_leases = threading.local()  # run id -> (owner, depth) of the leases this thread holds


@contextlib.contextmanager
def scoring_lease(run_id: Any) -> Iterator[bool]:
    """The scoring lock without advisory locks: a compare-and-set UPDATE of the run's row
    claims it (``scoring_owner``, ``scoring_until``) unless another owner's lease is still
    running; a helper thread renews it while this scores, and it is given up at the end. On
    SQLite every write is serialised, so two workers cannot both claim it (before, the lock
    always succeeded there: the sweeper's finalize scored a long-scoring run a second time).
    Re-entrant in one thread, as the advisory lock is (a rescore finalises under its lock)."""
    key = str(run_id)
    held: dict[str, list[Any]] = _leases.__dict__.setdefault("runs", {})
    if key in held:
        held[key][1] += 1
        try:
            yield True
        finally:
            held[key][1] -= 1
        return
    owner = uuid.uuid4().hex
    if not _claim_lease(run_id, owner):
        yield False
        return
    held[key] = [owner, 1]
    keeper = _LeaseKeeper(run_id, owner)
    try:
        yield True
    finally:
        del held[key]
        keeper.close()
        _release_lease(run_id, owner)


def lease_held_here(run_id: Any) -> str | None:
    """The owner of the scoring lease this thread holds on the run, or None (none held: on
    PostgreSQL, or outside a scoring)."""
    entry = _leases.__dict__.get("runs", {}).get(str(run_id))
    return entry[0] if entry else None


def _claim_lease(run_id: Any, owner: str) -> bool:
    now = timezone.now()
    free = Q(scoring_until__isnull=True) | Q(scoring_until__lt=now)
    until = now + timedelta(seconds=SCORING_LEASE_SECONDS)
    return Run.objects.filter(free, pk=run_id).update(scoring_owner=owner, scoring_until=until) == 1


def renew_lease(run_id: Any, owner: str) -> bool:
    """Move the lease of ``owner`` on; False when it is no longer its lease."""
    until = timezone.now() + timedelta(seconds=SCORING_LEASE_SECONDS)
    return Run.objects.filter(pk=run_id, scoring_owner=owner).update(scoring_until=until) == 1


def _release_lease(run_id: Any, owner: str) -> None:
    try:
        Run.objects.filter(pk=run_id, scoring_owner=owner).update(scoring_owner="", scoring_until=None)
    except DatabaseError:
        # Not raised over what ended the scoring: the lease lapses by itself.
        log.exception(
            "run %s: the scoring lease was not given up; it lapses in %ss", run_id, SCORING_LEASE_SECONDS
        )


class _LeaseKeeper:
    """Renews a scoring lease every third of ``SCORING_LEASE_SECONDS`` on its own thread (and
    database connection) while the scoring thread is busy (an n_wise pass or a critique of
    long judge calls)."""

    def __init__(self, run_id: Any, owner: str) -> None:
        self.run_id, self.owner = run_id, owner
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="scoring-lease", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self._stop.wait(SCORING_LEASE_SECONDS / 3):
                try:
                    if not renew_lease(self.run_id, self.owner):
                        log.warning("run %s: the scoring lease lapsed and was taken over", self.run_id)
                        return
                except DatabaseError:
                    log.exception("run %s: the scoring lease was not renewed this time", self.run_id)
                    connection.close()
        finally:
            connection.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)


def finalize_run(run: Run) -> bool:
    """From ``scoring``: the n_wise judge pass, then the stats (with the model critique of
    the eval when a judge provider is set), then lanes and run complete. Nothing when
    another process is scoring the run (``scoring_lock``): returns whether this call scored."""
    with scoring_lock(run.pk) as mine:
        if mine:
            _finalize_run(run)
        return mine


def _finalize_run(run: Run) -> None:
    from runs.judging import rank_run, record_run_judge_usage, still_scoring
    from runs.services.operations import rescore_pending, rescore_stalled

    if rescore_pending(run):
        # a rescore's task is still running or was lost (the sweeper calls this for runs
        # long in scoring): never complete a half re-graded run; when no batch was written
        # for a while, enqueue the re-grade again (it resumes where it stopped)
        if not rescore_stalled(run):
            return
        from runs import tasks

        run_id, revision = str(run.pk), run.scoring_revision
        transaction.on_commit(lambda: tasks.rescore_run.delay(run_id, revision))
        return
    try:
        rank_run(run)
        if not still_scoring(run.pk):
            return  # cancelled while ranked: the critique is not asked; the cancel's check_run has the stats
        stats = compute_stats(run, critique=True)
        record_run_judge_usage(run)
    except Exception as exc:
        Run.objects.filter(pk=run.pk).update(stats={"error": str(exc)[:500]})
        for lane in RunLane.objects.filter(run_id=run.pk, status=LaneStatus.SCORING):
            transition_lane(lane, LaneStatus.FAILED, reason="scoring failed")
        transition_run(run, RunStatus.FAILED, reason=f"scoring failed: {exc}"[:500])
        raise
    # guarded: a cancel during the critique stores the cancelled run's own stats (check_run)
    Run.objects.filter(pk=run.pk, status=RunStatus.SCORING).update(stats=stats)
    run.stats = stats
    for lane in RunLane.objects.filter(run_id=run.pk, status=LaneStatus.SCORING):
        transition_lane(lane, LaneStatus.COMPLETED, reason="scored")
    if transition_run(run, RunStatus.COMPLETED, reason="scored"):
        from runs.result_tasks import result_summary_request

        # the result pages' panels are computed now (on commit), not when a user opens the run
        result_summary_request(run=run)
