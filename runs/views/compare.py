"""Compare two runs of one pack (any versions), or two lanes: the stored comparison of
``runs.compare_tasks``. The page asks for it (computed once by a task), shows "computing…"
and polls a fragment until it is stored, then lists the matched cases by class with keyset
pagination (regressions only with one click).
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render

from agentclash_site.lib.pagination import InvalidCursor
from agentclash_site.lib.params import BadParameter, choice_param, int_param
from agentclash_site.workspaces.views import no_workspace_page
from runs.compare_tasks import CompareError, comparison_request
from runs.models import Run, RunComparison, RunLane
from runs.results import COMPARE_FILTERS, comparison_cases, run_for_user

TEMPLATES = "runs/"
POLL_SECONDS = 2
PICKER_RUNS = 50


CHANGES = {f: f for f in COMPARE_FILTERS}


def _lane(run: Run, request: HttpRequest, field: str) -> RunLane | None:
    try:
        lane_id = int_param(request.GET, field)
    except BadParameter:
        raise CompareError(field, f"{field} must be a lane id of the run") from None
    if lane_id is None:
        return None
    lane = RunLane.objects.filter(run=run, id=lane_id).first()
    if lane is None:
        raise CompareError(field, f"{field} is not a lane of that run")
    return lane


def _ordered(request: HttpRequest) -> tuple[Run | None, Run | None]:
    """``baseline`` and ``candidate``, or two ``run`` values from the run list (older first)."""
    baseline_id = request.GET.get("baseline", "").strip()
    candidate_id = request.GET.get("candidate", "").strip()
    picked = [v for v in request.GET.getlist("run") if v.strip()]
    if not (baseline_id or candidate_id) and len(picked) == 2:
        a, b = (run_for_user(request, _uuid(v)) for v in picked)
        return (a, b) if (a.created_at, str(a.id)) <= (b.created_at, str(b.id)) else (b, a)
    baseline = run_for_user(request, _uuid(baseline_id)) if baseline_id else None
    candidate = run_for_user(request, _uuid(candidate_id)) if candidate_id else None
    return baseline, candidate


def _uuid(value: str) -> Any:
    import uuid

    try:
        return uuid.UUID(value)
    except ValueError as exc:
        raise Http404("No such run.") from exc


@login_required
def compare(request: HttpRequest) -> HttpResponse:
    workspace = request.workspace  # type: ignore[attr-defined]
    if len([v for v in request.GET.getlist("run") if v.strip()]) not in (0, 2):
        return _picker(request, workspace, error="Pick exactly two runs to compare.", status=400)
    baseline, candidate = _ordered(request)
    if baseline is None or candidate is None:
        return _picker(request, workspace)
    try:
        comparison = comparison_request(
            baseline=baseline,
            candidate=candidate,
            baseline_lane=_lane(baseline, request, "baseline_lane"),
            candidate_lane=_lane(candidate, request, "candidate_lane"),
        )
    except CompareError as exc:
        return _picker(request, workspace, error=f"{exc.field}: {exc.message}", status=400)
    context: dict[str, Any] = {
        "baseline": baseline,
        "candidate": candidate,
        "comparison": comparison,
        "result": comparison.result or {},
        "unfinished": _unfinished(comparison.result or {}, baseline),
        "change": "",
        "filters": COMPARE_FILTERS,
        "poll_seconds": POLL_SECONDS,
        "base_query": _base_query(baseline, candidate, request),
        "page": None,
        "cases": [],
    }
    try:
        context["change"] = choice_param(request.GET, "change", CHANGES)
    except BadParameter as exc:
        context["error"] = exc.message
        return render(request, TEMPLATES + "compare.html", context, status=400)
    if comparison.status == "ready":
        try:
            page = comparison_cases(
                comparison, change=context["change"], after=request.GET.get("after") or None
            )
        except InvalidCursor as exc:
            context["error"] = str(exc)
            return render(request, TEMPLATES + "compare.html", context, status=400)
        context.update(page=page, cases=page.items)
    partial = request.GET.get("partial", "")
    if request.htmx and partial in ("result", "rows"):  # type: ignore[attr-defined]
        return render(request, TEMPLATES + f"compare.html#{partial}", {**context, "more": partial == "rows"})
    return render(request, TEMPLATES + "compare.html", context)


def _unfinished(result: dict[str, Any], baseline: Run) -> list[dict[str, Any]]:
    """Each run that was unfinished when the comparison was computed (``result.unfinished``:
    ``[id, status, open items]``), as ``{side, status, open}``: its cases still to finish
    are not in the comparison yet."""
    out = []
    for entry in result.get("unfinished") or []:
        if isinstance(entry, list) and len(entry) == 3:
            run_id, status, open_items = entry
            side = "baseline" if run_id == str(baseline.id) else "candidate"
            out.append({"side": side, "status": status, "open": open_items})
    return out


def _base_query(baseline: Run, candidate: Run, request: HttpRequest) -> str:
    from urllib.parse import urlencode

    params = {"baseline": str(baseline.id), "candidate": str(candidate.id)}
    for key in ("baseline_lane", "candidate_lane"):
        if request.GET.get(key):
            params[key] = request.GET[key]
    return urlencode(params)


def _picker(request: HttpRequest, workspace: Any, *, error: str = "", status: int = 200) -> HttpResponse:
    # Only the picker needs the current workspace: runs named in the query are fetched
    # through run_for_user (404 for a user who cannot see them).
    if not workspace:
        return no_workspace_page(request, "Compare runs")
    runs = list(
        Run.objects.filter(workspace=workspace)
        .select_related("pack_version__pack")
        .order_by("-created_at", "-id")[:PICKER_RUNS]
    )
    return render(request, TEMPLATES + "compare_pick.html", {"runs": runs, "error": error}, status=status)


def comparison_for_api(comparison: RunComparison) -> dict[str, Any]:
    """The API body of a stored comparison (summary; cases come paged)."""
    return {
        "id": comparison.id,
        "status": comparison.status,
        "baseline": str(comparison.baseline_id),
        "candidate": str(comparison.candidate_id),
        "baseline_lane": comparison.baseline_lane_id,
        "candidate_lane": comparison.candidate_lane_id,
        "computed_at": comparison.computed_at.isoformat() if comparison.computed_at else None,
        "error": comparison.error or None,
        "result": comparison.result,
    }
