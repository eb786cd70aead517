from __future__ import annotations

from typing import Any

from django.http import HttpRequest


def workspaces(request: HttpRequest) -> dict[str, Any]:
    """The workspace switcher's data, evaluated lazily by templates that use it."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}

    def _all():  # type: ignore[no-untyped-def]
        from agentclash_site.workspaces.models import Workspace

        return list(Workspace.objects.filter(memberships__user=user).order_by("slug"))

    current = getattr(request, "workspace", None)
    return {"user_workspaces": _all, "current_workspace": current}
