"""Run pages: the run list (filters, pick two to compare), the new-run form, and the run
overview at ``/runs/<uuid>/`` with its live progress, leaderboard, charts, assertion health,
case x deployment grid and export links.

Everything on the overview comes from the run row, its lanes (counters and stats) and the
stored ``RunResultSummary``; the grid is a keyset page. Fragments are named partials of
``runs/overview.html``, rendered alone when htmx asks (``?partial=``).
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db.models import Prefetch
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_http_methods, require_POST
from django_htmx.http import HttpResponseLocation

from agentclash_site.lib.broker import BrokerError, broker_message
from agentclash_site.lib.pagination import InvalidCursor, keyset_page, query_without
from agentclash_site.lib.params import BadParameter, choice_param
from agentclash_site.lib.suggest import suggest
from agentclash_site.workspaces.access import check_write, membership_for
from agentclash_site.workspaces.views import member_page
from packs.models import Pack
from runs import charts
from runs.access import get_run_for_user
from runs.documents import lane_counts
from runs.forms import RunForm, focus_first_error, last_name
from runs.lane_settings import lane_records
from runs.models import Deployment, DeploymentKind, LaneStatus, Run, RunLane, RunStatus
from runs.result_tasks import result_summary_request
from runs.results import (
    GRID_PAGE,
    RUN_PAGE,
    grid_page,
    lane_figures,
    lanes_of,
    leaderboard,
    progress_of,
    run_for_user,
    summary_is_current,
    summary_of,
)
from runs.services.trace_import import MAX_RESULTS_BYTES

TEMPLATES = "runs/"
POLL_SECONDS = 2
EXPORT_FORMATS = (
    ("csv", "CSV", "one row per case per deployment"),
    ("jsonl", "JSONL", "one case result per line"),
    ("junit", "JUnit XML", "one testcase per case, failures with evidence"),
    ("grading", "grading.json", "JSONL of every case's grading.json"),
)


RUN_STATUSES = {s.lower(): s for s in RunStatus.values}
# A run still queued this long after it was queued, nothing of it claimed, is said on its
# overview to wait for a worker: the commonest deployment mistake is a web server without a
# Celery worker (or one on another broker or queue), and the run then sits at 0 of N.
NO_WORKER_AFTER = timedelta(seconds=60)


def _can_write(request: HttpRequest, workspace: Any) -> bool:
    membership = membership_for(request, workspace)
    return bool(membership and membership.can_write)


# --- run list ---------------------------------------------------------------------------------


@login_required
@member_page("Runs")
def run_list(request: HttpRequest) -> HttpResponse:
    workspace = request.workspace  # type: ignore[attr-defined]
    filters = {
        "pack": request.GET.get("pack", "").strip(),
        "status": request.GET.get("status", "").strip(),
        "deployment": request.GET.get("deployment", "").strip(),
    }
    partial = request.GET.get("partial") if request.htmx else None  # type: ignore[attr-defined]
    if partial in ("pack_suggestions", "deployment_suggestions"):
        return _filter_suggestions(request, workspace, partial)
    context: dict[str, Any] = {
        "workspace": workspace,
        "filters": filters,
        "unknown": _unknown_filters(workspace, filters),
        "statuses": RunStatus.values,
        "can_write": _can_write(request, workspace),
        "query": query_without(request.GET, "after"),
    }
    try:
        filters["status"] = choice_param(request.GET, "status", RUN_STATUSES)
    except BadParameter as exc:
        context.update(error=exc.message, error_field=exc.name)
        return render(request, TEMPLATES + "run_list.html", context, status=400)
    qs = (
        Run.objects.filter(workspace=workspace)
        .select_related("pack_version__pack", "input_set")
        .defer("pack_version__manifest", "pack_version__source", "stats", "case_findings")
    )
    if filters["pack"]:
        qs = qs.filter(pack_version__pack__slug=filters["pack"])
    if filters["status"]:
        qs = qs.filter(status=filters["status"])
    if filters["deployment"]:
        qs = qs.filter(lanes__deployment__name=filters["deployment"])
    qs = qs.prefetch_related(
        Prefetch("lanes", queryset=RunLane.objects.defer("counters", "stats").order_by("position"))
    )
    try:
        page = keyset_page(qs, sort="-created_at", after=request.GET.get("after") or None, size=RUN_PAGE)
    except InvalidCursor as exc:
        context.update(error=str(exc), error_field="after")
        return render(request, TEMPLATES + "run_list.html", context, status=400)
    context.update(page=page, runs=page.items)
    if request.htmx and request.GET.get("partial") == "rows":  # type: ignore[attr-defined]
        return render(request, TEMPLATES + "run_list.html#rows", {**context, "more": True})
    return render(request, TEMPLATES + "run_list.html", context)


def _filter_suggestions(request: HttpRequest, workspace: Any, partial: str) -> HttpResponse:
    """The type-ahead answer of the pack or deployment filter."""
    typed = request.GET.get("pack" if partial == "pack_suggestions" else "deployment", "")
    status_id = "r-pack-suggestions-status" if partial == "pack_suggestions" else "r-dep-suggestions-status"
    found = _name_suggestions(workspace, partial, typed, status_id)
    return render(request, TEMPLATES + "run_list.html#suggestions", {"suggestions": found})


def _name_suggestions(workspace: Any, partial: str, typed: str, status_id: str) -> Any:
    """A few of this workspace's pack slugs (``pack_suggestions``) or deployment names
    (otherwise) matching ``typed``, for the runs filters and the new-run form."""
    if partial == "pack_suggestions":
        return suggest(
            Pack.objects.filter(workspace=workspace), "slug", typed, noun="pack", status_id=status_id
        )
    return suggest(
        Deployment.objects.filter(workspace=workspace), "name", typed, noun="deployment", status_id=status_id
    )


def _unknown_filters(workspace: Any, filters: dict[str, str]) -> dict[str, str]:
    """What to say of a pack or deployment filter naming none of this workspace's (typed by
    hand now that the filters are text fields): the field, and how to fix it."""
    unknown = {}
    pack, deployment = filters["pack"], filters["deployment"]
    if pack and not Pack.objects.filter(workspace=workspace, slug=pack).exists():
        unknown["pack"] = (
            f"Pack: no pack named {pack!r} in this workspace. "
            "Type part of its slug and pick a suggestion, or clear the field to see every pack."
        )
    if deployment and not Deployment.objects.filter(workspace=workspace, name=deployment).exists():
        unknown["deployment"] = (
            f"Deployment: no deployment named {deployment!r} in this workspace. "
            "Type part of its name and pick a suggestion, or clear the field to see every deployment."
        )
    return unknown


# --- new run ----------------------------------------------------------------------------------


@login_required
@require_http_methods(["GET", "POST"])
@member_page("New run")
def run_new(request: HttpRequest) -> HttpResponse:
    from runs.services.runs import RunError, run_create

    workspace = request.workspace  # type: ignore[attr-defined]
    check_write(request, workspace)
    partial = request.GET.get("partial") if request.htmx else None  # type: ignore[attr-defined]
    if partial in ("pack_suggestions", "deployment_suggestions"):
        return _run_new_suggestions(request, workspace, partial)
    initial = {name: request.GET[name] for name in ("pack", "pack_version") if request.GET.get(name)}
    form = RunForm(request.POST or None, initial=initial, workspace=workspace)
    context: dict[str, Any] = {"form": form, "workspace": workspace}
    if partial == "input_set":
        return render(request, TEMPLATES + "run_new.html#input_set_field", context)
    if partial == "versions":
        return render(request, TEMPLATES + "run_new.html#version_fields", context)
    # What a run needs and the workspace does not have yet, said next to its empty field.
    context["no_versions"] = not form.fields["pack_version"].queryset.exists()  # type: ignore[attr-defined]
    context["no_deployments"] = not form.fields["deployments"].queryset.exists()  # type: ignore[attr-defined]
    status = 200
    if request.method == "POST":
        if form.is_valid():
            data = form.cleaned_data
            try:
                run = run_create(
                    workspace=workspace,
                    user=request.user,
                    pack_version=data["pack_version"],
                    input_set=data["input_set"] or None,
                    deployments=list(data["deployments"]),
                    repetitions=data["repetitions"],
                    name=data["name"],
                )
            except RunError as exc:
                form.add_error(exc.field if exc.field in form.fields else None, exc.message)
            except BrokerError as exc:
                # The run is stored and queued (its work was to be sent on commit): its page
                # says so, rather than a 500 error page for a run that exists.
                run_id = getattr(exc, "run_id", None)
                if run_id is None:
                    raise
                messages.warning(request, broker_message(exc))
                return redirect("run-detail", run_id=run_id)
            else:
                return redirect("run-detail", run_id=run.id)
        focus_first_error(form)
        status = 400
    return render(request, TEMPLATES + "run_new.html", context, status=status)


def _run_new_suggestions(request: HttpRequest, workspace: Any, partial: str) -> HttpResponse:
    """The type-ahead answer of the form's pack field or deployment names field (the name
    being typed, after the last comma)."""
    if partial == "pack_suggestions":
        typed, status_id = request.GET.get("pack", ""), "id_pack-suggestions-status"
    else:
        typed = last_name(request.GET.get("deployment_names", ""))
        status_id = "id_deployment_names-suggestions-status"
    found = _name_suggestions(workspace, partial, typed, status_id)
    return render(request, TEMPLATES + "run_new.html#suggestions", {"suggestions": found})


# --- overview ---------------------------------------------------------------------------------


def _overview_context(request: HttpRequest, run: Run) -> dict[str, Any]:
    lanes = lanes_of(run)
    summary = summary_of(run)
    if run.is_finished and not summary_is_current(run, summary):
        summary = result_summary_request(run=run)
    ready = summary_is_current(run, summary)
    rows = leaderboard(run, lanes, summary if ready else None)
    segments, total = progress_of(lanes)
    lane_names = {str(lane.id): lane.deployment_name for lane in lanes}
    charts_by_lane = []
    for row in rows:
        bins = (summary.score_bins or {}).get(str(row.lane.id), []) if ready and summary else None
        charts_by_lane.append(
            {
                "lane": row.lane,
                "latency": charts.latency_histogram_svg(row.latency, deployment=row.lane.deployment_name),
                # None: not computed yet; an empty distribution is said in words, not drawn
                "scores": (
                    charts.score_histogram_svg(bins, deployment=row.lane.deployment_name)
                    if bins is not None and charts.has_scores(bins)
                    else None
                ),
                "nothing_scored": bins is not None and not charts.has_scores(bins),
            }
        )
    health = []
    if ready and summary:
        for entry in summary.assertion_health or []:
            if entry.get("kind") == "gate":
                continue
            cells = []
            for lane in lanes:
                tally = (entry.get("lanes") or {}).get(str(lane.id)) or {"PASSED": 0, "FAILED": 0, "other": 0}
                graded = tally["PASSED"] + tally["FAILED"]
                cells.append({"tally": tally, "rate": tally["PASSED"] / graded if graded else None})
            health.append({**entry, "cells": cells})
    stats = run.stats or {}
    can_write = _can_write(request, run.workspace)
    return {
        "run": run,
        "lanes": lanes,
        "lane_names": lane_names,
        "leaderboard": rows,
        "progress": charts.progress_svg(segments, total),
        "segments": segments,
        "total": total,
        "done": charts.finished_items(segments),
        "charts": charts_by_lane,
        "summary": summary,
        "summary_ready": ready,
        "health": health,
        "eval_feedback": stats.get("eval_feedback") or {},
        "stats_error": stats.get("error"),
        "poll_seconds": POLL_SECONDS,
        "export_formats": EXPORT_FORMATS,
        "took": (run.finished_at - run.started_at) if run.finished_at and run.started_at else None,
        "can_write": can_write,
        "operations": _operations(run, lanes),
        "no_worker": _no_worker(request, run, lanes),
        "awaiting_upload": _awaiting_upload(request, run, lanes, can_write=can_write),
    }


def _no_worker(request: HttpRequest, run: Run, lanes: list[RunLane]) -> dict[str, Any] | None:
    """How long a queued run has waited for a worker (``minutes``) and whether the viewer
    may open the operations page (``ops``: staff with the run view permission, as that page
    asks), or None. Only the lanes a worker calls (not trace_import: they wait for an
    upload) count: the notice shows while the run is queued or running, every such lane is
    still queued with nothing started, and more than ``NO_WORKER_AFTER`` passed since the
    run was queued. A run with a trace_import lane may be running because of an upload while
    its hosted lane still waits for a worker; a run without one is running only once a worker
    claimed an item, so it shows the notice only while queued and not started. From the run
    row and its lanes, already loaded: no query, unless the notice shows to staff."""
    if run.status not in (RunStatus.QUEUED, RunStatus.RUNNING):
        return None
    called = [lane for lane in lanes if lane.deployment_kind != DeploymentKind.TRACE_IMPORT]
    if not called:
        return None
    if len(called) == len(lanes) and (run.status != RunStatus.QUEUED or run.started_at is not None):
        return None
    if any(lane.status != LaneStatus.QUEUED or lane.started_at is not None for lane in called):
        return None
    waited = timezone.now() - (run.queued_at or run.created_at)
    if waited <= NO_WORKER_AFTER:
        return None
    user = request.user
    return {
        "minutes": max(1, int(waited.total_seconds() // 60)),
        "ops": bool(user.is_staff and user.has_perm("runs.view_run")),
    }


def _awaiting_upload(
    request: HttpRequest, run: Run, lanes: list[RunLane], *, can_write: bool
) -> dict[str, Any] | None:
    """What a run with trace_import lanes still waits for: its agent's results, uploaded.
    ``lanes``: per trace_import lane with items still pending (no result uploaded), its name,
    ``missing`` and ``total`` items; for members who may write (the upload asks for write
    access, as the page's run operations do), the upload ``url`` of this run and an
    ``example`` JSONL line. None when the run no longer accepts results (not queued or
    running) or every item of its trace_import lanes has one. From the lanes' counters,
    already loaded: no query."""
    if run.status not in (RunStatus.QUEUED, RunStatus.RUNNING):
        return None
    waiting = [
        {"name": lane.deployment_name, "missing": lane.pending, "total": sum(lane_counts(lane).values())}
        for lane in lanes
        if lane.deployment_kind == DeploymentKind.TRACE_IMPORT and lane.pending > 0
    ]
    if not waiting:
        return None
    found: dict[str, Any] = {"lanes": waiting, "repetitions": run.repetitions}
    if can_write:
        path = reverse("api-run-results", kwargs={"ws": run.workspace.slug, "run_id": run.id})
        found["url"] = request.build_absolute_uri(path)
        found["limit_mb"] = MAX_RESULTS_BYTES // (1024 * 1024)
        line: dict[str, Any] = {"case_key": "CASE_KEY", "deployment": waiting[0]["name"]}
        if run.repetitions > 1:
            line["repetition"] = 1
        line["final_output"] = "the agent's answer"
        found["example"] = json.dumps(line, ensure_ascii=False)
    return found


def _operations(run: Run, lanes: list[RunLane]) -> dict[str, bool]:
    """Which run operations the page offers (to members who may write): the same states
    the services accept, so a button is never shown only to be refused."""
    from runs.services.operations import RETRYABLE, rescore_pending

    failed = sum(lane.infra_error + lane.config_error for lane in lanes)
    return {
        # a cancel is refused while a re-score's items wait for their re-grade
        "cancel": not run.is_finished and not (run.status == RunStatus.SCORING and rescore_pending(run)),
        "retry": run.status in RETRYABLE and failed > 0,
        "rescore": run.status in (RunStatus.COMPLETED, RunStatus.FAILED),
    }


@login_required
def run_detail(request: HttpRequest, run_id: Any) -> HttpResponse:
    run = run_for_user(request, run_id)
    partial = request.GET.get("partial", "")
    if request.htmx and partial == "grid":  # type: ignore[attr-defined]
        return _grid(request, run)
    context = _overview_context(request, run)
    if request.htmx and partial == "live":  # type: ignore[attr-defined]
        response = render(request, TEMPLATES + "overview.html#live", {**context, "live_poll": True})
        if run.is_finished and request.GET.get("was") == "running":
            # The run just ended: reload once to show the charts and the final ranking.
            response["HX-Refresh"] = "true"
        return response
    if request.htmx and partial == "summary":  # type: ignore[attr-defined]
        return render(request, TEMPLATES + "overview.html#summary", context)
    lanes = context["lanes"]
    try:
        grid_rows, grid = grid_page(run, lanes)
    except InvalidCursor:  # pragma: no cover - the first page has no cursor
        grid_rows, grid = [], None
    context.update(
        grid_rows=grid_rows,
        grid=grid,
        grid_page_size=GRID_PAGE,
        lane_records=lane_records(lanes),
        figures=lane_figures(lanes),
    )
    return render(request, TEMPLATES + "overview.html", context)


def _grid(request: HttpRequest, run: Run) -> HttpResponse:
    lanes = lanes_of(run)
    try:
        rows, page = grid_page(run, lanes, after=request.GET.get("after") or None)
    except InvalidCursor as exc:
        return HttpResponse(str(exc), status=400)
    return render(
        request,
        TEMPLATES + "overview.html#grid_rows",
        {"run": run, "lanes": lanes, "grid_rows": rows, "grid": page, "more": True},
    )


# --- operations -------------------------------------------------------------------------------


def _back_to_run(request: HttpRequest, run: Run) -> HttpResponse:
    """POST/redirect/GET to the overview, which shows the message. An htmx request is sent
    there with ``HX-Location`` (an ajax navigation) rather than a redirect htmx follows
    silently and swaps into the button's place."""
    url = overview_url(run)
    if request.htmx:  # type: ignore[attr-defined]
        return HttpResponseLocation(url)
    return redirect(url)


def _operate(request: HttpRequest, run: Run, operation: Any, refused: str, done: Any) -> HttpResponse:
    """Run ``operation(run=run)`` (a ``runs.services.operations`` function); its outcome, or
    the service's refusal after ``refused``, is the message the overview shows. A broker
    that cannot be reached is said too: the operation is committed before its task is sent,
    and the message says what was done (it was a 500 error page)."""
    from runs.services.runs import RunError

    try:
        outcome = operation(run=run)
    except RunError as exc:
        messages.error(request, f"{refused}: {exc.message}.")
    except BrokerError as exc:
        messages.warning(request, broker_message(exc))
    else:
        messages.success(request, done(outcome))
    return _back_to_run(request, run)


@login_required
@require_http_methods(["GET", "POST"])
def run_cancel(request: HttpRequest, run_id: Any) -> HttpResponse:
    """GET: a confirmation page (the button without JavaScript); POST: cancel the run."""
    from runs.services.operations import run_cancel as cancel

    run = get_run_for_user(request, run_id, write=True)
    if request.method == "GET":
        return render(request, TEMPLATES + "run_cancel.html", {"run": run})
    return _operate(
        request,
        run,
        cancel,
        "Not cancelled",
        lambda _: "Run cancelled: nothing new starts and nothing more is graded.",
    )


@login_required
@require_POST
def run_retry_failed(request: HttpRequest, run_id: Any) -> HttpResponse:
    from runs.services.operations import run_retry_failed as retry

    run = get_run_for_user(request, run_id, write=True)
    return _operate(
        request,
        run,
        retry,
        "Nothing retried",
        lambda n: f"{n} failed item{'s' if n != 1 else ''} sent again.",
    )


@login_required
@require_POST
def run_rescore(request: HttpRequest, run_id: Any) -> HttpResponse:
    from runs.services.operations import run_rescore as rescore

    run = get_run_for_user(request, run_id, write=True)
    return _operate(
        request,
        run,
        rescore,
        "Not re-scored",
        lambda rescored: (
            f"Re-scoring the recorded evidence (revision {rescored.scoring_revision}); no agent is called."
        ),
    )


def overview_url(run: Run) -> str:
    return reverse("run-detail", kwargs={"run_id": run.id})
