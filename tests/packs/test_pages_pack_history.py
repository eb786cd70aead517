"""A pack's page at scale: its history is a keyset page of versions, newest first, with an
"Older versions" row, and the compare form takes two typed version numbers instead of two
selects listing every version; the page's size and queries do not grow with the history."""

from __future__ import annotations

import html
import re

import pytest

import packs.views
from packs.models import PackVersion
from tests.clients import logged_in
from tests.paging import HTMX, count_queries, follow_more, more_row
from tests.workspace_rows import bulk_packs

pytestmark = pytest.mark.django_db


@pytest.fixture
def short_pages(monkeypatch):
    monkeypatch.setattr(packs.views, "VERSION_PAGE", 3)


def numbers(body: str) -> list[str]:
    return re.findall(r'href="/packs/versions/[0-9a-f-]{36}/"[^>]*>v(\d+)</a>', body)


def diffs(body: str) -> list[str]:
    return re.findall(r'diff/\?to=(\d+)">diff with previous', body)


@pytest.mark.parametrize("htmx", [True, False], ids=["htmx", "no-javascript"])
def test_older_versions_lists_every_version_once_newest_first(personas, short_pages, htmx):
    pack = bulk_packs(personas.workspace, ["alpha"], versions=7)[0]
    url = f"/packs/{pack.public_id}/"
    client = logged_in(personas.viewer)
    pages = follow_more(client, url, "version-more", numbers, htmx=htmx)
    assert pages == [["7", "6", "5"], ["4", "3", "2"], ["1"]]
    # every version but the oldest diffs with its previous one, the last of a page too
    seen = follow_more(client, url, "version-more", diffs, htmx=htmx)
    assert seen == [["7", "6", "5"], ["4", "3", "2"], []]


def test_the_page_costs_the_same_queries_and_size_for_4_or_60_versions(personas, short_pages):
    client = logged_in(personas.viewer)
    small = bulk_packs(personas.workspace, ["alpha"], versions=4)[0]
    large = bulk_packs(personas.workspace, ["omega"], versions=60)[0]
    client.get("/packs/")  # the first request stores the workspace in the session
    few, many = (f"/packs/{p.public_id}/" for p in (small, large))
    assert count_queries(client, few) == count_queries(client, many)
    body = client.get(many).content.decode()
    assert numbers(body) == ["60", "59", "58"] and "<option" not in body
    assert 'name="from" min="1" step="1" inputmode="numeric" value="59"' in body
    assert 'name="to" min="1" step="1" inputmode="numeric" value="60"' in body
    rows = more_row(body, "version-more")["hx-get"]
    assert count_queries(client, few + rows, **HTMX) == count_queries(client, many + rows, **HTMX)
    assert abs(len(body) - len(client.get(few).content.decode())) < 200  # names and numbers


def test_a_cursor_that_is_not_one_of_the_pages_is_a_400_page(personas):
    pack = bulk_packs(personas.workspace, ["alpha"], versions=2)[0]
    response = logged_in(personas.viewer).get(f"/packs/{pack.public_id}/?after=garbage")
    assert response.status_code == 400 and "not valid" in response.content.decode()


def test_an_outsider_gets_404_whatever_the_cursor(personas, short_pages):
    pack = bulk_packs(personas.workspace, ["alpha"], versions=5)[0]
    url = f"/packs/{pack.public_id}/"
    link = more_row(logged_in(personas.viewer).get(url).content.decode(), "version-more")
    outsider = logged_in(personas.outsider)
    for path in (url, url + link["href"], url + link["hx-get"]):
        assert outsider.get(path, **HTMX).status_code == 404
    assert outsider.get(f"/packs/{pack.public_id}/diff/?from=1&to=2").status_code == 404


def test_the_diff_page_types_its_numbers_and_names_the_one_the_pack_lacks(personas):
    pack = bulk_packs(personas.workspace, ["alpha"], versions=40)[0]
    PackVersion.objects.filter(pack=pack, number=20).delete()
    client = logged_in(personas.viewer)
    client.get("/packs/")
    url = f"/packs/{pack.public_id}/diff/"
    body = client.get(url).content.decode()
    assert "<option" not in body and 'value="39"' in body and 'value="40"' in body
    small = bulk_packs(personas.workspace, ["beta"], versions=2)[0]
    assert count_queries(client, url + "?to=21") == count_queries(
        client, f"/packs/{small.public_id}/diff/?to=2"
    )
    assert re.search(
        r'name="from" type="number" [^>]*value="19"', client.get(url + "?to=21").content.decode()
    )
    missing = client.get(url + "?from=20&to=40")
    text = html.unescape(missing.content.decode())
    assert missing.status_code == 404
    assert "from: alpha has no version 20; its newest is v40." in text
    assert re.search(r'name="from" aria-invalid="true" aria-describedby="diff-error" [^>]*value="20"', text)


def test_the_diff_page_links_to_the_packs_history_besides_the_breadcrumb(personas):
    pack = bulk_packs(personas.workspace, ["alpha"], versions=2)[0]
    client = logged_in(personas.viewer)
    history = f'<a class="button" href="/packs/{pack.public_id}/">History</a>'
    assert history in client.get(f"/packs/{pack.public_id}/diff/?from=1&to=2").content.decode()
    # also when the numbers are wrong: the way back to the list of versions that exist
    assert history in client.get(f"/packs/{pack.public_id}/diff/?from=7&to=2").content.decode()
