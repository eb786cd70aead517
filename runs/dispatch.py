"""The lane dispatcher (ARCHITECTURE.md "Core decisions", the lane-dispatch shape).

``dispatch_lane(lane_id)`` is the body of the ``runs.tasks.dispatch_lane`` task. It claims
up to ``limit - in_flight`` pending items of its lane with a guarded conditional UPDATE
(candidates picked with ``FOR UPDATE SKIP LOCKED`` on PostgreSQL, under a lock of the
deployment row so the per-deployment limit holds across every worker and run), runs them
concurrently on an asyncio loop in a helper thread (``run_attempts`` with the shared
outbound client: retries per agent-protocol.md happen in place), grades finished items in
this thread with ``grade_case`` and writes them in batches (``runs.recording``), claiming
more as calls complete (a rolling window, never above the limit) until the lane is
drained, the run is cancelled, or the time slice ends; then it re-enqueues itself if work
remains. All ORM work happens in the calling (sync) thread; the loop thread only talks
HTTP.
"""

from __future__ import annotations

import asyncio
import functools
import gc
import logging
import random
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from agentclash_site.lib.db import is_connection_error
from agentclash_site.lib.outbound import client_for_loop
from runs.dispatch_threads import ClaimKeeper, LoopThread, Writer, fast_commit, graders
from runs.executors import DeploymentTarget, ExecutionRequest, executor_for
from runs.executors.attempts import run_attempts
from runs.executors.base import AttemptOutcome
from runs.judging import judge_for_lane
from runs.lane_settings import CallSettings
from runs.models import (
    MAX_IN_FLIGHT_LIMIT,
    Deployment,
    DeploymentKind,
    ItemState,
    LaneStatus,
    Run,
    RunItem,
    RunLane,
    RunStatus,
    protocol_item_id,
)
from runs.packdata import version_data
from runs.probing import load_stored_findings
from runs.recording import (
    ItemKey,
    ItemResult,
    LaneContext,
    grade_outcomes,
    server_cursor,
    unstorable_result,
)
from runs.retry import backoff_ceiling
from runs.states import transition_lane, transition_run

log = logging.getLogger(__name__)

TIME_SLICE_SECONDS = float(getattr(settings, "RUNS_DISPATCH_SLICE_SECONDS", 20.0))
# A live dispatcher's lease (``RunLane.dispatch_until``) lasts a slice plus this margin and
# is renewed as it works; the sweeper re-dispatches lanes whose lease lapsed.
LEASE_MARGIN_SECONDS = float(getattr(settings, "RUNS_LEASE_MARGIN_SECONDS", 30.0))
LEASE_RENEW_SECONDS = min(5.0, TIME_SLICE_SECONDS / 2)
BATCH_WAIT_SECONDS = 0.005  # after the first completion, gather a few more before writing
CANCEL_CHECK_SECONDS = 0.5
# How long a slice's claims are kept alive past their deadlines while it grades and writes
# (``ClaimKeeper``): a grade that hangs longer gives its items to the sweeper.
KEEP_CLAIMS_SECONDS = 3600.0
# A worker asked to stop (Celery's warm shutdown: SIGTERM, a first Ctrl-C) ends its slice:
# it claims nothing more, lets the calls in flight finish for up to this long, then cancels
# the rest, writes what it has and gives the unfinished items back at once.
STOP_GRACE_SECONDS = float(getattr(settings, "RUNS_STOP_GRACE_SECONDS", 3.0))

# Set when this process is asked to stop (``request_stop``: agentclash_site/celery.py and
# runs/tasks.py call it on a warm shutdown). Never cleared in a worker: it is exiting.
STOPPING = threading.Event()


def request_stop() -> None:
    """Ask every dispatch slice of this process to end promptly (see STOP_GRACE_SECONDS).
    Safe in a signal handler: it only sets an event."""
    STOPPING.set()


