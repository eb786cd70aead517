"""Pack API (spec/interfaces.md §7): schema, validate, publish, packs, versions, drafts, artifacts.

Every object is fetched through ``packs.access`` (404 to outsiders, 403 to viewers on
writes). Validation failures answer the validate body of spec/interfaces.md §4.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from django.conf import settings
from django.http import Http404, HttpResponse
from django.utils.http import content_disposition_header
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    PolymorphicProxySerializer,
    extend_schema,
    inline_serializer,
)
from rest_framework import serializers, status
from rest_framework.parsers import BaseParser, MultiPartParser
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response

from agentclash_site.lib.api import ApiError, ApiView, ClosedInput
from agentclash_site.lib.parsers import JSONParser
from agentclash_site.workspaces.access import get_workspace_for_user
from packs import bundle as pack_bundle
from packs import selectors, services
from packs.access import get_draft_for_user, get_pack_for_user, get_version_for_user
from packs.bundle import archive
from packs.bundle.schema import SCHEMA_PATH  # the checked-in schema (pack-format §11)
from packs.models import Draft, Pack, PackVersion

MIB = 1024 * 1024
ZIP_TYPES = ("application/zip", "application/x-zip-compressed", "application/x-zip")


def bundle_max_bytes() -> int:
    """The transport limit of pack-format §3 (60 MiB, the CLI's limit for a zip PATH too)."""
    return int(getattr(settings, "AGENTCLASH_BUNDLE_MAX_BYTES", archive.MAX_BUNDLE_BYTES))


# --- request bodies ----------------------------------------------------------------------


class RawBodyParser(BaseParser):
    """Any body as bytes (YAML text, a zip, a file), read up to the transport limit + 1."""

    media_type = "*/*"

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> bytes:
        if stream is None:
            return b""
        data = stream.read(bundle_max_bytes() + 1)
        if len(data) > bundle_max_bytes():
            raise _too_large()
        return data


def _too_large() -> ApiError:
    return ApiError(
        "payload_too_large",
        f"the request body must be at most {bundle_max_bytes() // MIB} MiB",
        status_code=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
    )


def _check_length(request: Request) -> None:
    try:
        length = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        length = 0
    if length > bundle_max_bytes():
        raise _too_large()


def _read_upload(request: Request, *names: str) -> tuple[bytes, str | None, str]:
    """``(bytes, filename, content type)`` of a raw body or a multipart file field."""
    _check_length(request)
    content_type = (request.content_type or "").split(";")[0].strip().lower()
    if content_type == "multipart/form-data":
        _refuse_other_fields(request, names)
        upload = next((request.FILES[n] for n in names if n in request.FILES), None)
        if upload is None:
            raise ApiError(
                "missing_file", f"send the file in the multipart field {names[0]!r}", field=names[0]
            )
        if upload.size > bundle_max_bytes():
            raise _too_large()
        name = _printable(upload.name, "filename")
        return upload.read(), name, _printable((upload.content_type or "").lower(), "Content-Type") or ""
    data = request.data
    if not isinstance(data, bytes):
        data = b""
    filename = _printable(request.query_params.get("filename"), "filename")
    return data, filename or None, _printable(content_type, "Content-Type") or ""


def _refuse_other_fields(request: Request, names: tuple[str, ...]) -> None:
    """A multipart body holds the one file and nothing else: a field the API would ignore
    (``-F strict=true`` instead of ``?strict=true``) is a 400, not a silent default."""
    for name in [*request.POST, *request.FILES]:
        if name not in names:
            hint = (
                "strict is a query parameter: add ?strict=true to the URL"
                if name == "strict"
                else f"unknown multipart field; send only the file, in the field {names[0]!r}"
            )
            raise ApiError("unknown_field", hint, field=name)
    files = sum(len(request.FILES.getlist(name)) for name in names)
    if files > 1:
        raise ApiError(
            "invalid_upload",
            f"send one file, in the field {names[0]!r} (this request has {files})",
            field=names[0],
        )


def _printable(value: str | None, field: str) -> str | None:
    """``value`` when it holds no control characters (NUL cannot even be stored), else a 400."""
    if value and any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in value):
        raise ApiError(
            "invalid_" + field.lower().replace("-", "_"),
            f"{field} contains control characters; send a plain name",
            field=field,
        )
    return value


