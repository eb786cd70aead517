"""One access helper per object kind of the runs app, all built on ``scoped_get``.

Outsiders get 404 (existence is never revealed); viewers get 403 when ``write=True``.
"""

from __future__ import annotations

from typing import Any

from agentclash_site.workspaces.access import scoped_get
from runs.models import Deployment, Run


def get_deployment_for_user(
    request: Any, public_id: Any, *, write: bool = False, workspace_slug: str | None = None
) -> Deployment:
    """A deployment of a workspace the user belongs to, by public UUID.

    ``workspace_slug`` narrows it to one workspace (API routes carry it in the path).
    """
    lookup: dict[str, Any] = {"public_id": public_id}
    if workspace_slug is not None:
        lookup["workspace__slug"] = workspace_slug
    return scoped_get(request, Deployment.objects.all(), write=write, **lookup)


def get_run_for_user(
    request: Any, run_id: Any, *, write: bool = False, workspace_slug: str | None = None
) -> Run:
    """A run of a workspace the user belongs to, by id (a UUID)."""
    lookup: dict[str, Any] = {"pk": run_id}
    if workspace_slug is not None:
        lookup["workspace__slug"] = workspace_slug
    return scoped_get(request, Run.objects.light(), write=write, **lookup)
