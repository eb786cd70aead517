"""The recovery sweeper (Celery beat, every ``RUNS_SWEEP_SECONDS``).

1. Claims past their deadline (a killed worker, a lost task) go back to ``pending``; an
   item claimed ``max_attempts`` times already ends ``infra_error`` instead (bounded).
2. Lanes with pending work and no live dispatcher (lease ``dispatch_until`` lapsed) get a
   new dispatch task.
3. Runs whose counters say every item finished are finalised; runs stuck in ``scoring``
   (a worker died while scoring) are scored again; a cancelled run without its figures (the
   broker did not take its cancel's ``check_run``) gets them.
A lane or run whose step raises is logged and counted (``errors``); the sweep goes on.
The last sweep's time and counts are stored in ``SweeperStatus`` (the ops page reads it).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from django.db import connection, transaction
from django.db.models import F, OuterRef, Q, Subquery
from django.utils import timezone

from runs.lane_settings import CallSettings
from runs.models import (
    Attempt,
    DeploymentKind,
    ItemState,
    LaneStatus,
    Run,
    RunItem,
    RunLane,
    RunStatus,
    SweeperStatus,
    Transition,
)
from runs.states import record_item_transitions

log = logging.getLogger(__name__)

STUCK_SCORING_SECONDS = 300.0
LOST_CLAIM_MESSAGE = "the item's claim expired {n} times (its worker was lost); giving up"
LOST_CLAIM_CAUSE = "the item's claim expired (its worker was lost)"


class _Errors:
    """Failures of single lanes or runs during a sweep: each is logged and counted, and the
    sweep goes on (one lane or run that always raises stopped every later step of every
    sweep: no claim returned, no run closed, the sweep's status never stored)."""

    def __init__(self) -> None:
        self.count = 0

    def guard(self, what: str, default: Any, step: Callable[..., Any], *args: Any) -> Any:
        """``step(*args)``, or ``default`` (logged, counted) when it raises."""
        try:
            return step(*args)
        except Exception:
            log.exception("sweeper: %s failed", what)
            self.count += 1
            return default


def _of_runs(queryset: Any, run_ids: Any, field: str = "run_id") -> Any:
    """``queryset``, limited to the rows of ``run_ids`` (ids, or a query of them) when a
    sweep is scoped."""
    return queryset if run_ids is None else queryset.filter(**{f"{field}__in": run_ids})


def _return_expired_claims(now: Any, errors: _Errors, run_ids: Any) -> tuple[int, int]:
    """(returned to pending, ended infra_error)."""
    from runs.scoring import close_lane

    returned = ended = 0
    expired = RunItem.objects.filter(state=ItemState.CLAIMED, claim_deadline__lt=now)
    expired = _of_runs(expired, run_ids)
    lane_ids = set(expired.values_list("lane_id", flat=True).distinct()[:1000])
    for lane_id in lane_ids:
        back, give_up = errors.guard(
            f"returning the expired claims of lane {lane_id}", (0, 0), _return_lane_claims, lane_id, now
        )
        returned += back
        ended += give_up
        if give_up:
            # They may have been the lane's last open items: the lane moves to scoring now,
            # as when a dispatcher writes its last item (it showed "running" until the
            # whole run closed). The run is closed below, in _close_runs.
            errors.guard(f"closing lane {lane_id}", None, close_lane, lane_id)
    return returned, ended


def _return_lane_claims(lane_id: int, now: Any) -> tuple[int, int]:
    """One lane's expired claims: (returned to pending, ended infra_error), one transaction."""
    return return_claims(lane_id, now)


def return_claims(
    lane_id: int,
    now: Any,
    *,
    owner: str | None = None,
    error_code: str = "claim_expired",
    message: str = LOST_CLAIM_MESSAGE,
    cause: str = LOST_CLAIM_CAUSE,
    reason: str = "claim expired",
) -> tuple[int, int]:
    """One lane's claims, in one transaction: those past their deadline or, with ``owner``,
    those of that dispatcher (it failed and gives its claims back at once). Each goes back to
    pending, or ends infra_error (``message`` with ``{n}`` claims) once it was claimed
    ``max_attempts`` times: an item that always ends its slice cannot loop.

    Either way the lost claim is stored as one infra_error attempt (``error_code``; ``cause``
    when the item goes out again) and keeps the attempt numbers it owned: its first, and the
    in-place retries it may have sent (up to ``max_attempts``). Nothing of what it sent came
    back, so the item's next attempt is numbered after all of them: an agent never sees the
    same (item_id, attempt) twice (agent-protocol.md), and the stored attempts say where
    the numbers went. Returns (returned to pending, ended infra_error)."""
    with transaction.atomic():
        lane_q = RunLane.objects.filter(pk=lane_id)
        if connection.features.has_select_for_update:
            lane_q = lane_q.select_for_update()
        lane = lane_q.select_related("deployment").get()
        rows = RunItem.objects.filter(lane_id=lane_id, state=ItemState.CLAIMED)
        rows = rows.filter(claim_owner=owner) if owner is not None else rows.filter(claim_deadline__lt=now)
        if connection.features.has_select_for_update:
            rows = rows.select_for_update()
        items = list(rows.only("id", "claims", "attempt_count", "run_id", "claimed_at"))
        max_attempts = CallSettings.of_lane(lane).max_attempts  # the run's, as its claims were sized
        give_up = [i for i in items if i.claims >= max_attempts]
        back = [i.pk for i in items if i.claims < max_attempts]
        ending = {i.pk for i in give_up}
        if back:
            RunItem.objects.filter(pk__in=back).update(
                state=ItemState.PENDING, claim_owner="", claimed_at=None, claim_deadline=None
            )
        if items:
            Attempt.objects.bulk_create(
                [
                    _lost_attempt(
                        i,
                        now,
                        max_attempts,
                        error_code,
                        message if i.pk in ending else cause,
                        gives_up=i.pk in ending,
                    )
                    for i in items
                ]
            )
            RunItem.objects.filter(pk__in=[i.pk for i in items]).update(
                attempt_count=F("attempt_count") + max_attempts
            )
        if give_up:
            RunItem.objects.filter(pk__in=[i.pk for i in give_up]).update(
                state=ItemState.DONE,
                claim_owner="",
                claim_deadline=None,
                last_category="infra_error",
                finished_at=now,
            )
            RunLane.objects.filter(pk=lane_id).update(
                pending=F("pending") - len(give_up), infra_error=F("infra_error") + len(give_up)
            )
            Run.objects.filter(pk=lane.run_id).update(items_open=F("items_open") - len(give_up))
        record_item_transitions(
            [
                (lane.run_id, lane_id, ItemState.CLAIMED, ItemState.PENDING, len(back)),
                (lane.run_id, lane_id, ItemState.CLAIMED, ItemState.DONE, len(give_up)),
            ],
            reason=reason,
        )
    return len(back), len(give_up)


STOPPED_MESSAGE = (
    "the worker was stopped (a shutdown) while this attempt was out: the call was cancelled and "
    "whatever the agent answered was not recorded; the item goes out again as attempt {next}, "
    "and this attempt does not count against it"
)


def release_claims(lane_id: int, owner: str, calls: dict[int, tuple[list[Any], int]], now: Any) -> int:
    """A stopping worker's give-back (``runs.dispatch``, a warm shutdown): the items of
    ``calls`` (item id -> (outcomes of the attempts that ended, attempts sent)) still claimed
    by ``owner`` go back to pending at once, in one transaction. Returns how many.

    Unlike ``return_claims`` (a lost or failed slice, whose calls' fate is unknown), the
    dispatcher knows what each call did: the attempts that ended are stored as they ended,
    the one it cancelled as a ``cancelled`` attempt (``worker_stopped``), and the claim is
    not counted (``claims`` goes back down: a deploy never moves an item towards
    ``claim_expired``/``dispatcher_failed``). The item's next attempt is numbered after every
    one that went out: the agent may have received the cancelled request, and a re-send is
    then a new attempt of the same ``item_id``, never the same (item_id, attempt) twice
    (agent-protocol.md)."""
    with transaction.atomic():
        lane_q = RunLane.objects.filter(pk=lane_id)
        if connection.features.has_select_for_update:
            lane_q = lane_q.select_for_update()
        lane = lane_q.get()
        rows = RunItem.objects.filter(
            lane_id=lane_id, state=ItemState.CLAIMED, claim_owner=owner, pk__in=list(calls)
        )
        if connection.features.has_select_for_update:
            rows = rows.select_for_update()
        items = list(rows.only("id", "attempt_count", "claimed_at"))
        if not items:
            return 0
        attempts: list[Attempt] = []
        by_step: dict[int, list[int]] = {}
        for item in items:
            ended, sent = calls[item.pk]
            number = item.attempt_count
            for outcome in ended:
                number += 1
                attempts.append(_ended_attempt(item.pk, number, outcome))
            if sent > len(ended):  # one was out when it was cancelled
                number += 1
                attempts.append(
                    Attempt(
                        item_id=item.pk,
                        number=number,
                        category="cancelled",
                        error_code="worker_stopped",
                        error=STOPPED_MESSAGE.format(next=number + 1),
                        started_at=ended[-1].ended_at if ended else item.claimed_at or now,
                        finished_at=now,
                    )
                )
            by_step.setdefault(number - item.attempt_count, []).append(item.pk)
        ids = [i.pk for i in items]
        RunItem.objects.filter(pk__in=ids).update(
            state=ItemState.PENDING, claim_owner="", claimed_at=None, claim_deadline=None,
            claims=F("claims") - 1,
        )  # fmt: skip
        for step, step_ids in by_step.items():
            if step:
                RunItem.objects.filter(pk__in=step_ids).update(attempt_count=F("attempt_count") + step)
        Attempt.objects.bulk_create(attempts)
        record_item_transitions(
            [(lane.run_id, lane_id, ItemState.CLAIMED, ItemState.PENDING, len(items))],
            reason="worker stopped",
        )
    return len(items)


def _ended_attempt(item_id: int, number: int, outcome: Any) -> Attempt:
    """An attempt that ended before its worker stopped, stored as the writer stores one."""
    from runs.storable import storable

    retry_after = outcome.retry_after
    return Attempt(
        item_id=item_id,
        number=number,
        category=str(outcome.category),
        status_code=outcome.status_code,
        error_code=outcome.error_code[:100],
        error=storable(outcome.error),
        latency_ms=outcome.latency_ms,
        body_excerpt=outcome.body_excerpt.replace("\x00", ""),
        retry_after=retry_after if retry_after is None or math.isfinite(retry_after) else None,
        started_at=outcome.started_at,
        finished_at=outcome.ended_at,
    )


def _lost_attempt(
    item: RunItem, now: Any, max_attempts: int, error_code: str, text: str, *, gives_up: bool
) -> Attempt:
    """The attempt row of a claim lost with what it sent: numbered as its first attempt, its
    error naming every number it may have used. ``text`` is the cause, or (``gives_up``) the
    give-up message with ``{n}`` claims."""
    first, last = item.attempt_count + 1, item.attempt_count + max_attempts
    span = f"attempt {first}" if first == last else f"attempts {first} to {last}"
    note = f"{span} may have reached the agent, what came back is unknown"
    error = (
        f"{text.format(n=item.claims)} ({note})" if gives_up else f"{text}; {note}; the item goes out again"
    )
    return Attempt(
        item_id=item.pk,
        number=first,
        category="infra_error",
        error_code=error_code,
        error=error,
        started_at=item.claimed_at or now,
        finished_at=now,
    )


def _redispatch(now: Any, errors: _Errors, run_ids: Any) -> int:
    from runs import tasks

    lanes = (
        _of_runs(RunLane.objects, run_ids)
        .filter(
            status__in=[LaneStatus.QUEUED, LaneStatus.RUNNING],
            run__status__in=[RunStatus.QUEUED, RunStatus.RUNNING],
        )
        .exclude(deployment_kind=DeploymentKind.TRACE_IMPORT)
        .filter(Q(dispatch_until__isnull=True) | Q(dispatch_until__lt=now))
        .filter(pending__gt=0)
    )
    count = 0
    for lane_id in lanes.values_list("id", flat=True)[:500]:
        if RunItem.objects.filter(lane_id=lane_id, state=ItemState.PENDING).exists():
            count += errors.guard(f"re-dispatching lane {lane_id}", 0, _dispatch, tasks, lane_id)
    return count


def _dispatch(tasks: Any, lane_id: int) -> int:
    tasks.dispatch_lane.delay(lane_id)
    return 1


def _close_runs(now: Any, errors: _Errors, run_ids: Any) -> int:
    from runs.scoring import check_run, finalize_run

    runs = _of_runs(Run.objects, run_ids, "pk")
    closed = 0
    for run_id in runs.filter(
        status__in=[RunStatus.QUEUED, RunStatus.RUNNING], items_open__lte=0
    ).values_list("id", flat=True)[:100]:
        closed += int(errors.guard(f"closing run {run_id}", False, check_run, run_id))
    # A cancel's own check_run (on commit) computes the figures over what was graded; one the
    # broker did not take leaves the cancelled run without them.
    for run_id in runs.filter(status=RunStatus.CANCELLED, items_open__lte=0, stats__isnull=True).values_list(
        "id", flat=True
    )[:100]:
        errors.guard(f"computing the figures of cancelled run {run_id}", False, check_run, run_id)
    # Stuck: in scoring for STUCK_SCORING_SECONDS, and no live process's scoring lease on it
    # (finalize_run would leave such a run alone). Chosen in the query, longest stuck first:
    # picking 20 runs in scoring and then asking which were stuck left a stuck run behind 20
    # that live workers score for long (re-scores, n_wise passes), sweep after sweep.
    stuck_before = now - timedelta(seconds=STUCK_SCORING_SECONDS)
    last_move = (
        Transition.objects.filter(run_id=OuterRef("pk"), entity=Transition.Entity.RUN)
        .order_by("-at")
        .values("at")[:1]
    )
    stuck = (
        runs.light()
        .filter(status=RunStatus.SCORING, items_open__lte=0)
        .filter(Q(scoring_until__isnull=True) | Q(scoring_until__lt=now))
        .annotate(last_move=Subquery(last_move))
        .filter(last_move__lt=stuck_before)
        .order_by("last_move")
    )
    for run in stuck[:20]:
        # finalize_run marks the run failed when its scoring raises: it is not retried
        closed += errors.guard(f"scoring run {run.pk} again", 0, _finalize, finalize_run, run)
    return closed


def _finalize(finalize_run: Callable[[Run], bool], run: Run) -> int:
    return int(finalize_run(run))  # 0: another process is scoring it (a long scoring, not a lost one)


def sweep(*, run_ids: Any = None) -> dict[str, Any]:
    """One sweep of every run, or (``run_ids``: the admin's action on selected runs) of
    those runs only. A scoped sweep leaves the stored status alone: the operations page
    reads it as the periodic sweeper's, whose absence it reports."""
    now = timezone.now()
    errors = _Errors()
    returned, ended = _return_expired_claims(now, errors, run_ids)
    redispatched = _redispatch(now, errors, run_ids)
    closed = _close_runs(now, errors, run_ids)
    result = {
        "returned_claims": returned,
        "ended_infra_error": ended,
        "redispatched_lanes": redispatched,
        "closed_runs": closed,
        "errors": errors.count,
    }
    if run_ids is None:
        SweeperStatus.objects.update_or_create(
            name="runs", defaults={"last_run_at": now, "last_result": result}
        )
    return result