@dataclass
class DispatchResult:
    lane_id: int
    owner: str
    claimed: int = 0
    recorded: int = 0
    requeue: bool = False
    reason: str = ""
    peak_in_flight: int = 0
    stale: list[int] = field(default_factory=list)  # results no longer ours (not written)
    unstorable: list[int] = field(default_factory=list)  # written as unstorable_result
    released: int = 0  # unfinished items given back when the worker was asked to stop
    # seconds spent per phase (claim, wait, grade, record; behind: waiting for the writer to
    # catch up): for benchmarks and logs
    timings: dict[str, float] = field(
        default_factory=lambda: dict.fromkeys(("claim", "wait", "grade", "record", "behind"), 0.0)
    )


def _judge_for(lane: RunLane) -> Any:
    """The judge of this lane's workspace (None without a judge provider: judge
    expectations are then NOT_EVALUATED, reason ``no_judge_provider``)."""
    return judge_for_lane(lane)


def item_budget_seconds(recorded: CallSettings | DeploymentTarget, timeout: float | None = None) -> float:
    """How long one item may take (its deadline): every attempt's timeout (``timeout``, a
    case's override, else the lane's recorded one) plus the backoff ceilings between them
    (agent-protocol.md: no attempt runs past the deadline)."""
    attempts = max(1, int(recorded.max_attempts))
    backoffs = sum(backoff_ceiling(n) for n in range(1, attempts))
    return float(timeout or recorded.timeout_seconds) * attempts + backoffs


def extend_claims(owner: str, deadlines: dict[int, datetime]) -> None:
    """Move the claim deadline of this owner's items whose case allows longer attempts than
    the deployment (the claim was sized by the deployment's timeout), so the sweeper does
    not give them out again while their calls still run."""
    margin = timedelta(seconds=settings.RUNS_CLAIM_MARGIN_SECONDS)
    for item_id, deadline in deadlines.items():
        RunItem.objects.filter(pk=item_id, state=ItemState.CLAIMED, claim_owner=owner).update(
            claim_deadline=deadline + margin
        )


def lane_limit(lane: RunLane, run: Run, deployment: Deployment) -> int:
    limit = int(deployment.max_in_flight)
    if run.max_in_flight:
        limit = min(limit, int(run.max_in_flight))
    return max(1, limit)


def claim_items(
    *,
    lane: RunLane,
    run: Run,
    deployment: Deployment,
    owner: str,
    wanted: int | None = None,
    finished: list[int] | tuple[int, ...] = (),
    recorded: CallSettings | DeploymentTarget | None = None,
) -> list[dict[str, Any]]:
    """Claim up to the free slots of the deployment (and the run's override) from the lane.

    ``finished``: ids of items whose calls have ended and whose results are about to be
    written; those still claimed by this owner are not in flight, so their slots are free.
    ``recorded``: the lane's recorded settings (its timeout and max_attempts size the claim),
    read from the lane when not given. The limit is the deployment's live ``max_in_flight``.

    The deployment row is locked (PostgreSQL) so concurrent claimers of any lane of the
    same deployment count each other's claims; on SQLite the IMMEDIATE transaction
    serialises writers. One guarded UPDATE claims the candidates (picked with ``FOR UPDATE
    SKIP LOCKED`` on PostgreSQL) and returns them. Runs in the caller's transaction when
    there is one. Returns the claimed items as dicts.
    """
    now = timezone.now()
    budget = item_budget_seconds(recorded or CallSettings.of_lane(lane))
    deadline = now + timedelta(seconds=budget + settings.RUNS_CLAIM_MARGIN_SECONDS)
    pg = connection.vendor == "postgresql"
    if pg:
        return _claim_pg(lane, run, deployment, owner, wanted, finished, now, deadline, budget)
    with transaction.atomic(savepoint=False), connection.cursor() as cursor:
        cursor.execute("SELECT max_in_flight FROM runs_deployment WHERE id = %s", [deployment.pk])
        (dep_limit,) = cursor.fetchone()
        # Claimed items of the deployment (and of this lane), minus this owner's finished ones.
        ids = list(finished) or [0]
        marks = ", ".join(["%s"] * len(ids))
        cursor.execute(
            "SELECT count(*), count(*) FILTER (WHERE lane_id = %s),"  # noqa: S608 (placeholders only)
            f" count(*) FILTER (WHERE claim_owner = %s AND id IN ({marks}))"
            " FROM runs_runitem WHERE deployment_id = %s AND state = 'claimed'",
            [lane.pk, owner, *ids, deployment.pk],
        )
        claimed, lane_claimed, done = cursor.fetchone()
        free = int(dep_limit) - claimed + done
        if run.max_in_flight:
            free = min(free, int(run.max_in_flight) - lane_claimed + done)
        if wanted is not None:
            free = min(free, wanted)
        if free <= 0:
            return []
        stamp = [
            owner,
            connection.ops.adapt_datetimefield_value(now),
            connection.ops.adapt_datetimefield_value(deadline),
        ]
        returning = " RETURNING id, challenge_key, case_key, repetition, attempt_count"
        cursor.execute(
            "SELECT id FROM runs_runitem WHERE lane_id = %s AND state = 'pending' ORDER BY id LIMIT %s",
            [lane.pk, free],
        )
        ids = [r[0] for r in cursor.fetchall()]
        if not ids:
            return []
        marks = ", ".join(["%s"] * len(ids))
        sql = (
            "UPDATE runs_runitem SET state = 'claimed', claim_owner = %s, claimed_at = %s,"  # noqa: S608
            f" claim_deadline = %s, claims = claims + 1 WHERE state = 'pending' AND id IN ({marks})"
        )
        cursor.execute(sql + returning, [*stamp, *ids])
        fetched = cursor.fetchall()
    return _claimed_rows(fetched, now + timedelta(seconds=budget))


