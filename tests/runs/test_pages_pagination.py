"""Keyset pagination (agentclash_site.lib.pagination): every row exactly once, in order,
NULL sort values last, no OFFSET in the SQL, and a clear error for a foreign cursor."""

from __future__ import annotations

import datetime as dt

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test.utils import CaptureQueriesContext

from agentclash_site.lib.pagination import InvalidCursor, decode_cursor, encode_cursor, keyset_page

pytestmark = pytest.mark.django_db

BASE = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


@pytest.fixture
def users():
    User = get_user_model()
    rows = []
    for i in range(23):
        # Several users share a last_login (ties broken by id); every fourth has none.
        last = None if i % 4 == 0 else BASE + dt.timedelta(hours=i % 5)
        rows.append(User(username=f"u{i:02d}", last_login=last))
    User.objects.bulk_create(rows)
    return User.objects.filter(username__startswith="u")


def walk(qs, sort, size, nullable=False):
    seen, cursor, pages = [], None, 0
    while True:
        page = keyset_page(qs, sort=sort, after=cursor, size=size, nullable=nullable)
        seen.extend(page.items)
        pages += 1
        assert pages < 100
        if not page.has_next:
            return seen, pages
        cursor = page.next_cursor


@pytest.mark.parametrize("size", [1, 4, 7, 23, 50])
def test_paging_by_id_visits_every_row_once_in_order(users, size):
    seen, pages = walk(users, "id", size)
    assert [u.id for u in seen] == sorted(users.values_list("id", flat=True))
    assert pages == max(1, -(-23 // size))


@pytest.mark.parametrize("sort", ["last_login", "-last_login"])
@pytest.mark.parametrize("size", [1, 3, 5, 6, 22])
def test_a_nullable_sort_key_puts_nulls_last_and_breaks_ties_by_id(users, sort, size):
    seen, _ = walk(users, sort, size, nullable=True)
    descending = sort.startswith("-")
    with_value = sorted(
        (u for u in users if u.last_login is not None),
        key=lambda u: (u.last_login, u.id),
        reverse=descending,
    )
    nulls = sorted((u for u in users if u.last_login is None), key=lambda u: u.id, reverse=descending)
    assert [u.id for u in seen] == [u.id for u in with_value + nulls]


def test_values_rows_page_too(users):
    qs = users.values("id", "username")
    seen, _ = walk(qs, "-id", 5)
    assert [r["id"] for r in seen] == sorted(users.values_list("id", flat=True), reverse=True)


def test_the_seek_uses_no_offset(users):
    first = keyset_page(users, sort="last_login", size=3, nullable=True)
    with CaptureQueriesContext(connection) as ctx:
        keyset_page(users, sort="last_login", after=first.next_cursor, size=3, nullable=True)
    assert ctx.captured_queries
    assert all("OFFSET" not in q["sql"].upper() for q in ctx.captured_queries)


def test_a_cursor_of_another_sort_or_garbage_is_refused(users):
    page = keyset_page(users, sort="id", size=2)
    with pytest.raises(InvalidCursor, match="another sort order"):
        keyset_page(users, sort="-last_login", after=page.next_cursor, nullable=True)
    with pytest.raises(InvalidCursor):
        keyset_page(users, sort="id", after="%%%not-base64")
    with pytest.raises(InvalidCursor, match="malformed"):
        keyset_page(users, sort="id", after=encode_cursor("id", ["x"]))


def test_cursors_round_trip_datetimes():
    moment = dt.datetime(2026, 3, 4, 5, 6, 7, tzinfo=dt.UTC)
    assert decode_cursor(encode_cursor("-at", [moment, 9]), "-at") == (moment, 9)


def test_a_scope_row_bound_changes_no_order(users):
    """The row comparison on the scope's index only helps the planner: same pages."""
    fixed = users.filter(is_staff=False)
    for sort, nullable in (("id", False), ("-id", False), ("last_login", True), ("-last_login", True)):
        plain, _ = walk(fixed, sort, 4, nullable=nullable)
        page = keyset_page(users, sort=sort, size=4, nullable=nullable, scope={"is_staff": False})
        seen = list(page.items)
        while page.has_next:
            page = keyset_page(
                users, sort=sort, after=page.next_cursor, size=4, nullable=nullable, scope={"is_staff": False}
            )
            seen.extend(page.items)
        assert [u.id for u in seen] == [u.id for u in plain], sort


def test_the_scope_becomes_a_range_on_its_index(users):
    with CaptureQueriesContext(connection) as ctx:
        keyset_page(users, sort="id", size=3, scope={"is_staff": False})
    sql = ctx.captured_queries[0]["sql"]
    assert '("auth_user"."is_staff", "auth_user"."id") > (' in sql
    assert '("auth_user"."is_staff", "auth_user"."id") <= (' in sql
    assert 'ORDER BY "auth_user"."is_staff" ASC, "auth_user"."id" ASC' in sql
