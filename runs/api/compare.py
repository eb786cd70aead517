"""``GET /api/v1/workspaces/{ws}/compare?baseline=&candidate=`` (spec/interfaces.md §7).

``baseline`` and ``candidate`` are each a run id (UUID) or a lane id (integer) of the
workspace. The comparison is computed once by a task and stored: while it is being computed
the answer is 202 with ``status: pending`` (ask again); once stored, 200 with the summary
and one keyset page of cases (``after`` for the next, ``change`` to keep one class).
"""

from __future__ import annotations

import uuid
from typing import Any

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from agentclash_site.lib.api import ApiError, ApiView
from agentclash_site.lib.pagination import InvalidCursor
from agentclash_site.workspaces.access import get_workspace_for_user
from runs.compare_tasks import CompareError, comparison_request
from runs.models import ComparisonStatus, Run, RunLane
from runs.results import COMPARE_FILTERS, comparison_cases

CASE_FIELDS = (
    "deployment",
    "change",
    "challenge_key",
    "case_key",
    "baseline_status",
    "candidate_status",
    "baseline_score",
    "candidate_score",
    "score_delta",
    "noisy",
    "case_changed",
)


def _side(workspace: Any, value: str, field: str) -> tuple[Run, RunLane | None]:
    value = (value or "").strip()
    if not value:
        raise ApiError("missing_parameter", f"{field} is required: a run id or a lane id", field=field)
    if value.isascii() and value.isdigit():  # "²" and "١" are isdigit() too
        lane = (
            RunLane.objects.select_related("run__pack_version")
            .filter(id=int(value), run__workspace=workspace)
            .first()
        )
        if lane is None:
            raise ApiError(
                "not_found", f"{field}: no such lane in this workspace", status_code=404, field=field
            )
        return lane.run, lane
    try:
        run_id = uuid.UUID(value)
    except ValueError as exc:
        raise ApiError(
            "invalid_parameter", f"{field} must be a run id (UUID) or a lane id (integer)", field=field
        ) from exc
    run = Run.objects.select_related("pack_version").filter(id=run_id, workspace=workspace).first()
    if run is None:
        raise ApiError("not_found", f"{field}: no such run in this workspace", status_code=404, field=field)
    return run, None


class CompareApi(ApiView):
    @extend_schema(
        operation_id="compare_runs",
        parameters=[
            OpenApiParameter("baseline", str, required=True, description="run id (UUID) or lane id"),
            OpenApiParameter("candidate", str, required=True, description="run id (UUID) or lane id"),
            OpenApiParameter("change", str, required=False, enum=list(COMPARE_FILTERS)),
            OpenApiParameter("after", str, required=False, description="cursor of the next page"),
        ],
        responses={200: dict, 202: dict},
    )
    def get(self, request: Request, ws: str) -> Response:
        workspace = get_workspace_for_user(request, ws)
        baseline, baseline_lane = _side(workspace, request.query_params.get("baseline", ""), "baseline")
        candidate, candidate_lane = _side(workspace, request.query_params.get("candidate", ""), "candidate")
        try:
            comparison = comparison_request(
                baseline=baseline,
                candidate=candidate,
                baseline_lane=baseline_lane,
                candidate_lane=candidate_lane,
            )
        except CompareError as exc:
            raise ApiError("not_comparable", exc.message, field=exc.field) from exc
        body: dict[str, Any] = {
            "id": comparison.id,
            "status": comparison.status,
            "baseline": {"run": str(baseline.id), "lane": baseline_lane.id if baseline_lane else None},
            "candidate": {"run": str(candidate.id), "lane": candidate_lane.id if candidate_lane else None},
        }
        if comparison.status == ComparisonStatus.PENDING:
            return Response(body, status=status.HTTP_202_ACCEPTED)
        if comparison.status == ComparisonStatus.FAILED:
            raise ApiError("comparison_failed", comparison.error or "the comparison failed", status_code=500)
        change = request.query_params.get("change", "")
        if change and change not in COMPARE_FILTERS:
            raise ApiError(
                "invalid_parameter", "unknown change class", field="change", choices=list(COMPARE_FILTERS)
            )
        try:
            page = comparison_cases(
                comparison, change=change, after=request.query_params.get("after") or None
            )
        except InvalidCursor as exc:
            raise ApiError("invalid_cursor", str(exc), field="after") from exc
        body.update(
            computed_at=comparison.computed_at.isoformat() if comparison.computed_at else None,
            result=comparison.result,
            cases=[{f: getattr(c, f) for f in CASE_FIELDS} for c in page.items],
            next=page.next_cursor,
        )
        return Response(body)