def _read_bundle(request: Request) -> tuple[bytes, str | None, dict[str, Any] | None]:
    """The bundle bytes, and a validate body when Content-Type and bytes disagree."""
    data, filename, content_type = _read_upload(request, "bundle", "file")
    if content_type in ZIP_TYPES and not data.startswith(b"PK"):
        issue = {"field": "bundle", "message": "must be a valid zip archive", "line": None, "column": None}
        return data, filename, {"valid": False, "errors": [issue], "warnings": []}
    return data, filename, None


_TRUE = ("1", "true", "yes", "on")
_FALSE = ("", "0", "false", "no", "off")


def _strict(request: Request) -> bool:
    """``?strict=``: a value that is neither true nor false is a 400, not a silent false (a
    typo would otherwise publish what a strict check should have refused)."""
    raw = str(request.query_params.get("strict", "")).strip().lower()
    if raw in _TRUE:
        return True
    if raw in _FALSE:
        return False
    raise ApiError(
        "invalid_input",
        f"strict must be true or false (1/0, yes/no, on/off), not {raw[:40]!r}",
        field="strict",
    )


# --- schemas for OpenAPI --------------------------------------------------------------------


class BundleIssueOutput(serializers.Serializer):
    field = serializers.CharField()
    message = serializers.CharField()
    line = serializers.IntegerField(allow_null=True)
    column = serializers.IntegerField(allow_null=True)
    detail = serializers.CharField(required=False)
    rule = serializers.CharField(required=False, help_text="the lint rule, on warnings")


class ValidateOutput(serializers.Serializer):
    valid = serializers.BooleanField()
    errors = BundleIssueOutput(many=True)
    warnings = BundleIssueOutput(many=True)


class PublishInvalidOutput(ValidateOutput):
    code = serializers.CharField()


class ErrorOutput(serializers.Serializer):
    error = inline_serializer(
        "ErrorDetail",
        {
            "code": serializers.CharField(),
            "message": serializers.CharField(),
            "field": serializers.CharField(required=False),
        },
    )


class PublishOutput(serializers.Serializer):
    pack_id = serializers.UUIDField()
    pack_version_id = serializers.UUIDField()
    slug = serializers.CharField()
    number = serializers.IntegerField()
    input_set_ids = serializers.DictField(child=serializers.UUIDField())
    warnings = BundleIssueOutput(many=True)
    already_published = serializers.BooleanField()


class VersionBriefOutput(serializers.Serializer):
    id = serializers.UUIDField()
    number = serializers.IntegerField()
    content_hash = serializers.CharField()
    published_at = serializers.DateTimeField()


class PackOutput(serializers.Serializer):
    id = serializers.UUIDField()
    slug = serializers.CharField()
    name = serializers.CharField()
    family = serializers.CharField()
    description = serializers.CharField()
    latest_number = serializers.IntegerField(allow_null=True)
    versions = VersionBriefOutput(many=True)


class VersionOutput(serializers.Serializer):
    id = serializers.UUIDField()
    pack = inline_serializer(
        "VersionPack",
        {"id": serializers.UUIDField(), "slug": serializers.CharField(), "name": serializers.CharField()},
    )
    number = serializers.IntegerField()
    execution_mode = serializers.CharField()
    content_hash = serializers.CharField()
    published_at = serializers.DateTimeField()
    published_by = serializers.CharField(allow_null=True)
    warnings = BundleIssueOutput(many=True)
    challenges = inline_serializer(
        "VersionChallenge",
        {
            "key": serializers.CharField(),
            "title": serializers.CharField(),
            "category": serializers.CharField(),
            "difficulty": serializers.CharField(),
        },
        many=True,
    )
    input_sets = inline_serializer(
        "VersionInputSet",
        {
            "id": serializers.UUIDField(),
            "key": serializers.CharField(),
            "name": serializers.CharField(),
            "description": serializers.CharField(),
            "challenge_key": serializers.CharField(),
            "case_count": serializers.IntegerField(),
        },
        many=True,
    )
    cases = inline_serializer(
        "VersionCase",
        {
            "id": serializers.UUIDField(),
            "input_set": serializers.CharField(),
            "challenge_key": serializers.CharField(),
            "case_key": serializers.CharField(),
            "item_key": serializers.CharField(),
            "content_hash": serializers.CharField(),
        },
        many=True,
    )
    assets = inline_serializer(
        "VersionAsset",
        {
            "key": serializers.CharField(),
            "path": serializers.CharField(),
            "kind": serializers.CharField(),
            "media_type": serializers.CharField(),
            "size": serializers.IntegerField(allow_null=True),
        },
        many=True,
    )