def _claimed_rows(fetched: list[tuple[Any, ...]], item_deadline: datetime) -> list[dict[str, Any]]:
    return [
        {"id": r[0], "challenge_key": r[1], "case_key": r[2], "repetition": r[3], "attempt_count": r[4],
         "deadline": item_deadline}
        for r in sorted(fetched)
    ]  # fmt: skip


# PostgreSQL: one call of runs_claim_items (migration 0005): it locks the deployment row
# (claimers of any lane of the deployment wait there), then one statement, with a snapshot
# taken after the lock, counts the deployment's claimed items (and the lane's, for the run's
# override), minus this owner's finished ones, and claims up to the free slots. A CTE is
# evaluated once: an IN (subquery ... SKIP LOCKED) can be rescanned and then claims more rows
# than the limit. One round trip (in autocommit), where BEGIN, lock, claim, COMMIT were three.
_CLAIM_SQL = (
    "SELECT * FROM runs_claim_items(%(lane)s, %(owner)s, %(finished)s::bigint[], %(deployment)s,"
    " %(run_limit)s::integer, %(wanted)s::integer, %(now)s, %(deadline)s)"
)


def _claim_pg(
    lane: RunLane,
    run: Run,
    deployment: Deployment,
    owner: str,
    wanted: int | None,
    finished: list[int] | tuple[int, ...],
    now: datetime,
    deadline: datetime,
    budget: float,
) -> list[dict[str, Any]]:
    params = {
        "lane": lane.pk,
        "owner": owner,
        "finished": list(finished),
        "deployment": deployment.pk,
        "run_limit": int(run.max_in_flight) if run.max_in_flight else None,
        "wanted": wanted,
        "now": now,
        "deadline": deadline,
    }
    # In autocommit the call is its own transaction; in the caller's transaction when there is one.
    with server_cursor() as cursor:
        cursor.execute(_CLAIM_SQL, params)
        fetched = cursor.fetchall()
    return _claimed_rows(fetched, now + timedelta(seconds=budget))


def renew_lease(lane_id: int) -> None:
    RunLane.objects.filter(pk=lane_id).update(
        dispatch_until=timezone.now() + timedelta(seconds=TIME_SLICE_SECONDS + LEASE_MARGIN_SECONDS)
    )


