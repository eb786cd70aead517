"""Site-level API endpoints: who am I, my workspaces, health."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agentclash_site.workspaces.access import get_workspace_for_user, membership_for, visible_workspaces


class WorkspaceOutput(serializers.Serializer):
    slug = serializers.CharField()
    name = serializers.CharField()
    allow_private_endpoints = serializers.BooleanField()
    role = serializers.CharField()


class WorkspaceListApi(APIView):
    @extend_schema(responses=WorkspaceOutput(many=True))
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


class WorkspaceDetailApi(APIView):
    @extend_schema(responses=WorkspaceOutput)
    def get(self, request: Request, ws: str) -> Response:
        workspace = get_workspace_for_user(request, ws)
        membership = membership_for(request, workspace)
        return Response(
            {
                "slug": workspace.slug,
                "name": workspace.name,
                "allow_private_endpoints": workspace.allow_private_endpoints,
                "role": membership.role if membership else None,
            }
        )


class HealthApi(APIView):
    permission_classes = [AllowAny]
    authentication_classes: list = []

    @extend_schema(responses={200: dict})
    def get(self, request: Request) -> Response:
        return Response({"status": "ok"})
