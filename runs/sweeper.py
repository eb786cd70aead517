"""The recovery sweeper (Celery beat, every ``RUNS_SWEEP_SECONDS``).

1. Claims past their deadline (a killed worker, a lost task) go back to ``pending``; an
   item claimed ``max_attempts`` times already ends ``infra_error`` instead (bounded).
2. Lanes with pending work and no live dispatcher (lease ``dispatch_until`` lapsed) get a
   new dispatch task.
3. Runs whose counters say every item finished are finalised; runs stuck in ``scoring``
   (a worker died while scoring) are scored again.
The last sweep's time and counts are stored in ``SweeperStatus`` (the ops page reads it).
"""

from __future__ import annotations

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

STUCK_SCORING_SECONDS = 300.0
LOST_CLAIM_MESSAGE = "the item's claim expired {n} times (its worker was lost); giving up"


def _return_expired_claims(now: Any) -> tuple[int, int]:
    """(returned to pending, ended infra_error)."""
    returned = ended = 0
    expired = RunItem.objects.filter(state=ItemState.CLAIMED, claim_deadline__lt=now)
    lane_ids = set(expired.values_list("lane_id", flat=True).distinct()[:1000])
    for lane_id in lane_ids:
        with transaction.atomic():
            lane_q = RunLane.objects.filter(pk=lane_id)
            if connection.features.has_select_for_update:
                lane_q = lane_q.select_for_update()
            lane = lane_q.select_related("deployment").get()
            rows = RunItem.objects.filter(lane_id=lane_id, state=ItemState.CLAIMED, claim_deadline__lt=now)
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
                            error_code="claim_expired",
                            error=LOST_CLAIM_MESSAGE.format(n=i.claims),
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
                reason="claim expired",
            )
        returned += len(back)
        ended += len(give_up)
    return returned, ended


def _redispatch(now: Any) -> int:
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
            tasks.dispatch_lane.delay(lane_id)
            count += 1
    return count


def _close_runs(now: Any) -> int:
    from runs.scoring import check_run, finalize_run

    closed = 0
    for run_id in Run.objects.filter(
        status__in=[RunStatus.QUEUED, RunStatus.RUNNING], items_open__lte=0
    ).values_list("id", flat=True)[:100]:
        closed += int(check_run(run_id))
    stuck_before = now - timedelta(seconds=STUCK_SCORING_SECONDS)
    for run in Run.objects.filter(status=RunStatus.SCORING, items_open__lte=0)[:20]:
        last = run.transitions.filter(entity="run").order_by("-at").values_list("at", flat=True).first()
        if last is not None and last < stuck_before:
            finalize_run(run)
            closed += 1
    return closed


def sweep() -> dict[str, Any]:
    now = timezone.now()
    returned, ended = _return_expired_claims(now)
    redispatched = _redispatch(now)
    closed = _close_runs(now)
    result = {
        "returned_claims": returned,
        "ended_infra_error": ended,
        "redispatched_lanes": redispatched,
        "closed_runs": closed,
    }
    SweeperStatus.objects.update_or_create(name="runs", defaults={"last_run_at": now, "last_result": result})
    return result
