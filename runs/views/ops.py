"""The operations page (staff who may view runs, linked from the admin index): queue depth, items in
flight per deployment, stuck claims, and the sweeper's last run. Every figure is an indexed
count (the partial indexes on claimed and pending items) or one broker call."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.contrib.admin.views.decorators import staff_member_required
from django.core.exceptions import PermissionDenied
from django.db.models import Count
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone

from runs.models import ItemState, Run, RunItem, RunStatus, SweeperStatus

ACTIVE = (RunStatus.QUEUED, RunStatus.RUNNING, RunStatus.SCORING)
STUCK_LIST = 50
# The counts ``runs.sweeper.sweep`` stores, in its order, as the page labels them.
SWEEP_LABELS = {
    "returned_claims": "Expired claims returned to pending",
    "ended_infra_error": "Items ended infra_error (claimed too often)",
    "redispatched_lanes": "Lanes dispatched again",
    "closed_runs": "Runs closed or scored again",
    "errors": "Steps that failed (see the worker log)",
}


@dataclass(frozen=True)
class SweepFigure:
    label: str
    value: Any
    alarming: bool = False


def sweep_figures(result: Any) -> list[SweepFigure]:
    """The sweeper's stored result (``SweeperStatus.last_result``) as labelled rows: the known
    counts in the sweep's order, then any other key as stored; failed steps are flagged."""
    if not isinstance(result, dict):
        return [SweepFigure("Result", result)] if result not in (None, "") else []
    keys = [key for key in SWEEP_LABELS if key in result] + [key for key in result if key not in SWEEP_LABELS]
    return [
        SweepFigure(
            label=SWEEP_LABELS.get(key) or str(key).replace("_", " ").capitalize(),
            value=result[key],
            alarming=key == "errors" and isinstance(result[key], int | float) and result[key] > 0,
        )
        for key in keys
    ]


def broker_queue_depth(queue: str = "celery") -> tuple[int | None, str]:
    """Messages waiting in the broker's default queue, or (None, why it could not be read)."""
    from agentclash_site.celery import app

    try:
        with app.connection_for_read() as conn:
            conn.ensure_connection(max_retries=1, timeout=2)
            declared = conn.default_channel.queue_declare(queue=queue, passive=True)
            return int(declared.message_count), ""
    except Exception as exc:  # shown on the page: the broker's own words
        return None, f"{type(exc).__name__}: {exc}"


@staff_member_required
def operations(request: HttpRequest) -> HttpResponse:
    # It lists every workspace's active and stuck runs: staff without the run view
    # permission get 403 there, as in the admin's run lists.
    if not request.user.has_perm("runs.view_run"):
        raise PermissionDenied
    now = timezone.now()
    depth, depth_error = broker_queue_depth()
    claimed = RunItem.objects.filter(state=ItemState.CLAIMED)
    in_flight = list(
        claimed.values("deployment__name", "deployment__max_in_flight", "deployment__workspace__slug")
        .annotate(n=Count("id"))
        .order_by("-n")
    )
    stuck = claimed.filter(claim_deadline__lt=now)
    sweeper = SweeperStatus.objects.filter(name="runs").first()
    context: dict[str, Any] = {
        "now": now,
        "queue_depth": depth,
        "queue_error": depth_error,
        "pending": RunItem.objects.filter(state=ItemState.PENDING).count(),
        "in_flight": in_flight,
        "stuck_count": stuck.count(),
        "stuck": list(
            stuck.select_related("lane").defer("evidence", "grade").order_by("claim_deadline")[:STUCK_LIST]
        ),
        "sweeper": sweeper,
        "sweep_figures": sweep_figures(sweeper.last_result) if sweeper else [],
        "active_runs": list(
            Run.objects.filter(status__in=ACTIVE)
            .select_related("workspace", "pack_version__pack")
            .defer("stats", "case_findings", "pack_version__manifest", "pack_version__source")
            .order_by("created_at")[:50]
        ),
    }
    return render(request, "runs/operations.html", context)
