"""``GET /api/v1/workspaces/{ws}/runs`` pages like the case list: ``limit``, an ``after`` cursor,
``next``; newest first, ties broken by id. It used to answer the newest ``limit`` (at most 500)
runs with no ``next`` and ignore ``after``."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from agentclash_site.lib.pagination import InvalidCursor, encode_cursor, keyset_page
from runs.models import Run
from runs.services.deployments import deployment_create
from tests.runs.runfactory import create_run, publish

pytestmark = pytest.mark.django_db
URL = "/api/v1/workspaces/acme/runs"
SOME_ID = "6f1c2b9e-5d0a-4c2e-8f3b-2a7d9e4c1b00"


@pytest.fixture
def runs(personas):
    """Seven runs; three of them created at the same instant (the id breaks the tie)."""
    version = publish(personas.workspace, cases=1)
    dep = deployment_create(workspace=personas.workspace, name="ci", kind="trace_import").deployment
    made = [create_run(personas.workspace, version, [dep], name=f"r{i}") for i in range(7)]
    start = timezone.now() - dt.timedelta(days=1)
    for i, run in enumerate(made):
        moment = start + dt.timedelta(minutes=min(i, 3))  # r3, r4, r5 and r6 share one
        Run.objects.filter(pk=run.pk).update(created_at=moment)
    newest_first = sorted(
        Run.objects.filter(workspace=personas.workspace), key=lambda r: (r.created_at, r.pk.hex), reverse=True
    )
    return [str(r.pk) for r in newest_first]


def test_pages_visit_every_run_once_newest_first(personas, runs):
    api = personas.api(personas.viewer)
    seen, after, pages = [], None, 0
    while True:
        params = {"limit": 2, **({"after": after} if after else {})}
        body = api.get(URL, params).json()
        assert len(body["results"]) <= 2
        seen += [r["id"] for r in body["results"]]
        pages += 1
        after = body["next"]
        if after is None:
            break
    assert seen == runs and pages == 4
    first = api.get(URL, {"limit": 1}).json()
    assert isinstance(first["next"], str) and [r["id"] for r in first["results"]] == runs[:1]
    entry = first["results"][0]
    assert set(entry) == {"id", "status", "pack", "input_set", "url", "name", "created_at", "repetitions"}
    everything = api.get(URL).json()
    assert [r["id"] for r in everything["results"]] == runs and everything["next"] is None


def test_one_page_is_one_query_of_runs(personas, runs, django_assert_num_queries):
    api = personas.api(personas.viewer)
    api.get(URL, {"limit": 2})  # warm: the token's last-used stamp
    # the token, the workspace with the membership, the page (pack version, pack, input set joined)
    with django_assert_num_queries(3):
        assert api.get(URL, {"limit": 2}).status_code == 200


@pytest.mark.parametrize(
    "after",
    [
        "abc",
        "%%%",
        encode_cursor("id", [5]),  # another list's order
        encode_cursor("-created_at", ["yesterday", SOME_ID]),
        encode_cursor("-created_at", [{"dt": "garbage"}, SOME_ID]),
        encode_cursor("-created_at", [{"dt": "2024-01-01T00:00:00"}, SOME_ID]),  # naive
        encode_cursor("-created_at", [5, SOME_ID]),
        encode_cursor("-created_at", [{"dt": "2024-01-01T00:00:00+00:00"}, "not-an-id"]),
        encode_cursor("-created_at", [{"dt": "2024-01-01T00:00:00+00:00"}]),
    ],
    ids=[
        "text",
        "not-base64",
        "other-sort",
        "text-time",
        "bad-time",
        "naive-time",
        "number-time",
        "bad-id",
        "short",
    ],
)
def test_a_bad_cursor_is_a_400_naming_after(personas, runs, after):
    response = personas.api(personas.viewer).get(URL, {"after": after})
    assert response.status_code == 400, response.content[:300]
    error = response.json()["error"]
    assert (error["code"], error["field"]) == ("invalid_cursor", "after")
    assert error["message"].startswith("after must be the `next` value of a previous page")


@pytest.mark.parametrize("limit", ["0", "501", "abc", "-1", "1.5"])
def test_a_bad_limit_is_a_400_naming_limit(personas, limit):
    response = personas.api(personas.viewer).get(URL, {"limit": limit})
    assert response.status_code == 400
    error = response.json()["error"]
    assert (error["code"], error["field"]) == ("invalid_limit", "limit")


def test_outsiders_get_404_and_see_no_cursor_of_ours(personas, runs):
    first = personas.api(personas.viewer).get(URL, {"limit": 1}).json()
    outsider = personas.api(personas.outsider)
    assert outsider.get(URL).status_code == 404
    assert outsider.get(URL, {"after": first["next"]}).status_code == 404
    # their own workspace's list is empty whatever cursor they send
    mine = outsider.get("/api/v1/workspaces/globex/runs", {"after": first["next"]})
    assert mine.status_code == 200 and mine.json() == {"results": [], "next": None}


def test_the_schema_documents_the_cursor(personas):
    schema = personas.api(personas.viewer).get("/api/v1/schema/?format=json").json()
    operation = schema["paths"]["/api/v1/workspaces/{ws}/runs"]["get"]
    assert {p["name"] for p in operation["parameters"] if p["in"] == "query"} == {"after", "limit"}
    ref = operation["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]
    body = schema["components"]["schemas"][ref.rsplit("/", 1)[1]]
    assert set(body["properties"]) == {"results", "next"}
    assert body["properties"]["next"]["nullable"] is True


def test_keyset_page_refuses_a_cursor_value_its_field_cannot_hold(personas, runs):
    """The same check serves the run list page of the UI (``runs.views.runs.run_list``)."""
    qs = Run.objects.all()
    with pytest.raises(InvalidCursor):
        keyset_page(qs, sort="-created_at", after=encode_cursor("-created_at", ["x", runs[0]]))
    page = keyset_page(qs, sort="-created_at", size=3)
    assert [str(r.pk) for r in keyset_page(qs, sort="-created_at", after=page.next_cursor).items] == runs[3:]