def take_lease(lane_id: int) -> bool:
    """The lane's dispatch lease, taken in one guarded UPDATE when no live dispatcher holds
    it (none yet, or its lease lapsed: a lost worker). False: another dispatcher is working
    the lane, and this one must leave it (that one re-enqueues itself while work remains).
    Without it, a dispatch task sent while the lane's own was waiting in a busy queue (the
    sweeper's, run creation's) started a second chain of slices for the lane: each re-enqueued
    itself, and the duplicates held worker processes waiting on the lane's in-flight limit."""
    now = timezone.now()
    lapsed = Q(dispatch_until__isnull=True) | Q(dispatch_until__lt=now)
    return bool(
        RunLane.objects.filter(lapsed, pk=lane_id).update(
            dispatch_until=now + timedelta(seconds=TIME_SLICE_SECONDS + LEASE_MARGIN_SECONDS)
        )
    )


def lane_context_for(lane: RunLane, run: Run, recorded: CallSettings | None = None) -> LaneContext:
    """What grading a lane's results needs; the evidence level and system prompt are the
    lane's recorded ones (``recorded``, else read from the lane)."""
    input_set_key = run.input_set.key if run.input_set_id else None
    recorded = recorded or CallSettings.of_lane(lane)
    return LaneContext(
        run_id=str(run.pk),
        lane_id=lane.pk,
        deployment_name=lane.deployment_name,
        deployment_kind=lane.deployment_kind,
        evidence_level=recorded.evidence_level,
        system_prompt=recorded.system_prompt,
        pack_version_id=run.pack_version_id,
        input_set_key=input_set_key,
        data=version_data(run.pack_version, input_set_key),
        scoring_revision=run.scoring_revision,
        repetitions=run.repetitions,
        judge=_judge_for(lane),
        pack_hash=run.pack_version.content_hash,
    )


def _request(ctx: LaneContext, target: DeploymentTarget, row: dict[str, Any]) -> ExecutionRequest:
    case, base = ctx.data.case(row["challenge_key"], row["case_key"])
    deadline = row["deadline"]
    timeout = case.timeout_seconds or None
    if timeout is not None and timeout > float(target.timeout_seconds):
        # The claim was sized by the lane's timeout: this case may take longer.
        deadline += timedelta(seconds=item_budget_seconds(target, timeout) - item_budget_seconds(target))
        row["extended"] = deadline
    return ExecutionRequest(
        run_id=ctx.run_id,
        item_id=protocol_item_id(ctx.run_id, row["id"]),
        attempt=int(row["attempt_count"]) + 1,  # after "retry failed items", the numbering goes on
        deadline=deadline,
        challenge=ctx.data.challenge_info(case, base),
        case=ctx.data.case_info(case, base),
        deployment=target,
        tool_policy=dict(base.tool_policy),
        execution_mode=ctx.data.execution_mode,
        working_directory=base.working_directory,
        timeout_seconds=timeout,
    )


class _LazyRandom:
    """``random.Random(seed)``, seeded only when a retry first needs jitter (seeding costs
    more than the rest of a call's bookkeeping, and most calls never retry)."""

    __slots__ = ("_rng", "_seed")

    def __init__(self, seed: int) -> None:
        self._seed = seed
        self._rng: random.Random | None = None

    def __getattr__(self, name: str) -> Any:
        if self._rng is None:
            self._rng = random.Random(self._seed)
        return getattr(self._rng, name)


class _Call:
    """One item's call as it goes (written on the loop thread, read by the dispatcher once
    the loop is closed): how many attempts went out (``sent``, counted before each request)
    and the outcomes of those that ended (``ended``). A slice that stops gives back an item
    whose call it cancelled with these (``runs.sweeper.release_claims``)."""

    __slots__ = ("_executor", "ended", "sent")

    def __init__(self, executor: Any) -> None:
        self._executor = executor
        self.sent = 0
        self.ended: list[AttemptOutcome] = []

    @property
    def kind(self) -> str:
        return self._executor.kind  # type: ignore[no-any-return]

    async def execute(self, request: ExecutionRequest, *, client: Any) -> AttemptOutcome:
        self.sent += 1
        return await self._executor.execute(request, client=client)  # type: ignore[no-any-return]