_BUNDLE_REQUEST = {
    "application/yaml": OpenApiTypes.STR,
    "application/zip": OpenApiTypes.BINARY,
    "multipart/form-data": inline_serializer("BundleUpload", {"bundle": serializers.FileField()}),
}
_STRICT = OpenApiParameter("strict", bool, description="turn every warning into an error")


# --- schema --------------------------------------------------------------------------


class PackSchemaApi(ApiView):
    """The pack JSON Schema (pack-format §11): no auth, with an ETag."""

    permission_classes = [AllowAny]
    authentication_classes: list = []

    @extend_schema(
        auth=[],
        responses={(200, "application/schema+json"): OpenApiTypes.OBJECT, 304: None},
        summary="The challenge pack JSON Schema (draft 2020-12)",
        operation_id="pack_schema",
    )
    def get(self, request: Request) -> HttpResponse:
        try:
            content = SCHEMA_PATH.read_bytes()
        except FileNotFoundError as exc:
            raise ApiError("not_found", "the pack schema is not available", status_code=404) from exc
        etag = '"' + hashlib.sha256(content).hexdigest()[:32] + '"'
        if etag in [t.strip() for t in request.headers.get("If-None-Match", "").split(",")]:
            response = HttpResponse(status=304)
        else:
            response = HttpResponse(content, content_type="application/schema+json")
        response["ETag"] = etag
        response["Cache-Control"] = "public, max-age=300"
        return response


# --- validate and publish ----------------------------------------------------------------


def _either(name: str, body: type[serializers.Serializer]) -> PolymorphicProxySerializer:
    """A 400 that is the validate body, or the error body for a malformed request (no file,
    a content type that does not match the bytes)."""
    return PolymorphicProxySerializer(
        component_name=name, serializers=[body, ErrorOutput], resource_type_field_name=None
    )


class PackValidateApi(ApiView):
    parser_classes = [MultiPartParser, RawBodyParser]

    @extend_schema(exclude=True)  # documented as packs_retrieve with slug "validate"
    def get(self, request: Request, ws: str) -> Response:
        """``GET packs/validate`` is the pack whose slug is "validate" (any text is a slug)."""
        return _pack_response(request, ws, "validate")

    @extend_schema(
        request=_BUNDLE_REQUEST,
        parameters=[_STRICT],
        responses={200: ValidateOutput, 400: _either("ValidateBadRequest", ValidateOutput), 413: ErrorOutput},
        summary="Validate a pack bundle (YAML text or a zip) without storing it",
        operation_id="packs_validate",
    )
    def post(self, request: Request, ws: str) -> Response:
        get_workspace_for_user(request, ws)
        data, filename, mismatch = _read_bundle(request)
        if mismatch is not None:
            return Response(mismatch, status=400)
        body = pack_bundle.validate_bundle(data, strict=_strict(request), filename=filename).to_body()
        return Response(body, status=200 if body["valid"] else 400)


