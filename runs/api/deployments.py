"""Deployment API (spec/interfaces.md §7): list, create, read, update, delete, rotate, test.

Secrets are write-only: output shows ``has_secret`` only. The signing key appears in the
create and rotate responses and nowhere else. The URL is ``endpoint_url`` for hosted_http
and ``base_url`` for openai_chat (the other one is null). Every deployment is fetched
through ``runs.access`` (404 to outsiders, 403 to viewers on writes). Viewers read the
values of credential-named query parameters and extra headers elided (``viewer_document``).
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from agentclash_site.lib.api import ApiError, ApiView, ClosedInput
from agentclash_site.workspaces.access import get_workspace_for_user, membership_for
from runs.access import get_deployment_for_user
from runs.lane_settings import elided_headers, shown_url
from runs.models import Deployment, DeploymentKind, EvidenceLevel
from runs.services import deployments as services
from runs.services.deployments import DeploymentError, url_field_name


def _api_error(exc: DeploymentError) -> ApiError:
    return ApiError(exc.code, exc.message, status_code=exc.status_code, field=exc.field, choices=exc.choices)


class DeploymentOutput(serializers.Serializer):
    id = serializers.UUIDField(source="public_id")
    workspace = serializers.CharField(source="workspace.slug")
    name = serializers.CharField()
    kind = serializers.ChoiceField(choices=DeploymentKind.choices)
    endpoint_url = serializers.CharField(allow_null=True, help_text="hosted_http only")
    base_url = serializers.CharField(allow_null=True, help_text="openai_chat only")
    model = serializers.SerializerMethodField(help_text="openai_chat only")
    has_secret = serializers.BooleanField()
    has_signing_key = serializers.BooleanField()
    max_in_flight = serializers.IntegerField()
    timeout_seconds = serializers.FloatField()
    max_attempts = serializers.IntegerField()
    evidence_level = serializers.ChoiceField(choices=EvidenceLevel.choices)
    config = serializers.JSONField()
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()

    def get_model(self, obj: Deployment) -> str | None:
        return obj.model or None


def deployment_document(deployment: Deployment) -> dict[str, Any]:
    """The public JSON of a deployment (API and CLI): never the secret or signing key."""
    return dict(DeploymentOutput(deployment).data)


def viewer_document(document: dict[str, Any]) -> dict[str, Any]:
    """A deployment's document as a viewer reads it: the values of URL query parameters and
    extra headers named like credentials (``?code=``, ``X-Api-Key``) elided (``…``), as the
    deployment pages show them to every member. Editors and owners read them whole: they may
    write the config back, and an elided value written back would replace the real one."""
    shown = dict(document)
    for field_name in ("endpoint_url", "base_url"):
        if shown.get(field_name):
            shown[field_name] = shown_url(shown[field_name])
    config = shown.get("config")
    headers = config.get("extra_headers") if isinstance(config, dict) else None
    if isinstance(headers, dict):
        shown["config"] = {**config, "extra_headers": elided_headers(headers)}
    return shown


def _document_for(request: Request, deployment: Deployment) -> dict[str, Any]:
    document = deployment_document(deployment)
    membership = membership_for(request, deployment.workspace)
    return document if membership is not None and membership.can_write else viewer_document(document)


class DeploymentWithKeyOutput(DeploymentOutput):
    signing_key = serializers.CharField(help_text="shown in this response only")


class _DeploymentFields(ClosedInput):
    endpoint_url = serializers.CharField(required=False, allow_blank=True, max_length=2000)
    base_url = serializers.CharField(required=False, allow_blank=True, max_length=2000)
    model = serializers.CharField(required=False, allow_blank=True, max_length=200)
    secret = serializers.CharField(
        required=False, allow_blank=True, allow_null=True, write_only=True, trim_whitespace=False
    )
    max_in_flight = serializers.IntegerField(required=False)
    timeout_seconds = serializers.FloatField(required=False)
    max_attempts = serializers.IntegerField(required=False)
    evidence_level = serializers.ChoiceField(choices=EvidenceLevel.choices, required=False)
    config = serializers.JSONField(required=False)


class DeploymentCreateInput(_DeploymentFields):
    name = serializers.CharField(max_length=100)
    kind = serializers.ChoiceField(choices=DeploymentKind.choices)


class DeploymentUpdateInput(_DeploymentFields):
    name = serializers.CharField(max_length=100, required=False)
    kind = serializers.ChoiceField(choices=DeploymentKind.choices, required=False)


def _service_fields(data: dict[str, Any], kind: str) -> dict[str, Any]:
    """Input fields as service keywords; the URL arrives under the name its kind uses."""
    fields = {k: v for k, v in data.items() if k not in ("endpoint_url", "base_url")}
    right = url_field_name(kind)
    wrong = "endpoint_url" if right == "base_url" else "base_url"
    if data.get(wrong) and kind != DeploymentKind.TRACE_IMPORT:
        raise ApiError("wrong_url_field", f"{kind} deployments take {right}, not {wrong}", field=wrong)
    given = [data[name] for name in ("endpoint_url", "base_url") if name in data]
    if given:
        fields["url"] = next((u for u in given if u), "")
    return fields


def _no_store(response: Response) -> Response:
    """A response holding the signing key in clear: no cache (a proxy, the browser's) keeps it."""
    response["Cache-Control"] = "no-store"
    return response


NAME_CONFLICT = OpenApiResponse(
    OpenApiTypes.OBJECT, description="Another deployment of the workspace has this name (the error body)"
)


class DeploymentListApi(ApiView):
    @extend_schema(
        responses=inline_serializer("DeploymentList", {"results": DeploymentOutput(many=True)}),
        summary="List the workspace's deployments",
        operation_id="deployment_list",
    )
    def get(self, request: Request, ws: str) -> Response:
        workspace = get_workspace_for_user(request, ws)
        deployments = Deployment.objects.for_workspace(workspace).select_related("workspace")
        results = DeploymentOutput(deployments, many=True).data
        membership = membership_for(request, workspace)
        if membership is None or not membership.can_write:
            results = [viewer_document(dict(document)) for document in results]
        return Response({"results": results})

    @extend_schema(
        request=DeploymentCreateInput,
        responses={201: DeploymentWithKeyOutput, 409: NAME_CONFLICT},
        summary="Create a deployment (the signing key is shown in this response only)",
        operation_id="deployment_create",
    )
    def post(self, request: Request, ws: str) -> Response:
        workspace = get_workspace_for_user(request, ws, write=True)
        data = DeploymentCreateInput(data=request.data)
        data.is_valid(raise_exception=True)
        fields = _service_fields(dict(data.validated_data), data.validated_data["kind"])
        try:
            created = services.deployment_create(workspace=workspace, **fields)
        except DeploymentError as exc:
            raise _api_error(exc) from None
        body = {**deployment_document(created.deployment), "signing_key": created.signing_key}
        return _no_store(Response(body, status=status.HTTP_201_CREATED))


class DeploymentDetailApi(ApiView):
    @extend_schema(
        responses=DeploymentOutput, summary="Read a deployment", operation_id="deployment_retrieve"
    )
    def get(self, request: Request, ws: str, deployment_id: Any) -> Response:
        deployment = get_deployment_for_user(request, deployment_id, workspace_slug=ws)
        return Response(_document_for(request, deployment))

    @extend_schema(
        request=DeploymentUpdateInput,
        responses={200: DeploymentOutput, 409: NAME_CONFLICT},
        summary="Update the given fields (secret: a string sets it, null or empty clears it)",
        operation_id="deployment_update",
    )
    def patch(self, request: Request, ws: str, deployment_id: Any) -> Response:
        deployment = get_deployment_for_user(request, deployment_id, workspace_slug=ws, write=True)
        data = DeploymentUpdateInput(data=request.data)
        data.is_valid(raise_exception=True)
        kind = data.validated_data.get("kind", deployment.kind)
        fields = _service_fields(dict(data.validated_data), kind)
        try:
            updated = services.deployment_update(deployment=deployment, **fields)
        except DeploymentError as exc:
            raise _api_error(exc) from None
        return Response(deployment_document(updated))

    @extend_schema(responses={204: None}, summary="Delete a deployment", operation_id="deployment_delete")
    def delete(self, request: Request, ws: str, deployment_id: Any) -> Response:
        deployment = get_deployment_for_user(request, deployment_id, workspace_slug=ws, write=True)
        try:
            services.deployment_delete(deployment=deployment)
        except DeploymentError as exc:
            raise _api_error(exc) from None
        return Response(status=status.HTTP_204_NO_CONTENT)


class DeploymentRotateKeyApi(ApiView):
    @extend_schema(
        request=None,
        responses=DeploymentWithKeyOutput,
        summary="Replace the signing key (the new key is shown in this response only)",
        operation_id="deployment_rotate_signing_key",
    )
    def post(self, request: Request, ws: str, deployment_id: Any) -> Response:
        deployment = get_deployment_for_user(request, deployment_id, workspace_slug=ws, write=True)
        rotated = services.deployment_rotate_signing_key(deployment=deployment)
        return _no_store(
            Response({**deployment_document(rotated.deployment), "signing_key": rotated.signing_key})
        )


class DeploymentTestApi(ApiView):
    @extend_schema(
        request=None,
        responses=inline_serializer(
            "DeploymentTestResult",
            {
                "category": serializers.CharField(),
                "status_code": serializers.IntegerField(allow_null=True),
                "latency_ms": serializers.FloatField(allow_null=True),
                "error": serializers.CharField(),
                "error_code": serializers.CharField(),
                "body_excerpt": serializers.CharField(),
            },
        ),
        summary="Send one small real request to the deployment and report the attempt category",
        operation_id="deployment_test_connection",
    )
    def post(self, request: Request, ws: str, deployment_id: Any) -> Response:
        deployment = get_deployment_for_user(request, deployment_id, workspace_slug=ws, write=True)
        try:
            outcome = services.deployment_test_connection(deployment=deployment)
        except DeploymentError as exc:
            raise _api_error(exc) from None
        summary = outcome.summary()
        return Response(
            {
                k: summary[k]
                for k in ("category", "status_code", "latency_ms", "error", "error_code", "body_excerpt")
            }
        )