async def _execute(call: _Call, request: ExecutionRequest, seed: int) -> list[AttemptOutcome]:
    # A connection for every call a lane may have in flight: past the pool, a call waited for
    # a connection inside its own timeout (a slow agent's items ended infra_error, timeout).
    client = client_for_loop(pool_limit=MAX_IN_FLIGHT_LIMIT)
    try:
        return await run_attempts(
            call,  # type: ignore[arg-type]
            request,
            client=client,  # type: ignore[arg-type]
            rng=_LazyRandom(seed),
            on_attempt=call.ended.append,
        )
    except asyncio.CancelledError:
        return [AttemptOutcome.cancelled()]


def _mark_running(lane: RunLane, run: Run) -> None:
    if run.status == RunStatus.QUEUED:
        transition_run(run, RunStatus.RUNNING, reason="first claim")
    if lane.status == LaneStatus.QUEUED:
        transition_lane(lane, LaneStatus.RUNNING, reason="first claim")


_frozen = False


def freeze_long_lived() -> None:
    """Once per process: collect, then move every object alive now (modules, classes, the
    app's caches: about 185k objects in a worker) to the collector's permanent generation.
    Otherwise each full collection during a slice walks them all (measured: 3 to 6 full
    collections of about 0.11 s each per 2,000 items); what a slice allocates is still
    collected as usual."""
    global _frozen
    if not _frozen:
        _frozen = True
        gc.collect()
        gc.freeze()


GAVE_UP_MESSAGE = "the item's dispatcher failed {n} times while it held the item; giving up"


def _return_orphaned_claims(lane: RunLane, owner: str) -> int:
    """Claims of the lane held by another owner when this slice took the lane's lease: on
    PostgreSQL a live dispatcher's ``ClaimKeeper`` renews the lease every few seconds, so a
    lapsed lease means their dispatcher is gone (a killed worker). They go back to pending now,
    as the sweeper would return them at their deadlines (each attempt's timeout times
    ``max_attempts`` plus ``RUNS_CLAIM_MARGIN_SECONDS``: about 7 minutes with the defaults),
    during which they held the lane's in-flight slots and a run could not go on. Should that
    dispatcher still be alive, cut off from the database for longer than the lease, what it
    writes later is refused by the writer's owner guard, as after the sweeper's return.
    Returns how many went back to pending (those claimed ``max_attempts`` times end
    infra_error, as with the sweeper)."""
    from runs.sweeper import return_claims

    others = (
        RunItem.objects.filter(deployment_id=lane.deployment_id, lane_id=lane.pk, state=ItemState.CLAIMED)
        .exclude(claim_owner=owner)
        .values_list("claim_owner", flat=True)
        .distinct()
    )
    now = timezone.now()
    back = 0
    for other in list(others):
        returned, ended = return_claims(lane.pk, now, owner=other)
        back += returned
        log.warning(
            "lane %s: took the lapsed lease; %d claims of a lost dispatcher back to pending, %d ended infra_error",
            lane.pk, returned, ended,
        )  # fmt: skip
    return back


def _close_each(lane_id: int, *parts: tuple[str, Callable[[], None] | None]) -> Exception | None:
    """Calls every ``(name, close)`` in order, each whether or not one before it raised;
    every failure is logged, the first is returned."""
    first: Exception | None = None
    for name, close in parts:
        if close is None:
            continue
        try:
            close()
        except Exception as exc:
            log.exception("lane %s: closing the slice's %s failed", lane_id, name)
            first = first or exc
    return first


