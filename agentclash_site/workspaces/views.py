"""Home, workspace switcher and API token pages, and the page every section shows a member
of no workspace (``member_page``)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from agentclash_site.lib.crypto import DecryptionError, decrypt_text, encrypt_text
from agentclash_site.workspaces.access import get_workspace_for_user, visible_workspaces
from agentclash_site.workspaces.middleware import SESSION_KEY
from agentclash_site.workspaces.models import ApiToken
from agentclash_site.workspaces.services import token_create, token_revoke

# --- helpers of every HTML view -------------------------------------------------------------


def no_workspace_page(request: HttpRequest, title: str) -> HttpResponse:
    """The section page of a user who is a member of no workspace (403 for a write)."""
    status = 200 if request.method in ("GET", "HEAD") else 403
    return render(request, "workspaces/no_workspace.html", {"title": title}, status=status)


def member_page(title: str) -> Callable[[Callable[..., HttpResponse]], Callable[..., HttpResponse]]:
    """A section page of the current workspace (``request.workspace``): a user who is a
    member of no workspace gets the page saying so, not a bare 404."""

    def decorator(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
        @functools.wraps(view)
        def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            if not request.workspace:  # type: ignore[attr-defined]
                return no_workspace_page(request, title)
            return view(request, *args, **kwargs)

        return wrapped

    return decorator


# --- pages ------------------------------------------------------------------------------------


@login_required
def home(request: HttpRequest) -> HttpResponse:
    workspace = request.workspace  # type: ignore[attr-defined]
    context: dict[str, object] = {"workspace": workspace}
    if workspace:
        context.update(_home_counts(workspace))
    return render(request, "home.html", context)


def _home_counts(workspace) -> dict[str, int]:  # type: ignore[no-untyped-def]
    """Counts for the home page; apps register what they own lazily to avoid import cycles."""
    from django.apps import apps

    counts = {}
    for label, model_name, key in (
        ("packs", "Pack", "pack_count"),
        ("runs", "Deployment", "deployment_count"),
        ("runs", "Run", "run_count"),
    ):
        try:
            model = apps.get_model(label, model_name)
        except LookupError:
            counts[key] = 0
            continue
        counts[key] = model.objects.filter(workspace=workspace).count()
    return counts


@login_required
@require_POST
def workspace_switch(request: HttpRequest) -> HttpResponse:
    workspace = get_workspace_for_user(request, request.POST.get("workspace", ""))
    request.session[SESSION_KEY] = workspace.id
    target = request.POST.get("next") or reverse("home")
    if not url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()}):
        target = reverse("home")
    return redirect(target)


NEW_TOKEN_SESSION = "new_api_token"


@login_required
def token_list(request: HttpRequest) -> HttpResponse:
    tokens = ApiToken.objects.filter(user=request.user).select_related("workspace")
    response = render(
        request,
        "workspaces/tokens.html",
        {
            "tokens": tokens,
            "new_secret": _pop_new_secret(request),
            "workspaces": visible_workspaces(request).order_by("slug"),
        },
    )
    response["Cache-Control"] = "no-store"  # the page may hold the one-time secret
    return response


@login_required
@require_POST
def token_new(request: HttpRequest) -> HttpResponse:
    """POST/redirect/GET: a reload of the page showing the secret does not issue another
    token. The secret waits in the session, encrypted as deployments' signing keys do
    (``runs.views.deployments``), and the first display of the list pops it."""
    slug = request.POST.get("workspace", "").strip()
    workspace = get_workspace_for_user(request, slug) if slug else None
    issued = token_create(
        user=request.user, workspace=workspace, name=request.POST.get("name", "").strip()[:100]
    )
    request.session[NEW_TOKEN_SESSION] = encrypt_text(issued.secret)
    return redirect("token-list")


def _pop_new_secret(request: HttpRequest) -> str | None:
    pending = request.session.pop(NEW_TOKEN_SESSION, None)
    if pending is None:
        return None
    try:
        return decrypt_text(pending)
    except DecryptionError:  # FIELD_ENCRYPTION_KEY changed in between: create another
        return None


@login_required
@require_POST
def token_revoke_view(request: HttpRequest, token_id) -> HttpResponse:  # type: ignore[no-untyped-def]
    token = ApiToken.objects.filter(user=request.user, public_id=token_id).first()
    if token is None:
        from django.http import Http404

        raise Http404("No such token.")
    token_revoke(token=token)
    messages.success(request, f"Token {token.hint}… revoked.")
    return redirect("token-list")
