"""Puts the user's current workspace (kept in the session) on ``request.workspace``."""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse
from django.utils.functional import SimpleLazyObject

SESSION_KEY = "current_workspace_id"


def _current_workspace(request: HttpRequest):  # type: ignore[no-untyped-def]
    from agentclash_site.workspaces.models import Workspace

    user = request.user
    if not user.is_authenticated:
        return None
    qs = Workspace.objects.filter(memberships__user=user)
    chosen = request.session.get(SESSION_KEY)
    workspace = qs.filter(id=chosen).first() if chosen else None
    if workspace is None:
        workspace = qs.order_by("slug").first()
        if workspace is not None:
            request.session[SESSION_KEY] = workspace.id
    return workspace


class CurrentWorkspaceMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        request.workspace = SimpleLazyObject(lambda: _current_workspace(request))  # type: ignore[attr-defined]
        return self.get_response(request)