def give_back_claims(lane_id: int, owner: str, failure: BaseException, requeue: Any) -> None:
    """After a slice failed (its database connection lost, a bug of ours): the items it still
    holds go back to pending at once and the lane is dispatched again, rather than waiting
    out their claim deadlines (an item's timeout times its attempts: minutes for a slow
    agent). An item claimed ``max_attempts`` times ends infra_error (``dispatcher_failed``),
    so an item that always ends its slice cannot loop. When the database is still away the
    claims stay, and the sweeper returns them when they expire."""
    from runs.sweeper import return_claims

    try:
        if is_connection_error(failure):
            connection.close()  # the next query connects again, if the database is back
        else:
            fast_commit(False)
        back, ended = return_claims(
            lane_id,
            timezone.now(),
            owner=owner,
            error_code="dispatcher_failed",
            message=GAVE_UP_MESSAGE,
            cause="the item's dispatcher failed while it held the item",
            reason="dispatcher failed",
        )
        RunLane.objects.filter(pk=lane_id).update(dispatch_until=None)
    except Exception:
        log.exception("lane %s: the failed slice's claims stay until they expire", lane_id)
        return
    log.warning(
        "lane %s: the slice failed (%s: %s); %d claims back to pending, %d ended infra_error",
        lane_id, type(failure).__name__, failure, back, ended,
    )  # fmt: skip
    if ended:
        # The items it ended may have been the last open ones: close the lane and the run
        # now (the failed slice never reaches its closing check), not at the next sweep.
        from runs.scoring import check_lane_and_run

        try:
            check_lane_and_run(lane_id)
        except Exception:
            log.exception("lane %s: not closed after its slice failed; the sweeper will", lane_id)
    if back and requeue is not None:
        try:
            requeue(lane_id)
        except Exception:
            log.exception("lane %s: not dispatched again; the sweeper will", lane_id)


def _release_unfinished(lane_id: int, owner: str, in_flight: dict[int, dict[str, Any]]) -> int:
    """After a slice stopped for a shutdown: its items whose calls it cancelled go back to
    pending at once (``runs.sweeper.release_claims``), without counting the claim or the
    cancelled attempt against the item; their attempts that went out are numbered past, so a
    re-send is a new attempt of the same item (agent-protocol.md)."""
    from runs.sweeper import release_claims

    calls = {item_id: (row["call"].ended, row["call"].sent) for item_id, row in in_flight.items()}
    return release_claims(lane_id, owner, calls, timezone.now()) if calls else 0


def _run_status(run_id: Any) -> str:
    return Run.objects.filter(pk=run_id).values_list("status", flat=True).get()


