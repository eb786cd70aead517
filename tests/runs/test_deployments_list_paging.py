"""The deployments page at scale: a keyset page of deployments by name at a time, "More
deployments" loads the next in place, and the query count does not grow with the list."""

from __future__ import annotations

import re

import pytest

import runs.views.deployments
from runs.models import Deployment
from tests.clients import logged_in
from tests.paging import HTMX, count_queries, follow_more, more_row

pytestmark = pytest.mark.django_db


@pytest.fixture
def small_pages(monkeypatch):
    monkeypatch.setattr(runs.views.deployments, "DEPLOYMENT_PAGE", 3)


def make_deployments(workspace, names) -> None:
    Deployment.objects.bulk_create(
        Deployment(workspace=workspace, name=n, kind="trace_import") for n in names
    )


def names(body: str) -> list[str]:
    return re.findall(r'href="/deployments/[0-9a-f-]{36}/"[^>]*><bdi>([^<]+)</bdi>', body)


@pytest.mark.parametrize("htmx", [True, False], ids=["htmx", "no-javascript"])
def test_more_deployments_lists_every_deployment_once_by_name(personas, small_pages, htmx):
    make_deployments(personas.workspace, ["kiwi", "apple", "mango", "fig", "banana", "cherry", "date"])
    pages = follow_more(logged_in(personas.viewer), "/deployments/", "deployment-more", names, htmx=htmx)
    assert pages == [["apple", "banana", "cherry"], ["date", "fig", "kiwi"], ["mango"]]


def test_the_page_costs_the_same_queries_for_4_or_60_deployments(personas, small_pages):
    client = logged_in(personas.viewer)
    make_deployments(personas.workspace, [f"a{i:02d}" for i in range(4)])
    more = more_row(client.get("/deployments/").content.decode(), "deployment-more")["hx-get"]
    few, few_rows = (
        count_queries(client, "/deployments/"),
        count_queries(client, "/deployments/" + more, **HTMX),
    )
    make_deployments(personas.workspace, [f"b{i:02d}" for i in range(56)])
    assert count_queries(client, "/deployments/") == few
    body = client.get("/deployments/").content.decode()
    assert len(names(body)) == 3
    assert (
        count_queries(client, "/deployments/" + more_row(body, "deployment-more")["hx-get"], **HTMX)
        == few_rows
    )


def test_a_cursor_that_is_not_one_of_the_pages_is_a_400_page(personas):
    make_deployments(personas.workspace, ["apple"])
    response = logged_in(personas.viewer).get("/deployments/?after=garbage")
    assert response.status_code == 400
    body = response.content.decode()
    assert "not valid" in body and 'href="/deployments/"' in body and "No deployments yet" not in body


def test_an_outsider_never_sees_the_workspaces_deployments_whatever_the_cursor(personas, small_pages):
    make_deployments(personas.workspace, [f"acme-{i}" for i in range(5)])
    link = more_row(logged_in(personas.viewer).get("/deployments/").content.decode(), "deployment-more")
    outsider = logged_in(personas.outsider)
    for url in ("/deployments/" + link["href"], "/deployments/" + link["hx-get"]):
        response = outsider.get(url, **HTMX)
        assert response.status_code == 200 and "acme-" not in response.content.decode()
    deployment = Deployment.objects.get(name="acme-0")
    assert outsider.get(f"/deployments/{deployment.public_id}/").status_code == 404


def test_an_empty_list_tells_a_viewer_who_adds_deployments(personas):
    # The viewer was told to add an endpoint, with a form only editors and owners get.
    editor = logged_in(personas.editor).get("/deployments/").content.decode()
    assert "No deployments yet" in editor and "Add your agent's endpoint" in editor
    viewer = logged_in(personas.viewer).get("/deployments/").content.decode()
    assert "No deployments yet" in viewer and "An owner or editor of this workspace adds them" in viewer
    assert "Add your agent" not in viewer and "deployment create" not in viewer
