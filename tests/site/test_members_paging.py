"""The Members page at scale: owners first, then editors and viewers, each by username, a
keyset page at a time; "More members" loads the next in place; queries do not grow with the
list; and outsiders get 404 on every page of it."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model

from agentclash_site.workspaces import views
from agentclash_site.workspaces.models import Membership, Role
from tests.clients import logged_in
from tests.paging import HTMX, count_queries, follow_more, more_row

pytestmark = pytest.mark.django_db

PAGE = "/workspaces/acme/members/"


@pytest.fixture
def small_pages(monkeypatch):
    monkeypatch.setattr(views, "MEMBER_PAGE", 3)


def add_members(workspace, names_and_roles) -> None:
    User = get_user_model()
    users = User.objects.bulk_create(User(username=name) for name, _ in names_and_roles)
    Membership.objects.bulk_create(
        Membership(workspace=workspace, user=user, role=role)
        for user, (_, role) in zip(users, names_and_roles, strict=True)
    )


def names(body: str) -> list[str]:
    return re.findall(r'<tr data-member="([^"]+)">', body)


@pytest.mark.parametrize("htmx", [True, False], ids=["htmx", "no-javascript"])
def test_more_members_lists_everyone_once_owners_first_then_by_username(personas, small_pages, htmx):
    # personas: olive owner, eddie editor, vera viewer
    add_members(
        personas.workspace,
        [
            ("zed", Role.OWNER),
            ("adam", Role.VIEWER),
            ("bea", Role.EDITOR),
            ("abe", Role.OWNER),
            ("yan", Role.EDITOR),
        ],
    )
    pages = follow_more(logged_in(personas.owner), PAGE, "member-more", names, htmx=htmx)
    assert pages == [["abe", "olive", "zed"], ["bea", "eddie", "yan"], ["adam", "vera"]]


def test_rows_of_every_batch_have_their_own_ids(personas, small_pages):
    # The role selects were numbered per batch (role-1, role-2, ...): the second batch's
    # labels pointed at the first batch's selects.
    add_members(personas.workspace, [(f"m{i}", Role.VIEWER) for i in range(4)])
    client = logged_in(personas.owner)
    first = client.get(PAGE).content.decode()
    second = client.get(PAGE + more_row(first, "member-more")["hx-get"], **HTMX).content.decode()
    ids = re.findall(r'<select id="([^"]+)"', first + second)
    assert len(ids) == 6 and len(set(ids)) == 6
    assert sorted(re.findall(r'<label for="(role-[^"]+)"', first + second)) == sorted(ids)


@pytest.mark.parametrize("who", ["owner", "viewer"])
def test_the_page_costs_the_same_queries_for_5_or_60_members(personas, small_pages, who):
    client = logged_in(getattr(personas, who))
    add_members(personas.workspace, [("x-few", Role.VIEWER), ("x-few2", Role.EDITOR)])
    more = more_row(client.get(PAGE).content.decode(), "member-more")["hx-get"]
    few, few_rows = count_queries(client, PAGE), count_queries(client, PAGE + more, **HTMX)
    add_members(personas.workspace, [(f"x{i:02d}", Role.VIEWER) for i in range(55)])
    assert count_queries(client, PAGE) == few
    body = client.get(PAGE).content.decode()
    assert len(names(body)) == 3
    assert count_queries(client, PAGE + more_row(body, "member-more")["hx-get"], **HTMX) == few_rows


def test_the_sole_owner_note_counts_every_owner_not_only_the_page(personas, monkeypatch):
    # Counted from the rows shown, the note told olive she was the only owner while the
    # other owner waited on the next page.
    monkeypatch.setattr(views, "MEMBER_PAGE", 1)
    add_members(personas.workspace, [("zed", Role.OWNER)])
    body = logged_in(personas.owner).get(PAGE).content.decode()
    assert names(body) == ["olive"] and "You are its only owner" not in body
    Membership.objects.filter(user__username="zed").update(role=Role.VIEWER)
    assert "You are its only owner" in logged_in(personas.owner).get(PAGE).content.decode()


def test_a_cursor_that_is_not_one_of_the_pages_is_a_400_page(personas):
    response = logged_in(personas.viewer).get(PAGE + "?after=garbage")
    assert response.status_code == 400
    assert "not valid" in response.content.decode()


def test_an_outsider_gets_404_on_every_page_of_the_list(personas, small_pages):
    add_members(personas.workspace, [(f"m{i}", Role.VIEWER) for i in range(4)])
    link = more_row(logged_in(personas.owner).get(PAGE).content.decode(), "member-more")
    outsider = logged_in(personas.outsider)
    for url in (PAGE + link["href"], PAGE + link["hx-get"]):
        response = outsider.get(url, **HTMX)
        assert response.status_code == 404 and not re.search(r"\bm0\b", response.content.decode())
