"""Run API (spec/interfaces.md §7): list and create runs, the run document, keyset-paginated
cases, case detail, trace import, cancel / retry-failed / rescore, streamed exports.

Every run is fetched through ``runs.access.get_run_for_user`` (404 to outsiders, 403 to
viewers on writes). Large lists stream plain values (``.values()`` + orjson), never DRF
serializers.
"""

from __future__ import annotations

from typing import Any

import orjson
from django.http import HttpResponse, StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.parsers import BaseParser
from rest_framework.request import Request
from rest_framework.response import Response

from agentclash_site.lib.api import ApiError, ApiView, ClosedInput
from agentclash_site.lib.pagination import InvalidCursor, keyset_page
from agentclash_site.lib.parsers import JSONParser
from agentclash_site.workspaces.access import get_workspace_for_user
from runs.access import get_run_for_user
from runs.documents import CASE_FIELDS, case_detail, case_row, filter_cases, run_document, run_summary
from runs.exports import FORMATS, export_response
from runs.models import Run, RunItem
from runs.services.operations import run_cancel, run_rescore, run_retry_failed
from runs.services.runs import RunError, pack_version_for, run_create
from runs.services.trace_import import MAX_RESULTS_BYTES, READ_ENCODINGS, TOO_LARGE, run_import_results

PAGE_SIZE = 100
MAX_PAGE_SIZE = 500


def _api_error(exc: RunError) -> ApiError:
    return ApiError(exc.code, exc.message, status_code=exc.status_code, field=exc.field, choices=exc.choices)


def _json(body: Any, status_code: int = 200) -> HttpResponse:
    return HttpResponse(orjson.dumps(body), status=status_code, content_type="application/json")


class RunCreateInput(ClosedInput):
    pack = serializers.CharField(help_text="the pack slug")
    pack_version = serializers.IntegerField(required=False, min_value=1, help_text="default: the highest")
    input_set = serializers.CharField(required=False, allow_blank=True, allow_null=True)
    deployments = serializers.ListField(child=serializers.CharField(), help_text="names or ids")
    repetitions = serializers.IntegerField(required=False, default=1)
    name = serializers.CharField(required=False, allow_blank=True, default="")
    max_in_flight = serializers.IntegerField(required=False, allow_null=True)


class RunSummarySerializer(serializers.Serializer):
    """The ``run`` object of the run document (schema only)."""

    id = serializers.UUIDField()
    status = serializers.CharField()
    pack = serializers.DictField()
    input_set = serializers.CharField(allow_null=True)
    url = serializers.CharField()

    class Meta:
        ref_name = "RunSummary"


RunSummaryOutput = RunSummarySerializer()
RunDocumentOutput = inline_serializer(
    "RunDocument", {"run": RunSummaryOutput, "lanes": serializers.ListField(child=serializers.DictField())}
)


class RunListEntrySerializer(RunSummarySerializer):
    """One run of the run list (schema only)."""

    name = serializers.CharField()
    created_at = serializers.DateTimeField()
    repetitions = serializers.IntegerField()

    class Meta:
        ref_name = "RunListEntry"


