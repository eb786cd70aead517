"""Deployment pages: list, create, detail, edit, delete, rotate the signing key, test.

Everyone in the workspace sees the list and the detail pages; writes (and the pages that
only exist to write) need an owner or editor: 403 for viewers. Deployments are fetched
through ``runs.access`` (404 for outsiders). Create and rotate redirect to the detail page
(POST/redirect/GET: a reload does not post again); the new signing key rides in the
session and is popped by the first display of that page, so it is rendered exactly once.
The secret never is.
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from agentclash_site.lib.crypto import DecryptionError, decrypt_text, encrypt_text
from agentclash_site.lib.outbound import KnownRefusal, known_refusal
from agentclash_site.lib.pagination import page_into, query_without
from agentclash_site.workspaces.access import check_write, membership_for
from agentclash_site.workspaces.views import member_page
from runs.access import get_deployment_for_user
from runs.executors import AttemptOutcome
from runs.forms import DeploymentForm, focus_first_error
from runs.models import Deployment, DeploymentKind
from runs.services import deployments as services
from runs.services.deployments import DeploymentError, url_field_name

TEMPLATES = "runs/deployments/"


def _can_write(request: HttpRequest, workspace: Any) -> bool:
    membership = membership_for(request, workspace)
    return bool(membership and membership.can_write)


DEPLOYMENT_PAGE = 50


@login_required
@member_page("Deployments")
def deployment_list(request: HttpRequest) -> HttpResponse:
    """The workspace's deployments by name, a keyset page at a time ("More deployments")."""
    workspace = request.workspace  # type: ignore[attr-defined]
    context: dict[str, Any] = {
        "workspace": workspace,
        "can_write": _can_write(request, workspace),
        "query": query_without(request.GET, "after"),
    }
    response = page_into(
        request,
        TEMPLATES + "list.html",
        context,
        Deployment.objects.for_workspace(workspace),
        sort="name",
        size=DEPLOYMENT_PAGE,
        items="deployments",
    )
    if response is not None:
        return response
    return render(request, TEMPLATES + "list.html", context)


def _url_warning(kind: str, url: Any, workspace: Any) -> KnownRefusal | None:
    """Why every call to ``url`` will be refused in ``workspace``, when the URL's host alone
    tells (an IP literal, ``localhost``): a warning, not an error. Saving still accepts the
    URL, as the API and the CLI do (interfaces.md). Other host names are not resolved here:
    a lookup is slow and may answer differently when the run calls, and the call-time guard
    checks whatever it answers then."""
    if kind == DeploymentKind.TRACE_IMPORT or not isinstance(url, str) or not url.strip():
        return None
    return known_refusal(url.strip(), allow_private=workspace.allow_private_endpoints)


def _form_page(
    request: HttpRequest, form: DeploymentForm, *, deployment: Deployment | None = None, status: int = 200
) -> HttpResponse:
    # Changing the kind swaps in that kind's fields. hx-params keeps every other field
    # (the secret above all) out of the GET query string.
    form.fields["kind"].widget.attrs.update(
        {
            "hx-get": f"{request.path}?partial=kind_fields",
            "hx-trigger": "change",
            "hx-target": "#kind-fields",
            "hx-swap": "outerHTML",
            "hx-params": "kind",
        }
    )
    calls = form.kind_value != DeploymentKind.TRACE_IMPORT  # a trace import stores no secret
    if form.is_bound and form.errors and calls and form.data.get("secret") and "secret" not in form.errors:
        # The password field is never sent back to the page: said, or the next save would
        # store the deployment without the secret that was typed.
        form.add_error(
            "secret", "Type the secret again: it is not sent back to the page, and nothing was saved."
        )
    if form.is_bound:
        focus_first_error(form, DeploymentForm.PAGE_ORDER)
    workspace = deployment.workspace if deployment is not None else request.workspace  # type: ignore[attr-defined]
    url_field = url_field_name(form.kind_value)
    url = form.data.get(url_field) if form.is_bound else form.initial.get(url_field)
    context = {
        "form": form,
        "deployment": deployment,
        "kind": form.kind_value,
        "kinds": DeploymentKind.choices,
        "workspace": workspace,
        "url_warning": _url_warning(form.kind_value, url, workspace),
    }
    if request.htmx and request.GET.get("partial") == "kind_fields":  # type: ignore[attr-defined]
        return render(request, TEMPLATES + "form.html#kind_fields", context)
    return render(request, TEMPLATES + "form.html", context, status=status)


SIGNING_KEY_SESSION = "deployment_signing_key"


def _show_key_once(request: HttpRequest, deployment: Deployment, key: str, *, rotated: bool) -> HttpResponse:
    # Encrypted as the deployment's own secrets are: the session table is not a key store.
    request.session[SIGNING_KEY_SESSION] = {
        "deployment": str(deployment.public_id),
        "key": encrypt_text(key),
        "rotated": rotated,
    }
    return redirect("deployment-detail", deployment_id=deployment.public_id)


