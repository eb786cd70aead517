"""Home, workspace switcher, members and API token pages, and the page every section shows
a member of no workspace (``member_page``)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from django.contrib import messages
from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from agentclash_site.lib.crypto import DecryptionError, decrypt_text, encrypt_text
from agentclash_site.lib.pagination import InvalidCursor, keyset_page, page_into, query_without
from agentclash_site.workspaces.access import (
    check_owner,
    get_workspace_for_user,
    membership_for,
    visible_workspaces,
)
from agentclash_site.workspaces.forms import MemberAddForm, MemberRoleForm
from agentclash_site.workspaces.middleware import SESSION_KEY
from agentclash_site.workspaces.models import ApiToken, Membership, Role, Workspace
from agentclash_site.workspaces.services import (
    LAST_OWNER_FIX,
    MembershipError,
    membership_add,
    membership_remove,
    membership_set_role,
    token_create,
    token_revoke,
)

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
TOKEN_PAGE = 50


@login_required
def token_list(request: HttpRequest) -> HttpResponse:
    """The user's tokens, newest first (ties by id), a keyset page at a time ("More tokens")."""
    context: dict[str, Any] = {"query": query_without(request.GET, "after")}
    status = 200
    try:
        page = keyset_page(
            ApiToken.objects.filter(user=request.user).select_related("workspace"),
            sort="-created_at",
            after=request.GET.get("after") or None,
            size=TOKEN_PAGE,
        )
        context.update(page=page, tokens=page.items)
    except InvalidCursor as exc:
        context["error"] = exc.page_message()
        status = 400
    if request.htmx and request.GET.get("partial") == "rows" and status == 200:  # type: ignore[attr-defined]
        # The one-time secret stays in the session for the page that shows it.
        return render(request, "workspaces/tokens.html#rows", {**context, "more": True})
    context.update(
        new_secret=_pop_new_secret(request), workspaces=visible_workspaces(request).order_by("slug")
    )
    response = render(request, "workspaces/tokens.html", context, status=status)
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


# --- members ----------------------------------------------------------------------------------
# Every member sees the list; owners add, re-role and remove members; anyone may leave. The
# workspace is resolved before the method is checked, so an outsider gets 404 on every URL.


MEMBER_PAGE = 50


def _members_page(
    request: HttpRequest,
    workspace: Workspace,
    *,
    add_form: MemberAddForm | None = None,
    error: str | None = None,
    status: int = 200,
) -> HttpResponse:
    me = membership_for(request, workspace)
    context: dict[str, Any] = {
        "workspace": workspace,
        "me": me,
        "roles": Role.choices,
        "add_form": add_form or MemberAddForm(),
        "error": error,
        "query": query_without(request.GET, "after"),
    }
    response = page_into(
        request,
        "workspaces/members.html",
        context,
        Membership.objects.for_members_page(workspace),
        sort="list_key",
        size=MEMBER_PAGE,
        items="members",
    )
    if response is not None:
        return response
    # The leave section's note: counted, the list being a page of the members.
    context["sole_owner"] = (
        me is not None and me.is_owner and workspace.memberships.filter(role=Role.OWNER).count() == 1
    )
    return render(request, "workspaces/members.html", context, status=status)


def _post_only(request: HttpRequest) -> HttpResponse | None:
    return None if request.method == "POST" else HttpResponseNotAllowed(["POST"])


def _target(workspace: Workspace, request: HttpRequest):  # type: ignore[no-untyped-def]
    """The user the POST's ``member`` names, if a member of ``workspace``."""
    username_field = get_user_model().USERNAME_FIELD
    membership = (
        Membership.objects.filter(
            workspace=workspace, **{f"user__{username_field}": request.POST.get("member", "")}
        )
        .select_related("user")
        .first()
    )
    return membership.user if membership else None


def _not_a_member(request: HttpRequest) -> str:
    return f"{request.POST.get('member', '')!r} is not a member of this workspace; pick one from the list."


def _done(request: HttpRequest, workspace: Workspace, text: str, *, left: bool = False) -> HttpResponse:
    messages.success(request, text)
    return redirect("home") if left else redirect("workspace-members", slug=workspace.slug)


@login_required
def member_list(request: HttpRequest, slug: str) -> HttpResponse:
    """The members page; a POST adds a member (owners only)."""
    workspace = get_workspace_for_user(request, slug)
    if request.method not in ("GET", "HEAD", "POST"):
        return HttpResponseNotAllowed(["GET", "POST"])
    if request.method != "POST":
        return _members_page(request, workspace)
    check_owner(request, workspace)
    form = MemberAddForm(request.POST)
    if form.is_valid():
        user = form.cleaned_data["member"]
        try:
            membership_add(workspace=workspace, user=user, role=form.cleaned_data["role"])
        except MembershipError as exc:
            form.add_error(exc.field, exc.message)
        else:
            return _done(request, workspace, f"{user.get_username()} added as {form.cleaned_data['role']}.")
    return _members_page(request, workspace, add_form=form, status=400)


def _owner_changes_member(
    request: HttpRequest, slug: str, change: Callable[[Workspace, Membership, Any], HttpResponse | str]
) -> HttpResponse:
    """An owner's POST about the member it names: ``change(workspace, me, user)`` answers the
    response of a success or the error to show (a refused membership change is one too)."""
    workspace = get_workspace_for_user(request, slug)
    if refused := _post_only(request):
        return refused
    me = check_owner(request, workspace)
    user = _target(workspace, request)
    if user is None:
        outcome: HttpResponse | str = _not_a_member(request)
    else:
        try:
            outcome = change(workspace, me, user)
        except MembershipError as exc:
            outcome = exc.message
    if isinstance(outcome, str):
        return _members_page(request, workspace, error=outcome, status=400)
    return outcome


@login_required
def member_role(request: HttpRequest, slug: str) -> HttpResponse:
    def change(workspace: Workspace, me: Membership, user: Any) -> HttpResponse | str:
        form = MemberRoleForm(request.POST)
        if not form.is_valid():
            return " ".join(form.errors["role"])
        role = form.cleaned_data["role"]
        membership_set_role(workspace=workspace, user=user, role=role)
        who = "You are" if user.pk == me.user_id else f"{user.get_username()} is"
        return _done(request, workspace, f"{who} now {role}.")

    return _owner_changes_member(request, slug, change)


@login_required
def member_remove(request: HttpRequest, slug: str) -> HttpResponse:
    def change(workspace: Workspace, me: Membership, user: Any) -> HttpResponse:
        membership_remove(workspace=workspace, user=user)
        if user.pk == me.user_id:
            return _done(request, workspace, f"You left {workspace.name}.", left=True)
        return _done(request, workspace, f"{user.get_username()} removed from {workspace.name}.")

    return _owner_changes_member(request, slug, change)


@login_required
def member_leave(request: HttpRequest, slug: str) -> HttpResponse:
    """Any member may leave; the last owner is refused (``membership_remove``)."""
    workspace = get_workspace_for_user(request, slug)
    if refused := _post_only(request):
        return refused
    try:
        membership_remove(workspace=workspace, user=request.user)
    except MembershipError as exc:
        error = exc.message
        if exc.code == "last_owner":
            error = (
                f"You are the last owner of {workspace.name}, so you cannot leave it: "
                f"a workspace keeps at least one owner; {LAST_OWNER_FIX}."
            )
        return _members_page(request, workspace, error=error, status=400)
    return _done(request, workspace, f"You left {workspace.name}.", left=True)