class RunListApi(ApiView):
    @extend_schema(
        parameters=[
            OpenApiParameter("after", str, description="the `next` cursor of the previous page"),
            OpenApiParameter("limit", int, description=f"at most {MAX_PAGE_SIZE}, default {PAGE_SIZE}"),
        ],
        responses=inline_serializer(
            "RunList",
            {
                "results": RunListEntrySerializer(many=True),
                "next": serializers.CharField(
                    allow_null=True, help_text="cursor of the next page (`after`); null on the last page"
                ),
            },
        ),
        summary="List the workspace's runs, newest first, keyset-paginated",
        operation_id="run_list",
    )
    def get(self, request: Request, ws: str) -> HttpResponse:
        workspace = get_workspace_for_user(request, ws)
        limit = _limit(request)
        runs = Run.objects.light().filter(workspace=workspace).defer("stats")
        try:
            # newest first, ties broken by id: the cursor holds (created_at, id)
            page = keyset_page(
                runs, sort="-created_at", after=request.query_params.get("after") or None, size=limit
            )
        except InvalidCursor as exc:
            raise ApiError(
                "invalid_cursor", f"after must be the `next` value of a previous page: {exc}", field="after"
            ) from None
        results = []
        for run in page.items:
            entry = run_summary(run)
            entry.update(name=run.name, created_at=run.created_at.isoformat(), repetitions=run.repetitions)
            results.append(entry)
        return _json({"results": results, "next": page.next_cursor})

    @extend_schema(
        request=RunCreateInput,
        responses={201: RunDocumentOutput},
        summary="Create and queue a run",
        operation_id="run_create",
    )
    def post(self, request: Request, ws: str) -> Response:
        workspace = get_workspace_for_user(request, ws, write=True)
        data = RunCreateInput(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        try:
            version = pack_version_for(workspace, v["pack"], v.get("pack_version"))
            run = run_create(
                workspace=workspace,
                user=request.user,
                pack_version=version,
                input_set=v.get("input_set") or None,
                deployments=v["deployments"],
                repetitions=v.get("repetitions", 1),
                name=v.get("name", ""),
                max_in_flight=v.get("max_in_flight"),
            )
        except RunError as exc:
            raise _api_error(exc) from None
        return Response(run_document(run), status=status.HTTP_201_CREATED)


def _limit(request: Request) -> int:
    raw = request.query_params.get("limit")
    if raw is None:
        return PAGE_SIZE
    try:
        value = int(raw)
    except ValueError:
        raise ApiError(
            "invalid_limit", f"limit must be a whole number from 1 to {MAX_PAGE_SIZE}", field="limit"
        ) from None
    if not 1 <= value <= MAX_PAGE_SIZE:
        raise ApiError(
            "invalid_limit", f"limit must be a whole number from 1 to {MAX_PAGE_SIZE}", field="limit"
        )
    return value


class RunDetailApi(ApiView):
    @extend_schema(
        responses=RunDocumentOutput,
        summary="The run document of `eval start --follow`, without cases",
        operation_id="run_retrieve",
    )
    def get(self, request: Request, ws: str, run_id: Any) -> HttpResponse:
        run = get_run_for_user(request, run_id, workspace_slug=ws)
        return _json(run_document(run))


class RunCaseListApi(ApiView):
    @extend_schema(
        parameters=[
            OpenApiParameter(
                "status",
                str,
                description="PASSED, FAILED, ..., infra_error, config_error, cancelled, pending",
            ),
            OpenApiParameter("challenge", str),
            OpenApiParameter("deployment", str, description="deployment name"),
            OpenApiParameter("after", int, description="the `next` cursor of the previous page"),
            OpenApiParameter("limit", int),
        ],
        responses=inline_serializer(
            "RunCaseList",
            {
                "results": serializers.ListField(child=serializers.DictField()),
                "next": serializers.IntegerField(allow_null=True),
            },
        ),
        summary="The run's cases, keyset-paginated",
        operation_id="run_case_list",
    )
    def get(self, request: Request, ws: str, run_id: Any) -> HttpResponse:
        run = get_run_for_user(request, run_id, workspace_slug=ws)
        limit = _limit(request)
        qs = RunItem.objects.filter(run=run)
        params = request.query_params
        try:
            qs = filter_cases(qs, params.get("status"))
        except ValueError:
            raise ApiError(
                "invalid_status",
                "status must be a grade status (PASSED, FAILED, NOT_EVALUATED, UNAVAILABLE, ERROR), "
                "infra_error, config_error, cancelled or pending",
                field="status",
            ) from None
        if params.get("challenge"):
            qs = qs.filter(challenge_key=params["challenge"])
        if params.get("deployment"):
            qs = qs.filter(lane__deployment_name=params["deployment"])
        if params.get("after"):
            try:
                qs = qs.filter(id__gt=int(params["after"]))
            except ValueError:
                raise ApiError(
                    "invalid_cursor", "after must be the `next` value of a previous page", field="after"
                ) from None
        rows = [case_row(v) for v in qs.order_by("id").values(*CASE_FIELDS)[: limit + 1]]
        more = len(rows) > limit
        rows = rows[:limit]
        return _json({"results": rows, "next": rows[-1]["id"] if more else None})


class RunCaseDetailApi(ApiView):
    @extend_schema(
        responses=OpenApiTypes.OBJECT,
        summary="One case: its grading.json, attempts and earlier revisions",
        operation_id="run_case_retrieve",
    )
    def get(self, request: Request, ws: str, run_id: Any, case_id: int) -> HttpResponse:
        run = get_run_for_user(request, run_id, workspace_slug=ws)
        item = RunItem.objects.select_related("lane").filter(run=run, pk=case_id).first()
        if item is None:
            raise ApiError("not_found", "no such case in this run", status_code=404)
        return _json(case_detail(item))


class _RawParser(BaseParser):
    media_type = "*/*"

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> bytes:
        data = stream.read(MAX_RESULTS_BYTES + 1) if stream is not None else b""
        if len(data) > MAX_RESULTS_BYTES:
            raise ApiError("payload_too_large", TOO_LARGE.format(what=""), status_code=413)
        return data


class BadResultLineSerializer(serializers.Serializer):
    line = serializers.IntegerField(help_text="1-based line of the JSONL (OTLP: the trace's position)")
    message = serializers.CharField()
    field = serializers.CharField(required=False, help_text="the line's field at fault, when it is one")

    class Meta:
        ref_name = "BadResultLine"


class RunResultsErrorDetail(serializers.Serializer):
    code = serializers.CharField(
        help_text="`invalid_results` (nothing stored; `lines` lists the bad lines, the first 1,000 by "
        "line, and the message counts them all), `parse_error` "
        "(an OTLP document of the wrong shape, `field` naming the place, or not JSON; a broken gzip; a "
        "UTF-16 or UTF-32 body), `no_results` "
        "(no result line: an empty or blank body, or OTLP without spans), `payload_too_large`, "
        "`run_not_accepting_results`, `no_trace_import_lane`, `unsupported_content_encoding`, `unsupported_media_type`, ..."
    )
    message = serializers.CharField()
    field = serializers.CharField(required=False, allow_null=True)
    choices = serializers.ListField(required=False)
    lines = BadResultLineSerializer(many=True, required=False)

    class Meta:
        ref_name = "RunResultsErrorDetail"


RunResultsError = inline_serializer("RunResultsError", {"error": RunResultsErrorDetail()})


class RunResultsApi(ApiView):
    parser_classes = [_RawParser]

    @extend_schema(
        request={"application/x-ndjson": OpenApiTypes.STR, "application/json": OpenApiTypes.OBJECT},
        responses={
            200: inline_serializer(
                "RunResultsAccepted",
                {
                    "accepted": serializers.IntegerField(
                        help_text="results stored: every line of the upload"
                    ),
                    "run": inline_serializer(
                        "RunRef", {"id": serializers.UUIDField(), "status": serializers.CharField()}
                    ),
                },
            ),
            400: OpenApiResponse(
                RunResultsError,
                description="Bad lines (`invalid_results`: nothing was stored, `lines` lists the "
                "first 1,000 bad lines), or an OTLP document of the wrong shape (`parse_error`, `field` names where)",
            ),
            409: OpenApiResponse(
                RunResultsError,
                description="The run does not accept results (finished, or no trace_import lane)",
            ),
            413: OpenApiResponse(
                RunResultsError,
                description="More than 64 MB (a gzip body: decompressed): split the file into several uploads",
            ),
            415: OpenApiResponse(
                RunResultsError,
                description="A Content-Encoding other than gzip or identity, or a multipart form "
                "(the file is sent as the body)",
            ),
        },
        summary="Upload results for trace_import lanes: JSONL of the response shape, or OTLP JSON",
        description=(
            "All or nothing: when any line is bad nothing is stored, and the 400 `invalid_results` "
            "lists the bad lines (the first 1,000 by line, each with its number, message and the "
            "field at fault; the message counts them all); fix them and send the whole upload "
            "again. A gzip body (`Content-Encoding: gzip`, or the bytes alone) is "
            "read decompressed; another Content-Encoding is a 415. A body without a result line is a "
            "400 `no_results`. Up to 64 MB a body (gzip: decompressed), else a 413: split a larger "
            "file into several uploads. JSONL is read a line at a time; OTLP JSON (a document, or "
            "OTLP JSON Lines) is parsed whole, the server holding several times its size while it "
            "reads it (about 6x for spans with their attributes, up to about 40x for a document of "
            "many bare spans), so a large trace set goes best as several uploads, or as JSONL."
        ),
        operation_id="run_results_upload",
    )
    def post(self, request: Request, ws: str, run_id: Any) -> HttpResponse:
        run = get_run_for_user(request, run_id, workspace_slug=ws, write=True)
        encoding = request.headers.get("Content-Encoding", "").strip()
        if encoding.lower() not in READ_ENCODINGS:
            raise ApiError(
                "unsupported_content_encoding",
                f"Content-Encoding {encoding!r} is not read: send the body as it is, or gzip "
                "(Content-Encoding: gzip)",
                status_code=415,
                field="Content-Encoding",
            )
        if request.content_type.partition(";")[0].strip().lower() == "multipart/form-data":
            raise ApiError(
                "unsupported_media_type",
                "a form upload (curl -F) is not read: send the file itself as the body (curl "
                "--data-binary @results.jsonl), Content-Type application/x-ndjson or application/json",
                status_code=415,
                field="Content-Type",
            )
        data = request.data if isinstance(request.data, bytes) else b""
        try:
            outcome = run_import_results(run=run, data=data)
        except RunError as exc:
            raise _api_error(exc) from None
        if outcome.bad_lines:
            return _json(outcome.error_body(), status.HTTP_400_BAD_REQUEST)
        run.refresh_from_db()
        return _json({"accepted": outcome.accepted, "run": {"id": str(run.pk), "status": run.status}})


class _OperationApi(ApiView):
    parser_classes = [JSONParser]
    operation: str = ""

    def post(self, request: Request, ws: str, run_id: Any) -> HttpResponse:
        run = get_run_for_user(request, run_id, workspace_slug=ws, write=True)
        try:
            body = self.perform(run)
        except RunError as exc:
            raise _api_error(exc) from None
        run.refresh_from_db()
        return _json({"run": {"id": str(run.pk), "status": run.status}, **body})

    def perform(self, run: Run) -> dict[str, Any]:
        raise NotImplementedError


_OP_OUT = inline_serializer("RunOperation", {"run": serializers.DictField()})


class RunCancelApi(_OperationApi):
    @extend_schema(request=None, responses=_OP_OUT, summary="Cancel the run", operation_id="run_cancel")
    def post(self, request: Request, ws: str, run_id: Any) -> HttpResponse:
        return super().post(request, ws, run_id)

    def perform(self, run: Run) -> dict[str, Any]:
        run_cancel(run=run)
        return {}


class RunRetryFailedApi(_OperationApi):
    @extend_schema(
        request=None,
        responses=_OP_OUT,
        summary="Send infra/config failures again",
        operation_id="run_retry_failed",
    )
    def post(self, request: Request, ws: str, run_id: Any) -> HttpResponse:
        return super().post(request, ws, run_id)

    def perform(self, run: Run) -> dict[str, Any]:
        return {"retried": run_retry_failed(run=run)}


class RunRescoreApi(ApiView):
    parser_classes = [JSONParser]

    @extend_schema(
        request=None,
        responses={202: RunDocumentOutput},
        summary="Re-grade the recorded evidence with the current engine (a new scoring revision, by a task)",
        description=(
            "Answers 202 with the run document (status `scoring`) once the new revision is opened; "
            "a task re-grades the items and completes the run (poll the run document)."
        ),
        operation_id="run_rescore",
    )
    def post(self, request: Request, ws: str, run_id: Any) -> HttpResponse:
        run = get_run_for_user(request, run_id, workspace_slug=ws, write=True)
        try:
            run = run_rescore(run=run)
        except RunError as exc:
            raise _api_error(exc) from None
        return _json(run_document(run), status.HTTP_202_ACCEPTED)


class RunExportApi(ApiView):
    def perform_content_negotiation(self, request: Request, force: bool = False) -> Any:
        # ``?format=`` names the export here, not a DRF renderer.
        return super().perform_content_negotiation(request, force=True)

    @extend_schema(
        parameters=[OpenApiParameter("format", str, enum=list(FORMATS), required=True)],
        responses={200: OpenApiTypes.BINARY},
        summary="Stream the run's results (jsonl, csv, junit or grading)",
        operation_id="run_export",
    )
    def get(self, request: Request, ws: str, run_id: Any) -> StreamingHttpResponse:
        run = get_run_for_user(request, run_id, workspace_slug=ws)
        fmt = request.query_params.get("format", "")
        if fmt not in FORMATS:
            raise ApiError(
                "invalid_format",
                f"format must be one of {', '.join(FORMATS)}",
                field="format",
                choices=list(FORMATS),
            )
        return export_response(run, fmt)