class PackListApi(ApiView):
    """``GET`` lists the workspace's packs; ``POST`` publishes a bundle."""

    parser_classes = [MultiPartParser, RawBodyParser]

    @extend_schema(
        responses=inline_serializer("PackList", {"results": PackOutput(many=True)}),
        summary="List the workspace's packs with their versions",
        operation_id="packs_list",
    )
    def get(self, request: Request, ws: str) -> Response:
        workspace = get_workspace_for_user(request, ws)
        packs = Pack.objects.for_list(workspace)
        results = [selectors.pack_document(p, versions=list(p.versions.all())) for p in packs]
        return Response({"results": results})

    @extend_schema(
        request=_BUNDLE_REQUEST,
        parameters=[_STRICT],
        responses={
            201: PublishOutput,
            200: OpenApiResponse(PublishOutput, description="the same bytes are already that version"),
            400: _either("PublishBadRequest", PublishInvalidOutput),
            409: OpenApiResponse(
                ErrorOutput, description="the message ends with the conflicting value's line and column"
            ),
            413: ErrorOutput,
        },
        summary="Publish a pack bundle as a new immutable version",
        operation_id="packs_publish",
    )
    def post(self, request: Request, ws: str) -> Response:
        workspace = get_workspace_for_user(request, ws, write=True)
        data, filename, mismatch = _read_bundle(request)
        if mismatch is not None:
            return Response({**mismatch, "code": services.PackInvalid.code}, status=400)
        try:
            result = services.pack_version_publish(
                workspace=workspace, data=data, strict=_strict(request), user=request.user, filename=filename
            )
        except services.PublishError as exc:
            return Response(exc.body(), status=exc.status_code)
        return Response(result.to_dict(), status=200 if result.already_published else 201)


def _pack_response(request: Request, ws: str, slug: str) -> Response:
    pack = get_pack_for_user(request, workspace__slug=ws, slug=slug)
    versions = list(PackVersion.objects.for_history(pack))
    return Response(selectors.pack_document(pack, versions=versions))


def _whole_slug(request: Request, ws: str) -> str:
    """Everything after ``packs/`` in the (decoded) path: the slug of a pack whose slug itself
    ends like a version route (``x/versions/1``), when no pack version matched."""
    return request.path_info.split(f"/workspaces/{ws}/packs/", 1)[1]


class PackDetailApi(ApiView):
    @extend_schema(
        responses=PackOutput,
        summary="A pack with its versions (the slug percent-encoded; it may hold any character)",
        operation_id="packs_retrieve",
    )
    def get(self, request: Request, ws: str, slug: str) -> Response:
        return _pack_response(request, ws, slug)


class PackVersionDetailApi(ApiView):
    @extend_schema(
        responses=VersionOutput, summary="A version's manifest summary", operation_id="pack_versions_retrieve"
    )
    def get(self, request: Request, ws: str, slug: str, number: int) -> Response:
        try:
            version = get_version_for_user(
                request,
                queryset=PackVersion.objects.for_detail().defer("source"),
                pack__workspace__slug=ws,
                pack__slug=slug,
                number=number,
            )
        except Http404:
            return _pack_response(request, ws, _whole_slug(request, ws))
        return Response(selectors.version_summary(version))


class PackVersionBundleApi(ApiView):
    @extend_schema(
        responses={
            (200, "application/yaml"): OpenApiTypes.BINARY,
            (200, "application/zip"): OpenApiTypes.BINARY,
        },
        summary="The version's original bytes",
        operation_id="pack_versions_bundle",
    )
    def get(self, request: Request, ws: str, slug: str, number: int) -> HttpResponse:
        try:
            version = get_version_for_user(request, pack__workspace__slug=ws, pack__slug=slug, number=number)
        except Http404:
            return _pack_response(request, ws, _whole_slug(request, ws))
        return bundle_response(version)


def download_name(version: PackVersion) -> str:
    """``<slug>-v<n>.yaml|zip``, the name a version's bundle downloads as. A slug may hold any
    character, so each run of characters other than letters, digits, ".", "_" and "-" becomes
    "_" (no "/", quote or control character reaches the header or a file system), and
    leading and trailing dots and "_" go (no hidden file, no ".."); nothing left is "pack"."""
    safe = re.sub(r"[^\w.-]+", "_", version.pack.slug).strip("._") or "pack"
    return f"{safe}-v{version.number}." + ("zip" if version.is_zip else "yaml")


def bundle_response(version: PackVersion) -> HttpResponse:
    response = HttpResponse(bytes(version.source), content_type=version.source_media_type)
    name = download_name(version)
    # RFC 6266: filename="..." for plain ASCII, filename*=utf-8''... otherwise.
    response["Content-Disposition"] = content_disposition_header(True, name)
    response["ETag"] = f'"{version.content_hash}"'
    return response


# --- drafts ----------------------------------------------------------------------------------


