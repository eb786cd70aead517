"""The recovery sweeper (Celery beat, every ``RUNS_SWEEP_SECONDS``).

1. Claims past their deadline (a killed worker, a lost task) go back to ``pending``; an
   item claimed ``max_attempts`` times already ends ``infra_error`` instead (bounded).
2. Lanes with pending work and no live dispatcher (lease ``dispatch_until`` lapsed) get a
   new dispatch task.
3. Runs whose counters say every item finished are finalised; runs stuck in ``scoring``
   (a worker died while scoring) are scored again.
A lane or run whose step raises is logged and counted (``errors``); the sweep goes on.
The last sweep's time and counts are stored in ``SweeperStatus`` (the ops page reads it).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from django.db import connection, transaction
from django.db.models import F, Q
from django.utils import timezone

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
)
from runs.states import record_item_transitions

log = logging.getLogger(__name__)

STUCK_SCORING_SECONDS = 300.0
LOST_CLAIM_MESSAGE = "the item's claim expired {n} times (its worker was lost); giving up"


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


def _return_expired_claims(now: Any, errors: _Errors) -> tuple[int, int]:
    """(returned to pending, ended infra_error)."""
    from runs.scoring import close_lane

    returned = ended = 0
    expired = RunItem.objects.filter(state=ItemState.CLAIMED, claim_deadline__lt=now)
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
    reason: str = "claim expired",
) -> tuple[int, int]:
    """One lane's claims, in one transaction: those past their deadline or, with ``owner``,
    those of that dispatcher (it failed and gives its claims back at once). Each goes back to
    pending, or ends infra_error (``error_code``, ``message`` with ``{n}`` claims) once it
    was claimed ``max_attempts`` times: an item that always ends its slice cannot loop.
    Returns (returned to pending, ended infra_error)."""
    with transaction.atomic():
        lane_q = RunLane.objects.filter(pk=lane_id)
        if connection.features.has_select_for_update:
            lane_q = lane_q.select_for_update()
        lane = lane_q.select_related("deployment").get()
        rows = RunItem.objects.filter(lane_id=lane_id, state=ItemState.CLAIMED)
        rows = rows.filter(claim_owner=owner) if owner is not None else rows.filter(claim_deadline__lt=now)
        if connection.features.has_select_for_update:
            rows = rows.select_for_update()
        items = list(rows.only("id", "claims", "attempt_count", "run_id"))
        give_up = [i for i in items if i.claims >= lane.deployment.max_attempts]
        back = [i.pk for i in items if i.claims < lane.deployment.max_attempts]
        if back:
            RunItem.objects.filter(pk__in=back).update(
                state=ItemState.PENDING, claim_owner="", claimed_at=None, claim_deadline=None
            )
        if give_up:
            RunItem.objects.filter(pk__in=[i.pk for i in give_up]).update(
                state=ItemState.DONE,
                claim_owner="",
                claim_deadline=None,
                last_category="infra_error",
                finished_at=now,
            )
            Attempt.objects.bulk_create(
                [
                    Attempt(
                        item_id=i.pk,
                        number=i.attempt_count + 1,
                        category="infra_error",
                        error_code=error_code,
                        error=message.format(n=i.claims),
                        started_at=now,
                        finished_at=now,
                    )
                    for i in give_up
                ]
            )
            RunItem.objects.filter(pk__in=[i.pk for i in give_up]).update(
                attempt_count=F("attempt_count") + 1
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


def _redispatch(now: Any, errors: _Errors) -> int:
    from runs import tasks

    lanes = (
        RunLane.objects.filter(
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


def _close_runs(now: Any, errors: _Errors) -> int:
    from runs.scoring import check_run, finalize_run

    closed = 0
    for run_id in Run.objects.filter(
        status__in=[RunStatus.QUEUED, RunStatus.RUNNING], items_open__lte=0
    ).values_list("id", flat=True)[:100]:
        closed += int(errors.guard(f"closing run {run_id}", False, check_run, run_id))
    stuck_before = now - timedelta(seconds=STUCK_SCORING_SECONDS)
    for run in Run.objects.filter(status=RunStatus.SCORING, items_open__lte=0)[:20]:
        last = run.transitions.filter(entity="run").order_by("-at").values_list("at", flat=True).first()
        if last is not None and last < stuck_before:
            # finalize_run marks the run failed when its scoring raises: it is not retried
            closed += errors.guard(f"scoring run {run.pk} again", 0, _finalize, finalize_run, run)
    return closed


def _finalize(finalize_run: Callable[[Run], bool], run: Run) -> int:
    return int(finalize_run(run))  # 0: another process is scoring it (a long scoring, not a lost one)


def sweep() -> dict[str, Any]:
    now = timezone.now()
    errors = _Errors()
    returned, ended = _return_expired_claims(now, errors)
    redispatched = _redispatch(now, errors)
    closed = _close_runs(now, errors)
    result = {
        "returned_claims": returned,
        "ended_infra_error": ended,
        "redispatched_lanes": redispatched,
        "closed_runs": closed,
        "errors": errors.count,
    }
    SweeperStatus.objects.update_or_create(name="runs", defaults={"last_run_at": now, "last_result": result})
    return result
