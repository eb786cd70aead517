"""A NUL character in an API query parameter is a 400 naming the parameter, checked before the
view runs, on every database. It used to be caught only when PostgreSQL refused it (a
``DataError``): on SQLite ``?challenge=%00`` answered 200 with an empty list."""

from __future__ import annotations

import pytest
from django.http import QueryDict
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework.test import APIRequestFactory

from agentclash_site.lib.api import ApiError, ApiView, reject_nul_query_parameters
from runs.services.deployments import deployment_create
from tests.processes import run_on_sqlite
from tests.runs.runfactory import create_run, publish

BASE = "/api/v1/workspaces/acme"


@pytest.mark.parametrize(
    "query,field",
    [("challenge=%00", "challenge"), ("deployment=a%00", "deployment"), ("ok=1&x%00y=2", "x\\0y")],
)
def test_the_check_names_the_first_parameter_holding_a_nul(query, field):
    with pytest.raises(ApiError) as caught:
        reject_nul_query_parameters(QueryDict(query))
    error = caught.value.as_body()["error"]
    assert error == {
        "code": "invalid_input",
        "message": f"query parameter {field!r} must not contain NUL characters",
        "field": field,
    }
    reject_nul_query_parameters(QueryDict("challenge=a&deployment=%E2%82%AC"))  # nothing to refuse


class _Echo(ApiView):
    permission_classes = [AllowAny]
    authentication_classes: list = []
    calls: list[str] = []

    def get(self, request):
        self.calls.append(request.query_params.get("deployment"))
        return Response({"ok": True})


def test_an_api_view_refuses_it_before_its_handler_runs_without_a_database():
    """No database is touched (this test has none): the answer cannot depend on one."""
    _Echo.calls = []
    view = _Echo.as_view()
    response = view(APIRequestFactory().get("/x", {"deployment": "a\x00"}))
    assert response.status_code == 400
    assert response.data["error"]["field"] == "deployment"
    assert _Echo.calls == []
    assert view(APIRequestFactory().get("/x", {"deployment": "a"})).status_code == 200
    assert _Echo.calls == ["a"]


@pytest.mark.django_db
def test_every_runs_api_list_answers_400_naming_the_parameter(personas):
    version = publish(personas.workspace, cases=1)
    dep = deployment_create(workspace=personas.workspace, name="ci", kind="trace_import").deployment
    run = create_run(personas.workspace, version, [dep])
    api = personas.api(personas.viewer)
    cases = [
        (f"runs/{run.pk}/cases", "challenge", "\x00"),
        (f"runs/{run.pk}/cases", "deployment", "a\x00"),
        (f"runs/{run.pk}/cases", "status", "\x00"),
        (f"runs/{run.pk}/cases", "after", "1\x00"),
        ("runs", "after", "\x00"),
        ("runs", "limit", "1\x00"),
        (f"runs/{run.pk}", "anything", "\x00"),
        (f"runs/{run.pk}/export", "format", "csv\x00"),
        ("deployments", "q", "\x00"),
        ("compare", "baseline", str(run.pk) + "\x00"),
    ]
    for url, name, value in cases:
        response = api.get(f"{BASE}/{url}", {name: value})
        assert response.status_code == 400, (url, name, response.content[:200])
        error = response.json()["error"]
        assert (error["code"], error["field"]) == ("invalid_input", name), (url, error)
        assert error["message"] == f"query parameter {name!r} must not contain NUL characters"


SCRIPT = """
import json
from django.contrib.auth import get_user_model
from django.test import Client
from agentclash_site.workspaces.models import Role, Workspace
from agentclash_site.workspaces.services import membership_set_role, token_create
from runs.services.deployments import deployment_create
from tests.runs.runfactory import create_run, publish

ws = Workspace.objects.create(slug="lite", name="Lite")
user = get_user_model().objects.create_user("lite-owner")
membership_set_role(workspace=ws, user=user, role=Role.OWNER)
token = token_create(user=user, workspace=None).secret
dep = deployment_create(workspace=ws, name="ci", kind="trace_import").deployment
run = create_run(ws, publish(ws, cases=1), [dep])
client = Client(HTTP_AUTHORIZATION=f"Bearer {token}", HTTP_HOST="127.0.0.1")
out = {}
for query in ("challenge=%00", "deployment=a%00", "challenge=echo"):
    response = client.get(f"/api/v1/workspaces/lite/runs/{run.pk}/cases?{query}")
    out[query] = [response.status_code, response.json()]
print(json.dumps(out))
"""


def test_on_sqlite_too(tmp_path):
    """A child process on a fresh SQLite file: the same 400, not a 200 with an empty list."""
    result = run_on_sqlite(tmp_path, SCRIPT)
    for query, field in (("challenge=%00", "challenge"), ("deployment=a%00", "deployment")):
        status, body = result[query]
        assert status == 400, (query, body)
        assert (body["error"]["code"], body["error"]["field"]) == ("invalid_input", field)
    status, body = result["challenge=echo"]
    assert status == 200 and len(body["results"]) == 1


def test_every_api_route_uses_the_checking_base_view():
    """A view on plain ``APIView`` would skip the check: every route under /api/v1/ that is ours
    (the schema and docs pages are drf-spectacular's) is an ``ApiView``."""
    from django.urls import URLPattern, URLResolver, get_resolver

    def walk(patterns, prefix=""):
        for p in patterns:
            if isinstance(p, URLResolver):
                yield from walk(p.url_patterns, prefix + str(p.pattern))
            elif isinstance(p, URLPattern):
                yield prefix + str(p.pattern), getattr(p.callback, "view_class", None)

    ours = [
        (route, view)
        for route, view in walk(get_resolver().url_patterns)
        if route.startswith("api/v1/")
        and view is not None
        and not view.__module__.startswith("drf_spectacular")
    ]
    assert len(ours) > 15
    assert [route for route, view in ours if not issubclass(view, ApiView)] == []
