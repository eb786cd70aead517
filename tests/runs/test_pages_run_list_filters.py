"""The run list's pack and deployment filters at scale: text fields with type-ahead
suggestions instead of selects listing every slug and name, so the page's size and queries do
not grow with the workspace; a name the workspace does not have is said next to its field."""

from __future__ import annotations

import html
import re

import pytest

import agentclash_site.lib.suggest
from tests.clients import logged_in
from tests.paging import HTMX, count_queries
from tests.workspace_rows import bulk_deployments, bulk_packs

pytestmark = pytest.mark.django_db


def suggested(body: str) -> list[str]:
    return re.findall(r'data-suggest-value="([^"]*)"', body)


def filter_form(body: str) -> str:
    return re.search(
        r'<form method="get" class="row-form panel" aria-label="Filter runs"[^>]*>.*?</form>', body, re.S
    ).group(0)


def test_the_filters_are_text_fields_whose_size_does_not_grow_with_the_workspace(personas):
    viewer = logged_in(personas.viewer)
    bulk_packs(personas.workspace, ["alpha"])
    bulk_deployments(personas.workspace, ["d-1"])
    viewer.get("/runs/")  # the first request stores the workspace in the session
    small, small_queries = (
        viewer.get("/runs/?pack=alpha").content.decode(),
        count_queries(viewer, "/runs/?pack=alpha"),
    )
    bulk_packs(personas.workspace, [f"p{i:03d}" for i in range(80)])
    bulk_deployments(personas.workspace, [f"x{i:03d}" for i in range(80)])
    large = viewer.get("/runs/?pack=alpha").content.decode()
    assert count_queries(viewer, "/runs/?pack=alpha") == small_queries
    assert len(large) == len(small)
    form = filter_form(large)
    assert form.count("<option") == 8  # All + the seven statuses; no slug, no name
    assert (
        'name="pack" type="text" value="alpha"' in form and 'name="deployment" type="text" value=""' in form
    )


def test_the_suggestions_are_a_few_of_this_workspaces_names(personas, monkeypatch):
    monkeypatch.setattr(agentclash_site.lib.suggest, "SUGGESTIONS", 3)
    bulk_packs(personas.workspace, ["alpha", "alpine", "beta-al", "alto", "zeta"])
    bulk_deployments(personas.workspace, ["al-1", "bob"])
    bulk_packs(personas.other_workspace, ["al-theirs"])
    viewer = logged_in(personas.viewer)
    packs = viewer.get("/runs/?partial=pack_suggestions&pack=al", **HTMX).content.decode()
    assert suggested(packs) == ["alpha", "alpine", "alto"] and "<html" not in packs
    assert "The first 3 packs matching 'al'" in html.unescape(packs)
    deployments = viewer.get("/runs/?partial=deployment_suggestions&deployment=AL", **HTMX).content.decode()
    assert suggested(deployments) == ["al-1"]
    outsider = logged_in(personas.outsider)
    theirs = outsider.get("/runs/?partial=pack_suggestions&pack=al", **HTMX).content.decode()
    assert suggested(theirs) == ["al-theirs"]
    none = outsider.get("/runs/?partial=deployment_suggestions&deployment=al", **HTMX).content.decode()
    assert suggested(none) == [] and "No deployment matches 'al'." in html.unescape(none)


def test_a_filter_naming_nothing_in_the_workspace_says_so_next_to_its_field(personas):
    bulk_packs(personas.workspace, ["alpha"])
    bulk_packs(personas.other_workspace, ["theirs"])
    body = logged_in(personas.viewer).get("/runs/?pack=theirs&deployment=nobody").content.decode()
    text = html.unescape(body)
    assert "Pack: no pack named 'theirs' in this workspace. Type part of its slug" in text
    assert "Deployment: no deployment named 'nobody' in this workspace." in text
    assert 'aria-describedby="r-pack-suggestions-status r-pack-error" aria-invalid="true"' in body
    assert "No runs match these filters" in body
    assert "Pack: no pack named" not in logged_in(personas.viewer).get("/runs/?pack=alpha").content.decode()