class DraftOutput(serializers.Serializer):
    id = serializers.UUIDField()
    name = serializers.CharField()
    bundle = serializers.CharField(required=False)
    files = serializers.DictField(child=serializers.UUIDField())
    based_on = serializers.UUIDField(allow_null=True)
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()
    revision = serializers.IntegerField(
        help_text="one more on every change; send it back (or the ETag as If-Match) with a PUT"
    )


class StrictCharField(serializers.CharField):
    """A JSON string only: DRF's ``CharField`` turns a number into its text (``5`` -> "5")."""

    default_error_messages = {"invalid": "must be a string"}

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictUUIDField(serializers.UUIDField):
    """A UUID string only: DRF's ``UUIDField`` reads an integer as ``UUID(int=...)``."""

    default_error_messages = {"invalid": "must be a UUID string"}

    def to_internal_value(self, data: Any) -> Any:
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class DraftCreateInput(ClosedInput):
    name = StrictCharField(max_length=300, required=False, default="Untitled draft")
    bundle = StrictCharField(
        required=False, allow_blank=True, trim_whitespace=False, default="", help_text="the pack.yaml text"
    )
    files = serializers.DictField(
        child=StrictUUIDField(), required=False, default=dict, help_text="bundle path -> artifact id"
    )
    template = StrictCharField(required=False, help_text="start from this example pack")


class DraftUpdateInput(ClosedInput):
    name = StrictCharField(max_length=300, required=False)
    bundle = StrictCharField(
        required=False, allow_blank=True, trim_whitespace=False, help_text="the pack.yaml text"
    )
    files = serializers.DictField(
        child=StrictUUIDField(), required=False, help_text="bundle path -> artifact id"
    )
    revision = serializers.IntegerField(
        required=False,
        min_value=1,
        help_text="the revision this change is based on: 409 draft_conflict when the draft has moved on",
    )


def _draft_error(exc: services.DraftError) -> ApiError:
    if isinstance(exc, services.DraftConflict):
        return ApiError("draft_conflict", str(exc), status_code=status.HTTP_409_CONFLICT)
    return ApiError("invalid_draft", str(exc))


def _draft_body(draft: Draft, *, with_text: bool = True) -> dict[str, Any]:
    return {**selectors.draft_document(draft, with_text=with_text), "revision": draft.revision}


def _draft_response(draft: Draft, *, status_code: int = 200) -> Response:
    response = Response(_draft_body(draft), status=status_code)
    response["ETag"] = f'"{draft.revision}"'
    return response


def _if_match_revision(request: Request, draft: Draft) -> int | None:
    """The revision an ``If-Match`` names (RFC 9110 §13.1.1): None without the header or
    with ``*``; 412 when it names no current ETag of the draft."""
    header = request.headers.get("If-Match")
    if header is None or header.strip() == "*":
        return None
    tags = {tag.strip() for tag in header.split(",")}
    if f'"{draft.revision}"' not in tags:
        raise ApiError(
            "precondition_failed",
            f'If-Match names no current ETag of this draft (it is "{draft.revision}")',
            status_code=status.HTTP_412_PRECONDITION_FAILED,
        )
    return draft.revision


