"""Workspace-scoped access, the one place that decides who may see and change what.

Every object of the product belongs to a workspace. Outsiders get 404 (existence is never
revealed), viewers get 403 on writes. API tokens limited to one workspace see only it.
Each app builds its per-kind helper on :func:`scoped_get`, e.g. ``get_run_for_user``.
"""

from __future__ import annotations

from typing import Any, TypeVar

from django.core.exceptions import PermissionDenied
from django.db import models
from django.http import Http404, HttpRequest

from agentclash_site.workspaces.models import ApiToken, Membership, Workspace

M = TypeVar("M", bound=models.Model)


def _token_workspace_id(request: Any) -> int | None:
    auth = getattr(request, "auth", None)
    if isinstance(auth, ApiToken):
        return auth.workspace_id
    return None


def visible_workspaces(request: Any) -> models.QuerySet[Workspace]:
    """Workspaces the requesting user is a member of (narrowed by a limited token)."""
    user = request.user
    if not user.is_authenticated:
        return Workspace.objects.none()
    qs = Workspace.objects.filter(memberships__user=user)
    limited = _token_workspace_id(request)
    if limited is not None:
        qs = qs.filter(id=limited)
    return qs


def membership_for(request: Any, workspace: Workspace) -> Membership | None:
    if not request.user.is_authenticated:
        return None
    limited = _token_workspace_id(request)
    if limited is not None and limited != workspace.id:
        return None
    cache = request.__dict__.setdefault("_memberships", {})
    if workspace.id not in cache:
        cache[workspace.id] = Membership.objects.filter(workspace=workspace, user=request.user).first()
    return cache[workspace.id]


def check_write(request: Any, workspace: Workspace) -> Membership:
    membership = membership_for(request, workspace)
    if membership is None:
        raise Http404("No such workspace.")
    if not membership.can_write:
        raise PermissionDenied("Viewers cannot change this workspace.")
    return membership


def check_owner(request: Any, workspace: Workspace) -> Membership:
    """The requester's membership if they own ``workspace``: 404 to outsiders, 403 to editors
    and viewers (managing members is the owners' alone)."""
    membership = membership_for(request, workspace)
    if membership is None:
        raise Http404("No such workspace.")
    if not membership.is_owner:
        raise PermissionDenied("Only the workspace's owners manage its members.")
    return membership


def get_workspace_for_user(request: Any, slug: str, *, write: bool = False) -> Workspace:
    workspace = visible_workspaces(request).filter(slug=slug).first()
    if workspace is None:
        raise Http404("No such workspace.")
    if write:
        check_write(request, workspace)
    return workspace


def scoped_get(
    request: Any,
    queryset: models.QuerySet[M],
    *,
    write: bool = False,
    workspace_field: str = "workspace",
    **lookup: Any,
) -> M:
    """Fetch one object of a workspace the user belongs to, or 404; 403 for viewers on write."""
    qs = queryset.filter(**{f"{workspace_field}__in": visible_workspaces(request)}, **lookup)
    obj = qs.select_related(workspace_field).first()
    if obj is None:
        raise Http404("Not found.")
    workspace = obj
    for part in workspace_field.split("__"):
        workspace = getattr(workspace, part)
    if write:
        check_write(request, workspace)  # type: ignore[arg-type]
    follow_workspace(request, workspace)  # type: ignore[arg-type]
    return obj


def follow_workspace(request: Any, workspace: Workspace) -> None:
    """A page of another of the user's workspaces (a link, a bookmark) makes it the current
    one: the top bar, the switcher and the Members / Runs links named the workspace the
    session held while the page showed another's object. API requests are left alone (a
    token's request has no session to change)."""
    if not isinstance(request, HttpRequest) or not hasattr(request, "session"):
        return
    from agentclash_site.workspaces.middleware import SESSION_KEY

    # The session's value, not request.workspace: reading that lazy object costs a query
    # on fragments that never show the top bar.
    if request.session.get(SESSION_KEY) == workspace.pk:
        return
    request.session[SESSION_KEY] = workspace.pk
    request.workspace = workspace
