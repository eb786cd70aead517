"""Every workspace route of the API, walked from the URL conf (spec/interfaces.md §7): an
object of another workspace is a 404 with the error body, whether the outsider names the
object's workspace or their own; a request without credentials is refused with the error
body too. A route added later is walked without a change here."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.urls import URLPattern, URLResolver, get_resolver

from agentclash_site.workspaces.services import token_create
from packs.services import draft_create
from runs.models import RunItem
from runs.services.deployments import deployment_create
from tests.runs.runfactory import create_run, publish

pytestmark = pytest.mark.django_db

METHODS = ("get", "post", "put", "patch", "delete")


def _workspace_routes() -> list[tuple[str, Any]]:
    def walk(patterns: Any, prefix: str = "") -> Any:
        for p in patterns:
            if isinstance(p, URLResolver):
                yield from walk(p.url_patterns, prefix + str(p.pattern))
            elif isinstance(p, URLPattern) and getattr(p.callback, "view_class", None) is not None:
                yield prefix + str(p.pattern), p.callback.view_class

    return [
        (route, view)
        for route, view in walk(get_resolver().url_patterns)
        if route.startswith("api/v1/workspaces/<slug:ws>")
    ]


@pytest.fixture
def objects(personas: Any) -> dict[str, str]:
    """One object of each kind in the personas' workspace "acme", by URL parameter."""
    acme = personas.workspace
    version = publish(acme, slug="echo")
    deployment = deployment_create(workspace=acme, name="traces", kind="trace_import").deployment
    run = create_run(acme, version, [deployment])
    draft = draft_create(workspace=acme, user=personas.owner, name="d", bundle_text="", files={})
    lane = run.lanes.get()
    return {
        "slug": "echo",
        "number": str(version.number),
        "draft_id": str(draft.public_id),
        "deployment_id": str(deployment.public_id),
        "run_id": str(run.pk),
        "case_id": str(RunItem.objects.filter(run=run).values_list("pk", flat=True)[0]),
        "query": f"?baseline={run.pk}&candidate={lane.pk}",
    }


def _requests(objects: dict[str, str], ws: str) -> list[tuple[str, str]]:
    """(method, path) of every workspace route and method, its parameters filled in."""
    out = []
    for route, view in _workspace_routes():
        path = "/" + re.sub(r"<(?:\w+:)?(\w+)>", lambda m: ws if m[1] == "ws" else objects[m[1]], route)
        if route.endswith("/compare"):
            path += objects["query"]
        out.extend((method, path) for method in METHODS if hasattr(view, method))
    return out


def test_the_walk_reaches_every_kind_of_route(objects):
    paths = {path for _, path in _requests(objects, "acme")}
    assert len(paths) >= 18
    for tail in ("/packs", "/drafts", "/artifacts", "/deployments", "/runs", "/cases", "/export", "/compare"):
        assert any(tail in p for p in paths), tail


@pytest.mark.parametrize("ws", ["acme", "globex"], ids=["their-workspace", "own-workspace"])
def test_an_outsider_gets_404_on_every_workspace_route(personas, objects, ws):
    # The outsider owns "globex": naming it with acme's objects' ids reaches none of them.
    client = personas.api(personas.outsider)
    wrong = []
    for method, path in _requests(objects, ws):
        if ws == "globex" and path.endswith(("/packs", "/drafts", "/artifacts", "/deployments", "/runs")):
            continue  # globex's own lists and creates: nothing of acme's in them
        if ws == "globex" and path.endswith(("/packs/validate", "/globex")):
            continue  # globex itself
        response = getattr(client, method)(path, {}, format="json")
        body = response.json() if response.get("Content-Type", "").startswith("application/json") else None
        if response.status_code != 404 or not body or body.get("error", {}).get("code") != "not_found":
            wrong.append((method.upper(), path, response.status_code, body))
    assert wrong == []


def test_a_token_limited_to_another_workspace_gets_404_on_every_route(personas, objects):
    # The owner's own token, limited to globex-like scope: a workspace they are not limited to.
    from agentclash_site.workspaces.models import Role
    from agentclash_site.workspaces.services import membership_set_role

    membership_set_role(workspace=personas.other_workspace, user=personas.owner, role=Role.OWNER)
    issued = token_create(user=personas.owner, workspace=personas.other_workspace)
    client = personas.api(None)
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {issued.secret}")
    wrong = []
    for method, path in _requests(objects, "acme"):
        response = getattr(client, method)(path, {}, format="json")
        if response.status_code != 404:
            wrong.append((method.upper(), path, response.status_code))
    assert wrong == []


def test_a_request_without_credentials_is_refused_on_every_workspace_route(personas, objects):
    client = personas.api(None)
    wrong = []
    for method, path in _requests(objects, "acme"):
        response = getattr(client, method)(path, {}, format="json")
        body = response.json() if response.get("Content-Type", "").startswith("application/json") else None
        if response.status_code not in (401, 403) or not body or body["error"]["code"] != "not_authenticated":
            wrong.append((method.upper(), path, response.status_code, body))
    assert wrong == []
