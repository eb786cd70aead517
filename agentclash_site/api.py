"""Site-level API endpoints: who am I, my workspaces, health."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views import defaults
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response

from agentclash_site.lib.api import ApiView, ClosedInput, error_body
from agentclash_site.workspaces.access import get_workspace_for_user, membership_for, visible_workspaces
from agentclash_site.workspaces.services import workspace_create_or_update


class WorkspaceOutput(serializers.Serializer):
    slug = serializers.CharField()
    name = serializers.CharField()
    allow_private_endpoints = serializers.BooleanField()
    role = serializers.CharField(allow_null=True)


class WorkspaceListApi(ApiView):
    @extend_schema(
        responses=inline_serializer("WorkspaceList", {"results": WorkspaceOutput(many=True)}),
        operation_id="workspaces_list",
    )
    def get(self, request: Request) -> Response:
        data = [
            {
                "slug": ws.slug,
                "name": ws.name,
                "allow_private_endpoints": ws.allow_private_endpoints,
                "role": membership_for(request, ws).role,  # type: ignore[union-attr]
            }
            for ws in visible_workspaces(request).order_by("slug")
        ]
        return Response({"results": data})


class WorkspaceUpdateInput(ClosedInput):
    name = serializers.CharField(max_length=200)


class WorkspaceDetailApi(ApiView):
    @extend_schema(responses=WorkspaceOutput)
    def get(self, request: Request, ws: str) -> Response:
        workspace = get_workspace_for_user(request, ws)
        return Response(_workspace_out(request, workspace))

    @extend_schema(request=WorkspaceUpdateInput, responses=WorkspaceOutput)
    def patch(self, request: Request, ws: str) -> Response:
        workspace = get_workspace_for_user(request, ws, write=True)
        data = WorkspaceUpdateInput(data=request.data)
        data.is_valid(raise_exception=True)
        result = workspace_create_or_update(slug=workspace.slug, name=data.validated_data["name"])
        return Response(_workspace_out(request, result.workspace))


def _workspace_out(request: Request, workspace) -> dict:  # type: ignore[no-untyped-def]
    membership = membership_for(request, workspace)
    return {
        "slug": workspace.slug,
        "name": workspace.name,
        "allow_private_endpoints": workspace.allow_private_endpoints,
        "role": membership.role if membership else None,
    }


class HealthApi(ApiView):
    permission_classes = [AllowAny]
    authentication_classes: list = []

    @extend_schema(responses={200: dict})
    def get(self, request: Request) -> Response:
        return Response({"status": "ok"})


def api_not_found(request: HttpRequest, rest: str = "") -> JsonResponse:
    """Any URL under /api/v1/ that no route matches: a JSON 404, never the HTML page."""
    return JsonResponse(error_body("not_found", f"no API route for {request.path}"), status=404)


def server_error(request: HttpRequest) -> HttpResponse:
    """``handler500``: under /api/v1/ the error body of interfaces.md §7 (a client parses it
    as every other error), elsewhere Django's page. The traceback is logged (django.request),
    never sent."""
    if request.path.startswith("/api/"):
        message = "internal error: the server failed to answer; the details are in its log"
        return JsonResponse(error_body("internal_error", message), status=500)
    return defaults.server_error(request)


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    """``handler400`` (a request Django refused before any view, such as a Host outside
    ALLOWED_HOSTS): the error body under /api/v1/, Django's page elsewhere."""
    if request.path.startswith("/api/"):
        from django.core.exceptions import DisallowedHost

        if isinstance(exception, DisallowedHost):
            message = "the request's Host is not one this server answers to (ALLOWED_HOSTS)"
        else:
            message = "the request was refused before it reached the API"
        return JsonResponse(error_body("bad_request", message), status=400)
    return defaults.bad_request(request, exception)
