"""The API tokens page at scale: the user's tokens newest first (ties by id), a keyset page at
a time, "More tokens" loading the next in place, queries not growing with the list, and the
one-time secret kept for the page that shows it."""

from __future__ import annotations

import datetime as dt
import re

import pytest
from django.utils import timezone

from agentclash_site.workspaces import views
from agentclash_site.workspaces.models import ApiToken
from tests.clients import logged_in
from tests.paging import HTMX, count_queries, follow_more, more_row

pytestmark = pytest.mark.django_db


@pytest.fixture
def small_pages(monkeypatch):
    monkeypatch.setattr(views, "TOKEN_PAGE", 3)


def make_tokens(user, count: int, *, start: int = 0, workspace=None) -> None:
    # Pairs of tokens share a creation time: ties are broken by id, newest first.
    when = timezone.now() - dt.timedelta(days=1)
    ApiToken.objects.bulk_create(
        ApiToken(
            user=user,
            workspace=workspace,
            name=f"t{i:03d}",
            digest=f"{user.pk}-{i}",
            hint=f"acl_{i:03d}",
            created_at=when + dt.timedelta(seconds=i // 2),
        )
        for i in range(start, start + count)
    )


def names(body: str) -> list[str]:
    return re.findall(r"<td><bdi>(t\d{3})</bdi></td>", body)


@pytest.mark.parametrize("htmx", [True, False], ids=["htmx", "no-javascript"])
def test_more_tokens_lists_every_token_once_newest_first(personas, small_pages, htmx):
    make_tokens(personas.owner, 8, workspace=personas.workspace)
    pages = follow_more(logged_in(personas.owner), "/account/tokens/", "token-more", names, htmx=htmx)
    assert [name for page in pages for name in page] == [f"t{i:03d}" for i in range(7, -1, -1)]
    assert [len(page) for page in pages] == [3, 3, 2]


def test_the_page_costs_the_same_queries_for_4_or_60_tokens(personas, small_pages):
    client = logged_in(personas.owner)
    make_tokens(personas.owner, 4, workspace=personas.workspace)
    more = more_row(client.get("/account/tokens/").content.decode(), "token-more")["hx-get"]
    few = count_queries(client, "/account/tokens/")
    few_rows = count_queries(client, "/account/tokens/" + more, **HTMX)
    make_tokens(personas.owner, 56, start=4, workspace=personas.workspace)
    assert count_queries(client, "/account/tokens/") == few
    body = client.get("/account/tokens/").content.decode()
    assert len(names(body)) == 3
    assert (
        count_queries(client, "/account/tokens/" + more_row(body, "token-more")["hx-get"], **HTMX) == few_rows
    )


def test_loading_more_tokens_keeps_a_new_secret_for_the_page(personas, small_pages):
    make_tokens(personas.owner, 5)
    client = logged_in(personas.owner)
    more = more_row(client.get("/account/tokens/").content.decode(), "token-more")["hx-get"]
    client.post("/account/tokens/new/", {"name": "ci"})
    assert client.get("/account/tokens/" + more, **HTMX).status_code == 200
    page = client.get("/account/tokens/").content.decode()
    assert re.search(r'<code id="new-token">acl_[^<]+</code>', page)


def test_a_cursor_that_is_not_one_of_the_pages_is_a_400_page(personas):
    make_tokens(personas.owner, 1)
    response = logged_in(personas.owner).get("/account/tokens/?after=garbage")
    assert response.status_code == 400
    body = response.content.decode()
    assert "not valid" in body and 'href="/account/tokens/"' in body and "No tokens yet" not in body


def test_an_empty_list_says_so(personas):
    body = logged_in(personas.viewer).get("/account/tokens/").content.decode()
    assert "No tokens yet." in body and "token-more" not in body


def test_another_users_tokens_never_show_whatever_the_cursor(personas, small_pages):
    # The page is the user's own: the owner's cursor shows another user none of the owner's tokens.
    make_tokens(personas.owner, 5, workspace=personas.workspace)
    link = more_row(logged_in(personas.owner).get("/account/tokens/").content.decode(), "token-more")
    outsider = logged_in(personas.outsider)
    for url in ("/account/tokens/" + link["href"], "/account/tokens/" + link["hx-get"]):
        response = outsider.get(url, **HTMX)
        assert response.status_code == 200 and names(response.content.decode()) == []
    token = ApiToken.objects.get(name="t000")
    assert outsider.post(f"/account/tokens/{token.public_id}/revoke/").status_code == 404
    token.refresh_from_db()
    assert token.revoked_at is None