def dispatch_lane(
    lane_id: int,
    *,
    owner: str | None = None,
    time_slice: float = TIME_SLICE_SECONDS,
    requeue: Any = None,
) -> DispatchResult:
    """Run one time slice of a lane. ``requeue(lane_id)`` is called when work remains
    (the task passes its own ``delay``); ``None`` leaves re-dispatch to the caller."""
    owner = owner or uuid.uuid4().hex
    result = DispatchResult(lane_id=lane_id, owner=owner)
    if STOPPING.is_set():
        # Taken by a worker on its way out: leave the lane to the next worker.
        result.reason = "worker stopping"
        if requeue is not None:
            requeue(lane_id)
        return result
    freeze_long_lived()
    lane = RunLane.objects.select_related("deployment", "deployment__workspace").get(pk=lane_id)
    # Deferred: the stored findings (about 0.5 kB per case) are read by load_stored_findings,
    # the manifest's members by version_data (once per process), cases as they are claimed.
    run = Run.objects.light().get(pk=lane.run_id)
    deployment = lane.deployment
    if lane.deployment_kind == DeploymentKind.TRACE_IMPORT:
        result.reason = "trace_import lanes wait for uploaded results"
        return result
    if run.status not in (RunStatus.QUEUED, RunStatus.RUNNING) or lane.status not in (
        LaneStatus.QUEUED,
        LaneStatus.RUNNING,
    ):
        result.reason = f"run is {run.status}, lane is {lane.status}"
        return result
    if not take_lease(lane.pk):
        result.reason = "another dispatcher holds the lane's lease"
        return result
    # The settings the run was created with, read once per slice (RunLane.settings); the
    # secrets and the in-flight limit are the deployment's, live (runs.lane_settings).
    try:
        if connection.vendor == "postgresql":
            _return_orphaned_claims(lane, owner)
        recorded = CallSettings.of_lane(lane)
        ctx = lane_context_for(lane, run, recorded)
        findings_loaded = load_stored_findings(ctx, run.pk)
        target = recorded.target(deployment, name=lane.deployment_name)
        executor = executor_for(recorded.kind)
        limit = lane_limit(lane, run, deployment)
    except BaseException:
        # Nothing claimed yet: the lane is free for the next dispatch (the sweeper's).
        RunLane.objects.filter(pk=lane.pk).update(dispatch_until=None)
        raise

    started = time.monotonic()
    slice_end = started + time_slice
    in_flight: dict[int, dict[str, Any]] = {}  # item id -> claimed row (with its request)
    batch: list[ItemResult] = []
    loop = LoopThread()
    writer = Writer(
        lane_id=lane.pk,
        owner=owner,
        revision=ctx.scoring_revision,
        repetitions=run.repetitions,
        # Another connection cannot see uncommitted rows: inside a transaction, write inline.
        threaded=connection.vendor == "postgresql" and not connection.in_atomic_block,
        unstorable=functools.partial(unstorable_result, ctx),
    )
    # Another connection would wait on the caller's uncommitted claims: only outside a
    # transaction, on PostgreSQL (SQLite serialises writers: the dispatcher renews alone).
    keeper = (
        ClaimKeeper(lane_id=lane.pk, owner=owner, renew_lease=renew_lease, max_seconds=KEEP_CLAIMS_SECONDS)
        if writer.threaded
        else None
    )
    cancelled = False
    drained = False
    stop_deadline: float | None = None  # set when the worker is asked to stop
    next_cancel_check = started + CANCEL_CHECK_SECONDS
    next_lease = started + LEASE_RENEW_SECONDS  # taken above

    def account(done: list[tuple[list[ItemResult], list[int]]]) -> None:
        for written_batch, written in done:
            result.recorded += len(written)
            mine = set(written)
            result.stale += [r.item_id for r in written_batch if r.item_id not in mine]

    failure: BaseException | None = None
    fast_commit(True)
    try:
        while True:
            now = time.monotonic()
            if now >= next_cancel_check:
                next_cancel_check = now + CANCEL_CHECK_SECONDS
                cancelled = _run_status(run.pk) not in (RunStatus.QUEUED, RunStatus.RUNNING)
                if cancelled:
                    # The cancel ended every item this slice holds: the calls in flight
                    # (and their retries) are cancelled as the loop closes, and what is
                    # graded but unwritten is refused by the writer's claim guard.
                    break
                if not findings_loaded:
                    findings_loaded = load_stored_findings(ctx, run.pk)
            if stop_deadline is None and STOPPING.is_set():
                # The calls in flight get STOP_GRACE_SECONDS to end; the rest are cancelled
                # as the loop closes and their items given back (_release_unfinished).
                stop_deadline = now + STOP_GRACE_SECONDS
                log.info("lane %s: the worker is stopping; %d calls in flight", lane.pk, len(in_flight))
            if stop_deadline is not None and in_flight and now >= stop_deadline:
                break
            if now >= next_lease:
                next_lease = now + LEASE_RENEW_SECONDS
                renew_lease(lane.pk)
            claiming = not cancelled and not drained and stop_deadline is None and now < slice_end
            account(writer.collect())
            if len(writer.unwritten()) > 4 * limit:
                t0 = time.perf_counter()
                account(writer.wait(below=2 * limit))  # the writer is behind: let it catch up
                result.timings["behind"] += time.perf_counter() - t0
            t0 = time.perf_counter()
            # Claim before the finished batch is written: the calls of finished (unwritten)
            # items are over, so their slots are free and new calls overlap the writing.
            if claiming and len(in_flight) < limit:
                rows = claim_items(
                    lane=lane,
                    run=run,
                    deployment=deployment,
                    owner=owner,
                    finished=[*writer.unwritten(), *(r.item_id for r in batch)],
                    recorded=target,
                )
                if rows:
                    if result.claimed == 0:
                        _mark_running(lane, run)
                    result.claimed += len(rows)
                    calls = []
                    # The batch's cases in one query (those not cached in this process).
                    ctx.data.load((row["challenge_key"], row["case_key"]) for row in rows)
                    for row in rows:
                        row["request"] = request = _request(ctx, target, row)
                        row["call"] = call = _Call(executor)
                        in_flight[row["id"]] = row
                        calls.append((row["id"], _execute(call, request, row["id"])))
                    longer = {row["id"]: row["extended"] for row in rows if "extended" in row}
                    if longer:
                        extend_claims(owner, longer)
                    loop.start(calls)  # one wake-up of the loop thread per claim
                    result.peak_in_flight = max(result.peak_in_flight, len(in_flight))
            result.timings["claim"] += time.perf_counter() - t0
            writer.submit(batch)
            batch = []
            if not in_flight:
                if not claiming:
                    break
                if not RunItem.objects.filter(lane_id=lane.pk, state=ItemState.PENDING).exists():
                    drained = True
                    break
                # Every slot is taken (by other dispatchers, or by results being written).
                account(writer.wait())
                time.sleep(0.02)
                continue
            t0 = time.perf_counter()
            done = loop.finished(wait=0.5, more=BATCH_WAIT_SECONDS, expected=len(in_flight))
            if not done:
                continue
            t1 = time.perf_counter()
            result.timings["wait"] += t1 - t0
            finished = []
            for item_id, outcomes in done:
                row = in_flight.pop(item_id)
                item = ItemKey(
                    id=row["id"],
                    challenge_key=row["challenge_key"],
                    case_key=row["case_key"],
                    repetition=row["repetition"],
                    attempt_count=row["attempt_count"],
                )
                finished.append((item, outcomes, outcomes[-1].response))
            if ctx.judge is not None and len(finished) > 1:
                # Judges make blocking HTTP calls: grade the batch in parallel threads.
                batch.extend(graders().map(lambda f: grade_outcomes(ctx, *f), finished))
            else:
                batch.extend(grade_outcomes(ctx, *f) for f in finished)
            result.timings["grade"] += time.perf_counter() - t1
        writer.submit(batch)
        account(writer.wait())
    except BaseException as exc:
        failure = exc
        raise
    finally:
        # Each part is closed whatever the others do: a loop whose close raised (its client
        # not closed in time) skipped the writer's close, whose thread stayed with its queue.
        closing = _close_each(
            lane.pk,
            ("claim keeper", keeper.close if keeper is not None else None),
            ("event loop", loop.close),  # cancels the calls still in flight
            ("writer", writer.close),
        )
        result.timings["record"] += writer.seconds
        result.unstorable = writer.unstorable_items
        if failure is None and closing is None:
            fast_commit(False)
        else:
            give_back_claims(lane.pk, owner, failure or closing, requeue)
    if closing is not None:
        raise closing  # the slice failed as it ended: its claims went back above
    released = 0
    if stop_deadline is not None and not cancelled:
        # The loop is closed: its calls are over and their counts final.
        released = _release_unfinished(lane.pk, owner, in_flight)
    RunLane.objects.filter(pk=lane.pk).update(dispatch_until=None)
    if cancelled:
        result.reason = "run cancelled"
    elif stop_deadline is not None:
        result.reason = f"worker stopping ({released} unfinished items given back)"
        result.released = released
        result.requeue = RunItem.objects.filter(lane_id=lane.pk, state=ItemState.PENDING).exists()
    elif drained:
        result.reason = "lane drained"
    else:
        result.reason = "time slice ended"
        result.requeue = RunItem.objects.filter(lane_id=lane.pk, state=ItemState.PENDING).exists()
    from runs.scoring import check_lane_and_run

    check_lane_and_run(lane.pk)
    if result.requeue and requeue is not None:
        requeue(lane.pk)
    return result