def _pop_key(request: HttpRequest, deployment: Deployment) -> dict[str, Any]:
    """The one-time signing key of this deployment, if it waits in the session."""
    pending = request.session.get(SIGNING_KEY_SESSION)
    if not pending or pending.get("deployment") != str(deployment.public_id):
        return {}
    del request.session[SIGNING_KEY_SESSION]
    try:
        key = decrypt_text(pending["key"])
    except DecryptionError:  # FIELD_ENCRYPTION_KEY changed in between: rotate again
        return {}
    return {
        "new_signing_key": key,
        "rotated": pending["rotated"],
    }


def _detail_page(request: HttpRequest, deployment: Deployment, **extra: Any) -> HttpResponse:
    context = {
        "deployment": deployment,
        "workspace": deployment.workspace,
        "url_warning": _url_warning(deployment.kind, deployment.url, deployment.workspace),
        "config_rows": DeploymentForm.config_rows(deployment),
        "can_write": _can_write(request, deployment.workspace),
        **extra,
    }
    return render(request, TEMPLATES + "detail.html", context)


@login_required
@require_http_methods(["GET", "POST"])
@member_page("Add a deployment")
def deployment_create(request: HttpRequest) -> HttpResponse:
    workspace = request.workspace  # type: ignore[attr-defined]
    check_write(request, workspace)
    if request.method == "GET":
        kind = request.GET.get("kind")
        initial = {"kind": kind} if kind in DeploymentKind.values else {}
        return _form_page(request, DeploymentForm(initial=initial))
    form = DeploymentForm(request.POST)
    if form.is_valid():
        try:
            created = services.deployment_create(workspace=workspace, **form.service_kwargs())
        except DeploymentError as exc:
            form.add_service_error(exc)
        else:
            return _show_key_once(request, created.deployment, created.signing_key, rotated=False)
    return _form_page(request, form, status=400)


@login_required
def deployment_detail(request: HttpRequest, deployment_id: Any) -> HttpResponse:
    deployment = get_deployment_for_user(request, deployment_id)
    response = _detail_page(request, deployment, **_pop_key(request, deployment))
    response["Cache-Control"] = "no-store"  # the page may hold the one-time key
    return response


@login_required
@require_http_methods(["GET", "POST"])
def deployment_edit(request: HttpRequest, deployment_id: Any) -> HttpResponse:
    deployment = get_deployment_for_user(request, deployment_id, write=True)
    if request.method == "GET":
        form = DeploymentForm(deployment=deployment)
        if request.GET.get("kind") in DeploymentKind.values:
            form.initial["kind"] = request.GET["kind"]
        return _form_page(request, form, deployment=deployment)
    form = DeploymentForm(request.POST, deployment=deployment)
    if form.is_valid():
        try:
            services.deployment_update(deployment=deployment, **form.service_kwargs())
        except DeploymentError as exc:
            form.add_service_error(exc)
        else:
            messages.success(request, f"Deployment {deployment.name} saved.")
            return redirect("deployment-detail", deployment_id=deployment.public_id)
    return _form_page(request, form, deployment=deployment, status=400)


@login_required
@require_http_methods(["GET", "POST"])
def deployment_delete(request: HttpRequest, deployment_id: Any) -> HttpResponse:
    deployment = get_deployment_for_user(request, deployment_id, write=True)
    if request.method == "GET":
        return render(request, TEMPLATES + "delete.html", {"deployment": deployment})
    try:
        services.deployment_delete(deployment=deployment)
    except DeploymentError as exc:
        messages.error(request, exc.message)
        return redirect("deployment-detail", deployment_id=deployment.public_id)
    messages.success(request, f"Deployment {deployment.name} deleted.")
    return redirect("deployment-list")


@login_required
@require_http_methods(["GET", "POST"])
def deployment_rotate_key(request: HttpRequest, deployment_id: Any) -> HttpResponse:
    deployment = get_deployment_for_user(request, deployment_id, write=True)
    if request.method == "GET":
        return render(request, TEMPLATES + "rotate.html", {"deployment": deployment})
    rotated = services.deployment_rotate_signing_key(deployment=deployment)
    return _show_key_once(request, rotated.deployment, rotated.signing_key, rotated=True)


@login_required
@require_http_methods(["GET", "POST"])
def deployment_test(request: HttpRequest, deployment_id: Any) -> HttpResponse:
    """POST: send one test request and show its outcome. Without JavaScript the outcome page
    keeps this URL; a GET of it (the address bar's reload, a bookmark) was a 405 error page and
    now lands on the deployment's page, which offers the test again: a GET calls nothing."""
    deployment = get_deployment_for_user(request, deployment_id, write=request.method == "POST")
    if request.method == "GET":
        return redirect("deployment-detail", deployment_id=deployment.public_id)
    outcome: AttemptOutcome | None = None
    error = ""
    try:
        outcome = services.deployment_test_connection(deployment=deployment)
    except DeploymentError as exc:
        error = exc.message
    result = {"test_outcome": outcome, "test_error": error, "tested": True}
    if request.htmx:  # type: ignore[attr-defined]
        return render(request, TEMPLATES + "detail.html#test_result", {"deployment": deployment, **result})
    return _detail_page(request, deployment, **result)
