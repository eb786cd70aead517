"""The packs page at scale: packs (by slug) and drafts (most recently edited first) are two
keyset-paged tables, its query count does not grow with either, and a pack's row shows its
newest versions only."""

from __future__ import annotations

import datetime as dt
import re

import pytest
from django.utils import timezone

import packs.views
from packs.models import Draft, Pack, PackVersion
from tests.clients import logged_in
from tests.paging import HTMX, count_queries, follow_more, more_row

pytestmark = pytest.mark.django_db


@pytest.fixture
def small_pages(monkeypatch):
    monkeypatch.setattr(packs.views, "PACK_PAGE", 3)
    monkeypatch.setattr(packs.views, "DRAFT_PAGE", 3)


def make_packs(workspace, slugs, *, versions: int = 1) -> None:
    for slug in slugs:
        pack = Pack.objects.create(workspace=workspace, slug=slug, name=f"Pack {slug}", family="reasoning")
        for n in range(1, versions + 1):
            PackVersion.objects.create(pack=pack, number=n, manifest={}, source=b"", content_hash=f"{n:064d}")


def make_drafts(workspace, count: int, *, start: int = 0) -> None:
    # Pairs of drafts share an edit time: ties are broken by id, newest first.
    when = timezone.now()
    Draft.objects.bulk_create(
        Draft(workspace=workspace, name=f"draft-{i:03d}", updated_at=when + dt.timedelta(seconds=i // 2))
        for i in range(start, start + count)
    )


def pack_names(body: str) -> list[str]:
    return re.findall(r'href="/packs/[0-9a-f-]{36}/"[^>]*><strong><bdi>Pack ([^<]+)</bdi>', body)


def draft_names(body: str) -> list[str]:
    return re.findall(r'href="/packs/drafts/[0-9a-f-]{36}/"[^>]*>(?:<bdi>)?(draft-\d+)', body)


@pytest.mark.parametrize("htmx", [True, False], ids=["htmx", "no-javascript"])
def test_more_packs_lists_every_pack_once_by_slug(personas, small_pages, htmx):
    slugs = ["kiwi", "apple", "mango", "fig", "banana", "cherry", "date"]
    make_packs(personas.workspace, slugs)
    pages = follow_more(logged_in(personas.viewer), "/packs/", "pack-more", pack_names, htmx=htmx)
    assert pages == [["apple", "banana", "cherry"], ["date", "fig", "kiwi"], ["mango"]]


@pytest.mark.parametrize("htmx", [True, False], ids=["htmx", "no-javascript"])
def test_more_drafts_lists_every_draft_once_newest_first(personas, small_pages, htmx):
    make_drafts(personas.workspace, 8)
    pages = follow_more(logged_in(personas.viewer), "/packs/", "draft-more", draft_names, htmx=htmx)
    assert [name for page in pages for name in page] == [f"draft-{i:03d}" for i in range(7, -1, -1)]
    assert [len(page) for page in pages] == [3, 3, 2]


def test_each_tables_link_keeps_the_other_tables_place(personas, small_pages):
    make_packs(personas.workspace, [f"p{i}" for i in range(5)])
    make_drafts(personas.workspace, 5)
    client = logged_in(personas.viewer)
    first = client.get("/packs/").content.decode()
    drafts_link = more_row(first, "draft-more")["href"]
    second = client.get("/packs/" + drafts_link).content.decode()
    assert pack_names(second) == ["p0", "p1", "p2"] and draft_names(second) == ["draft-001", "draft-000"]
    # the packs link of that page keeps the drafts' cursor, and the other way round
    packs_link = more_row(second, "pack-more")["href"]
    assert "drafts_after=" in packs_link
    third = client.get("/packs/" + packs_link).content.decode()
    assert pack_names(third) == ["p3", "p4"] and draft_names(third) == ["draft-001", "draft-000"]


def test_the_page_costs_the_same_queries_for_5_or_60_packs_and_drafts(personas, small_pages):
    client = logged_in(personas.viewer)
    make_packs(personas.workspace, [f"a{i:02d}" for i in range(5)], versions=2)
    make_drafts(personas.workspace, 5)
    more = more_row(client.get("/packs/").content.decode(), "pack-more")["hx-get"]  # the session settles
    few = count_queries(client, "/packs/")
    few_rows = count_queries(client, "/packs/" + more, **HTMX)
    make_packs(personas.workspace, [f"b{i:02d}" for i in range(55)], versions=3)
    make_drafts(personas.workspace, 55, start=5)
    assert count_queries(client, "/packs/") == few
    body = client.get("/packs/").content.decode()
    assert len(pack_names(body)) == 3 and len(draft_names(body)) == 3
    assert count_queries(client, "/packs/" + more_row(body, "pack-more")["hx-get"], **HTMX) == few_rows


def test_a_packs_row_shows_its_newest_versions_and_links_them_all(personas, monkeypatch):
    monkeypatch.setattr(packs.views, "VERSIONS_SHOWN", 4)
    make_packs(personas.workspace, ["many"], versions=6)
    make_packs(personas.workspace, ["few"], versions=4)
    body = logged_in(personas.viewer).get("/packs/").content.decode()
    many = body[body.index("Pack many") :]
    few = body[body.index("Pack few") : body.index("Pack many")]
    assert re.findall(r">v(\d+)</a>", many) == ["6", "5", "4", "3"]
    assert "all 6 versions" in many
    assert re.findall(r">v(\d+)</a>", few) == ["4", "3", "2", "1"] and "all 4 versions" not in few


def test_the_api_still_lists_every_version_of_a_pack(personas, monkeypatch):
    monkeypatch.setattr(packs.views, "VERSIONS_SHOWN", 2)
    make_packs(personas.workspace, ["many"], versions=5)
    results = personas.api(personas.viewer).get("/api/v1/workspaces/acme/packs").json()["results"]
    assert [v["number"] for v in results[0]["versions"]] == [5, 4, 3, 2, 1]


def test_a_cursor_that_is_not_one_of_the_pages_is_a_400_page(personas):
    make_packs(personas.workspace, ["apple"])
    client = logged_in(personas.viewer)
    for param in ("after", "drafts_after"):
        response = client.get(f"/packs/?{param}=garbage")
        assert response.status_code == 400
        body = response.content.decode()
        assert "not valid" in body and 'href="/packs/"' in body


def test_empty_tables_say_so(personas):
    body = logged_in(personas.editor).get("/packs/").content.decode()
    assert "No published packs yet: start a new pack above" in body and "No drafts." in body
    assert "pack-more" not in body and "draft-more" not in body


def test_an_outsider_never_sees_the_workspaces_packs_or_drafts_whatever_the_cursor(personas, small_pages):
    make_packs(personas.workspace, [f"acme-{i}" for i in range(5)])
    make_drafts(personas.workspace, 5)
    member = logged_in(personas.viewer).get("/packs/").content.decode()
    outsider = logged_in(personas.outsider)
    for link in (more_row(member, "pack-more"), more_row(member, "draft-more")):
        for url in ("/packs/" + link["href"], "/packs/" + link["hx-get"]):
            body = outsider.get(url, **HTMX).content.decode()
            assert "acme-" not in body and "draft-" not in body
    # and an object of the workspace is 404 to them
    pack = Pack.objects.get(slug="acme-0")
    assert outsider.get(f"/packs/{pack.public_id}/").status_code == 404
    draft = Draft.objects.filter(workspace=personas.workspace).first()
    assert outsider.get(f"/packs/drafts/{draft.public_id}/").status_code == 404
