"""The type-ahead suggestions (agentclash_site/lib/suggest.py) seen by an attacker: names
holding markup, quotes and bidi controls come back escaped and isolated; LIKE's wildcards in
the typed text match themselves; text longer than any name costs no query; and what an
outsider or a viewer types reaches no other workspace's names and no write path."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from agentclash_site.lib.suggest import MAX_TYPED
from tests.clients import logged_in
from tests.paging import HTMX
from tests.workspace_rows import bulk_deployments

pytestmark = pytest.mark.django_db

HOSTILE = "x\"'><img src=x>\u202eevil"
ROUTES = (
    ("/runs/?partial=deployment_suggestions&deployment=", "owner"),
    ("/runs/new/?partial=deployment_suggestions&deployment_names=", "owner"),
)


@pytest.mark.parametrize("route,who", ROUTES)
def test_a_name_with_markup_quotes_and_bidi_controls_comes_back_escaped(personas, route, who):
    bulk_deployments(personas.workspace, [HOSTILE])
    client = logged_in(getattr(personas, who))
    body = client.get(route + "x%22", **HTMX).content.decode()
    assert "<img" not in body and "x\"'" not in body
    value = "x&quot;&#x27;&gt;&lt;img src=x&gt;\u202eevil"
    assert f'data-suggest-value="{value}"><bdi>{value}</bdi>' in body
    # the status line quotes what was typed with Python's repr: a bidi control is spelled out
    bidi = client.get(route + "%E2%80%AE", **HTMX).content.decode()
    assert "\u202e" not in bidi.split('hx-swap-oob="innerHTML">')[1]
    assert "\\u202e" in bidi


@pytest.mark.parametrize("route,who", ROUTES)
def test_like_wildcards_in_the_typed_text_match_only_themselves(personas, route, who):
    bulk_deployments(personas.workspace, ["alpha", "beta", "50%_off"])
    client = logged_in(getattr(personas, who))
    for typed, expected in (("%25", ["50%_off"]), ("_", ["50%_off"]), ("a%25a", []), ("%5C", [])):
        body = client.get(route + typed, **HTMX).content.decode()
        found = [v for v in ("alpha", "beta", "50%_off") if f'data-suggest-value="{v}"' in body]
        assert found == expected, typed


@pytest.mark.parametrize("route,who", ROUTES)
def test_text_longer_than_any_name_is_not_looked_up_and_not_echoed_whole(personas, route, who):
    client = logged_in(getattr(personas, who))
    client.get(route + "a", **HTMX)  # the session's workspace and membership are read once
    typed = "a" * (MAX_TYPED + 1)
    with CaptureQueriesContext(connection) as queries:
        body = client.get(route + typed, **HTMX).content.decode()
    assert not any("icontains" in q["sql"] or "LIKE" in q["sql"].upper() for q in queries.captured_queries)
    assert typed not in body and "a" * 41 not in body


def test_an_outsider_and_a_viewer_reach_nothing_of_the_workspace_through_the_suggestions(personas):
    bulk_deployments(personas.workspace, ["secret-agent"])
    outsider = logged_in(personas.outsider)
    for route, _who in ROUTES:
        response = outsider.get(route + "secret", **HTMX)
        assert response.status_code in (200, 403) and b"secret-agent" not in response.content
        assert b"1 deployment" not in response.content  # no count of the workspace's rows either
    viewer = logged_in(personas.viewer)
    assert b"secret-agent" in viewer.get(ROUTES[0][0] + "secret", **HTMX).content  # may filter runs
    assert viewer.get(ROUTES[1][0] + "secret", **HTMX).status_code == 403  # may not start one


def test_a_typed_name_with_markup_and_bidi_controls_is_escaped_in_its_fields_error(personas):
    """The field keeps what was typed (escaped, in its value); its error quotes it with repr,
    which spells a bidi control out, so the sentence around it is not reordered."""
    typed = "<b>x</b>\u202e'\""
    page = logged_in(personas.owner).post("/runs/new/", {"pack": typed, "deployment_names": typed})
    body = page.content.decode()
    assert page.status_code == 400 and "<b>x</b>" not in body
    errors = re.findall(r"No (?:pack|deployment) named [^\n]*", body)
    assert len(errors) == 2 and all("&lt;b&gt;x&lt;/b&gt;\\u202e" in e and "\u202e" not in e for e in errors)
    listed = logged_in(personas.viewer).get("/runs/", {"pack": typed, "deployment": typed}).content.decode()
    errors = re.findall(r"no (?:pack|deployment) named [^\n]*", listed)
    assert "<b>x</b>" not in listed and len(errors) == 2
    assert all("&lt;b&gt;x&lt;/b&gt;\\u202e" in e and "\u202e" not in e for e in errors)