class DraftListApi(ApiView):
    parser_classes = [JSONParser]

    @extend_schema(
        responses=inline_serializer("DraftList", {"results": DraftOutput(many=True)}),
        summary="The workspace's drafts, most recently edited first",
        operation_id="drafts_list",
    )
    def get(self, request: Request, ws: str) -> Response:
        workspace = get_workspace_for_user(request, ws)
        drafts = Draft.objects.for_list(workspace)
        return Response({"results": [_draft_body(d, with_text=False) for d in drafts]})

    @extend_schema(
        request=DraftCreateInput,
        responses={201: DraftOutput, 400: ErrorOutput},
        summary="Create a draft",
        operation_id="drafts_create",
    )
    def post(self, request: Request, ws: str) -> Response:
        workspace = get_workspace_for_user(request, ws, write=True)
        data = DraftCreateInput(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        if values.get("template"):
            templates = [t["name"] for t in services.draft_templates()]
            if values["template"] not in templates:
                raise ApiError(
                    "invalid_draft",
                    f"no template named {values['template']!r}; start from one of the example packs",
                    field="template",
                    choices=templates,
                )
        try:
            if values.get("template"):
                draft = services.draft_from_template(
                    workspace=workspace,
                    user=request.user,
                    template=values["template"],
                    name=values.get("name", ""),
                )
            else:
                draft = services.draft_create(
                    workspace=workspace,
                    user=request.user,
                    name=values["name"],
                    bundle_text=values["bundle"],
                    files={k: str(v) for k, v in values["files"].items()},
                )
        except services.DraftError as exc:
            raise _draft_error(exc) from exc
        return _draft_response(draft, status_code=201)


class DraftDetailApi(ApiView):
    parser_classes = [JSONParser]

    @extend_schema(
        responses=DraftOutput, summary="A draft with its YAML text", operation_id="drafts_retrieve"
    )
    def get(self, request: Request, ws: str, draft_id: Any) -> Response:
        draft = get_draft_for_user(request, workspace__slug=ws, draft_id=draft_id)
        return _draft_response(draft)

    @extend_schema(
        request=DraftUpdateInput,
        responses={200: DraftOutput, 400: ErrorOutput, 409: ErrorOutput, 412: ErrorOutput},
        summary="Change a draft",
        description="A change based on an older revision than the draft's (``revision`` in the "
        "body: 409 ``draft_conflict``; an ``If-Match`` ETag: 412) is refused and nothing of it "
        "is stored. Without either the change is based on the draft as the request finds it.",
        operation_id="drafts_update",
    )
    def put(self, request: Request, ws: str, draft_id: Any) -> Response:
        draft = get_draft_for_user(request, write=True, workspace__slug=ws, draft_id=draft_id)
        data = DraftUpdateInput(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        files = values.get("files")
        matched = _if_match_revision(request, draft)
        try:
            draft = services.draft_update(
                draft=draft,
                name=values.get("name"),
                bundle_text=values.get("bundle"),
                files={k: str(v) for k, v in files.items()} if files is not None else None,
                revision=values.get("revision", matched),
            )
        except services.DraftConflict as exc:
            if matched is None or "revision" in values:
                raise _draft_error(exc) from exc
            # The If-Match held when read, but another change landed before this one's write.
            raise ApiError(
                "precondition_failed", str(exc), status_code=status.HTTP_412_PRECONDITION_FAILED
            ) from exc
        except services.DraftError as exc:
            raise _draft_error(exc) from exc
        return _draft_response(draft)

    @extend_schema(responses={204: None}, summary="Delete a draft", operation_id="drafts_destroy")
    def delete(self, request: Request, ws: str, draft_id: Any) -> Response:
        draft = get_draft_for_user(request, write=True, workspace__slug=ws, draft_id=draft_id)
        services.draft_delete(draft=draft)
        return Response(status=204)


# --- artifacts -----------------------------------------------------------------------------


class ArtifactOutput(serializers.Serializer):
    id = serializers.UUIDField()
    sha256 = serializers.CharField()
    size = serializers.IntegerField()
    media_type = serializers.CharField()


class ArtifactUploadApi(ApiView):
    parser_classes = [MultiPartParser, RawBodyParser]

    @extend_schema(
        request={
            "multipart/form-data": inline_serializer("ArtifactUpload", {"file": serializers.FileField()}),
            "application/octet-stream": OpenApiTypes.BINARY,
        },
        parameters=[OpenApiParameter("filename", str, description="the file's name for a raw body")],
        responses={201: ArtifactOutput, 200: ArtifactOutput, 413: ErrorOutput},
        summary="Upload a file as a content-addressed artifact (the same bytes give the same artifact)",
        operation_id="artifacts_upload",
    )
    def post(self, request: Request, ws: str) -> Response:
        workspace = get_workspace_for_user(request, ws, write=True)
        data, filename, content_type = _read_upload(request, "file")
        media_type = (
            None
            if content_type in ("", "multipart/form-data", "application/x-www-form-urlencoded")
            else content_type
        )
        result = services.artifact_store(
            workspace=workspace, data=data, filename=filename or "", media_type=media_type, user=request.user
        )
        artifact = result.artifact
        body = {
            "id": str(artifact.public_id),
            "sha256": artifact.sha256,
            "size": artifact.size,
            "media_type": artifact.media_type,
        }
        return Response(body, status=201 if result.created else 200)
