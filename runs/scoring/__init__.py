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

from django.db import DatabaseError, transaction
from django.db.models import Q
from django.utils import timezone

from agentclash_site.lib.db import KeeperThread
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
        store_stats(run, compute_stats(run))
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
    judge model's critique suggestions, asked only while this thread still scores the run);
    ``store_stats`` writes them.

    One streamed pass per lane over the item columns and the few grade fields the figures
    need (``STREAM_CHUNK`` rows at a time): tallies, per-case sums in compact arrays and
    per-expectation counters; memory grows with the number of cases by a few dozen bytes,
    never with the grade documents."""
    lanes = list(RunLane.objects.filter(run_id=run.pk).order_by(*LANE_ORDER))
    spec = version_data(run.pack_version, run.input_set.key if run.input_set_id else None).spec
    cases = Cases()
    health = RunHealth(spec)
    streamed: list[tuple[str, LaneStream, LaneAggregate]] = []
    lane_docs = []
    for lane in lanes:
        stream = stream_lane(lane, cases, health)
        agg = stream.aggregate(run_id=str(run.pk), deployment=lane.deployment_name)
        streamed.append((lane.deployment_name, stream, agg))
        lane_docs.append(agg.to_dict())
    ranking = rank(streamed, run_id=str(run.pk)) if streamed else []
    feedback = health.finish().to_dict()
    from runs.judging import run_model_critique, still_scoring

    # a scorer whose lease was taken over while it streamed pays no critique call
    if critique and still_scoring(run.pk):
        extra = run_model_critique(run, health.outcome_records())
        if extra:
            feedback["suggestions"] = [*feedback.get("suggestions", []), *extra]
            feedback["overall"] = overall_line(Suggestion.from_dict(s) for s in feedback["suggestions"])
    return {
        "scoring_revision": run.scoring_revision,
        "lanes": lane_docs,
        "judge_usage": _judge_usage(lanes, lane_docs),
        "ranking": [standing.to_dict() for standing in ranking],
        "eval_feedback": feedback,
    }


_USAGE_COUNTS = ("calls", "input_tokens", "output_tokens")


def _judge_usage(lanes: list[RunLane], lane_docs: list[dict[str, Any]]) -> dict[str, Any]:
    """Every judge call of the run in ``judge_usage`` (grading.md §6.5), read after the
    critique was booked. A lane's usage is its judge columns: its cases' calls (judges,
    claims, its n_wise share) plus its share of the run-level passes (``critique.probe_judges``
    and the LLM critique), which belong to no case and are split evenly over the lanes
    (``runs.judging._charge_lanes``); that share is its ``run_level``. The run's usage (and
    its ``run_level``) is the sum of its lanes'. Each lane document is updated in place."""
    fresh = {
        row["pk"]: row
        for row in RunLane.objects.filter(pk__in=[lane.pk for lane in lanes]).values(
            "pk", "judge_calls", "judge_input_tokens", "judge_output_tokens", "judge_cost_usd"
        )
    }
    total = {"calls": 0, "input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0}
    run_level = dict(total)
    unknown = run_unknown = False
    for lane, doc in zip(lanes, lane_docs, strict=True):
        cases = doc.get("judge_usage") or {}
        row = fresh.get(lane.pk) or {}
        usage: dict[str, Any] = {key: int(row.get(f"judge_{key}") or 0) for key in _USAGE_COUNTS}
        cost = float(row.get("judge_cost_usd") or 0.0)
        # calls all of unknown cost (the heuristic judge, a provider that reports no usage):
        # null, as the cases' sum says, not a known $0
        usage["cost_usd"] = None if cases.get("cost_usd") is None and not cost else cost
        share = {key: max(0, usage[key] - int(cases.get(key) or 0)) for key in _USAGE_COUNTS}
        share["cost_usd"] = (
            None if usage["cost_usd"] is None else max(0.0, round(cost - (cases.get("cost_usd") or 0.0), 9))
        )
        usage["run_level"] = share
        doc["judge_usage"] = usage
        for key in _USAGE_COUNTS:
            total[key] += usage[key]
            run_level[key] += share[key]
        unknown = unknown or (usage["calls"] and usage["cost_usd"] is None)
        run_unknown = run_unknown or (share["calls"] and share["cost_usd"] is None)
        total["cost_usd"] += usage["cost_usd"] or 0.0
        run_level["cost_usd"] += share["cost_usd"] or 0.0
    if unknown and not total["cost_usd"]:
        total["cost_usd"] = None
    if run_unknown and not run_level["cost_usd"]:
        run_level["cost_usd"] = None
    return {**total, "run_level": run_level}


# The order of ``stats["lanes"]``.
LANE_ORDER = ("position", "pk")


def store_stats(run: Run, stats: dict[str, Any]) -> None:
    """Writes ``stats`` (of ``compute_stats``) on the run, and each lane's aggregate on its
    lane; the run's judge columns = its ``judge_usage`` (its lanes' sums), a cancelled run's
    too (its lanes' spend is final once its last item is written)."""
    lane_ids = RunLane.objects.filter(run_id=run.pk).order_by(*LANE_ORDER).values_list("pk", flat=True)
    for lane_id, doc in zip(lane_ids, stats["lanes"], strict=True):
        RunLane.objects.filter(pk=lane_id).update(stats=doc)
    usage = stats.get("judge_usage")
    judge = {}
    if usage is not None:
        judge = {f"judge_{key}": usage[key] for key in _USAGE_COUNTS}
        judge["judge_cost_usd"] = usage["cost_usd"] or 0.0
    Run.objects.filter(pk=run.pk).update(stats=stats, **judge)
    run.stats = stats


# A scoring lease lasts this long unless renewed (every third of it, by a helper thread):
# a worker that died while scoring leaves its run to the sweeper (which scores again a run
# stuck in scoring for STUCK_SCORING_SECONDS, 5 minutes) once it lapsed.
SCORING_LEASE_SECONDS = 60.0
_leases = threading.local()  # run id -> (owner, depth) of the leases this thread holds


@contextlib.contextmanager
def scoring_lock(run_id: Any) -> Iterator[bool]:
    """Whether this thread may score the run: a lease on the run's row, on every backend. A
    compare-and-set UPDATE claims it (``scoring_owner``, ``scoring_until``) unless another
    owner's lease is still running (PostgreSQL's row lock, SQLite's serialised writes: of two
    claimants one gets it); a helper thread renews it while this scores, and it is given up
    at the end. A worker that died while scoring leaves its run to the sweeper once the lease
    lapsed. Re-entrant in one thread (a rescore finalises under its lock).

    The lease outlives the scoring thread's connection, and the run's outcome is written
    only under it (``still_scoring`` in the writing transaction, the run's row locked): on
    PostgreSQL a session advisory lock did this before, and a dropped connection (a network
    blip, a restart, a pooler recycling it) released it while the worker went on, so the
    sweeper or another worker scored the same run beside it and both wrote its scorecard."""
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
    """The owner of the scoring lease this thread holds on the run, or None (outside a
    scoring)."""
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
        self._thread = KeeperThread(
            name="scoring-lease",
            interval=SCORING_LEASE_SECONDS / 3,
            step=self._renew,
            failure=f"run {run_id}: the scoring lease was not renewed this time",
            errors=(DatabaseError,),
        )

    def _renew(self) -> bool:
        if renew_lease(self.run_id, self.owner):
            return True
        log.warning("run %s: the scoring lease lapsed and was taken over", self.run_id)
        return False

    def close(self) -> None:
        self._thread.close()


def finalize_run(run: Run) -> bool:
    """From ``scoring``: the n_wise judge pass, then the stats (with the model critique of
    the eval when a judge provider is set), then lanes and run complete. Nothing when
    another process is scoring the run (``scoring_lock``): returns whether this call scored
    (False too when its lease was taken over meanwhile: it wrote nothing)."""
    with scoring_lock(run.pk) as mine:
        return mine and _finalize_run(run)


@contextlib.contextmanager
def _fenced(run: Run) -> Iterator[bool]:
    """A transaction for the run's outcome, and whether this thread may write it: the run's
    lanes and row locked (in a cancel's order, ``lock_run``), so neither a cancel nor a claim
    of the lease lands before it commits; then the run must still be in ``scoring`` under this
    thread's lease (``still_scoring``), as it was not when the lease lapsed and another
    worker took the run over."""
    from runs.judging import still_scoring
    from runs.services.operations import lock_run

    with transaction.atomic():
        lock_run(run)
        yield still_scoring(run.pk)


def fail_scoring(run: Run, *, error: str, reason: str) -> bool:
    """The run (in ``scoring``, under this thread's lease) and its scoring lanes end
    ``failed``, ``error`` in its stats and ``reason`` as its status reason, the lanes' stored
    figures dropped (the run document reads their counters); False (nothing
    written) when it was cancelled or taken over meanwhile. It can be re-scored, or its
    failed items retried."""
    with _fenced(run) as mine:
        if mine:
            Run.objects.filter(pk=run.pk).update(stats={"error": error[:500]})
            # a re-scored run's lanes held the figures of the revision before
            RunLane.objects.filter(run_id=run.pk).update(stats=None)
            for lane in RunLane.objects.filter(run_id=run.pk, status=LaneStatus.SCORING):
                transition_lane(lane, LaneStatus.FAILED, reason="scoring failed")
            transition_run(run, RunStatus.FAILED, reason=reason[:500])
    return mine


def _finalize_run(run: Run) -> bool:
    from runs.judging import rank_run, record_run_judge_usage, still_scoring
    from runs.services.operations import rescore_pending, rescore_stalled

    if rescore_pending(run):
        # a rescore's task is still running or was lost (the sweeper calls this for runs
        # long in scoring): never complete a half re-graded run; when no batch was written
        # for a while, enqueue the re-grade again (it resumes where it stopped)
        if not rescore_stalled(run):
            return True
        from runs import tasks

        run_id, revision = str(run.pk), run.scoring_revision
        transaction.on_commit(lambda: tasks.rescore_run.delay(run_id, revision))
        return True
    try:
        rank_run(run)
        if not still_scoring(run.pk):
            # cancelled while ranked (the cancel's check_run has the stats: the critique is
            # not asked), or the lease was taken over (the new owner scores the run)
            return False
        stats = compute_stats(run, critique=True)
    except Exception as exc:
        fail_scoring(run, error=str(exc), reason=f"scoring failed: {exc}")
        raise
    with _fenced(run) as mine:
        if not mine:
            return False  # cancelled during the critique (check_run stores its stats), or taken over
        record_run_judge_usage(run)
        store_stats(run, stats)
        for lane in RunLane.objects.filter(run_id=run.pk, status=LaneStatus.SCORING):
            transition_lane(lane, LaneStatus.COMPLETED, reason="scored")
        completed = transition_run(run, RunStatus.COMPLETED, reason="scored")
    if completed:
        from runs.result_tasks import result_summary_request

        # the result pages' panels are computed now (on commit), not when a user opens the run
        result_summary_request(run=run)
    return True
