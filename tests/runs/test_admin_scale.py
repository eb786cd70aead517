"""The run admin's lists and pages stay bounded on a busy instance: the same queries for any
number of runs, lanes, items and attempts, a count that stops at LIST_COUNT_CAP, an order an
index serves, and none of the big JSON columns read where they are not shown."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test.utils import CaptureQueriesContext

from agentclash_site.lib import admin as admin_lib
from runs.models import Attempt, GradeRevision, Run, RunItem, RunLane
from runs.seeding import seed_run
from tests.clients import logged_in

pytestmark = pytest.mark.django_db

LISTS = ["/admin/runs/run/", "/admin/runs/runlane/", "/admin/runs/runitem/", "/admin/runs/attempt/"]
# Columns of megabytes at scale: probe findings per case, per-case lane tallies, an item's
# evidence and grade, a version's bundle and manifest.
HEAVY = [
    '"runs_run"."case_findings"',
    '"runs_run"."stats"',
    '"runs_runlane"."counters"',
    '"runs_runlane"."stats"',
    '"runs_runitem"."evidence"',
    '"runs_runitem"."grade"',
    '"runs_graderevision"."grade"',
    '"packs_packversion"."manifest"',
    '"packs_packversion"."source"',
    '"packs_packversion"."critique_findings"',
]


@pytest.fixture
def client(personas):
    root = get_user_model().objects.create_superuser("root", password="pw-root-123")
    client = logged_in(root)
    client.get("/admin/")  # the session settles
    return client


def sql_of(client, url: str) -> list[str]:
    with CaptureQueriesContext(connection) as captured:
        response = client.get(url)
    assert response.status_code == 200, url
    return [query["sql"] for query in captured.captured_queries]


def heavy_in(queries: list[str], allowed: tuple[str, ...] = ()) -> list[str]:
    return [column for column in HEAVY if column not in allowed and any(column in sql for sql in queries)]


def seed(personas, runs: int, items: int) -> None:
    for n in range(runs):
        seed_run(workspace=personas.workspace, items=items, lanes=2, infra_error_rate=0.3, seed=n)
    # A re-score's older grade for some items.
    GradeRevision.objects.bulk_create(
        GradeRevision(item=item, revision=0, status="FAILED", grade={"old": True})
        for item in RunItem.objects.filter(status__in=["PASSED", "FAILED"], revisions=None)[:5]
    )


def test_the_run_lists_cost_the_same_queries_at_any_size_and_read_no_big_column(personas, client):
    seed(personas, runs=1, items=6)
    small = {url: sql_of(client, url) for url in LISTS}
    seed(personas, runs=3, items=40)
    assert RunItem.objects.count() > 100 and Attempt.objects.count() > 100  # more than a page
    for url in LISTS:
        queries = sql_of(client, url)
        assert len(queries) == len(small[url]), url
        assert heavy_in(queries) == [], url
        for sql in queries:
            # Counted within a LIMIT, never the whole table, and never twice.
            if "COUNT(" in sql:
                assert f"LIMIT {admin_lib.LIST_COUNT_CAP + 1}" in sql, (url, sql)
        assert sum("COUNT(" in sql for sql in queries) == 1, url
        # No DISTINCT over a column's values for a filter, no date hierarchy's scans.
        assert not any("DISTINCT" in sql or 'MIN("runs_run"."created_at")' in sql for sql in queries), url


def test_item_lane_and_attempt_lists_are_ordered_by_their_own_id(personas, client):
    # The models order by run (and the run by created_at): every page joined and sorted
    # the whole table before taking its first 100 rows.
    seed(personas, runs=1, items=6)
    for url, table in [
        ("/admin/runs/runitem/", "runs_runitem"),
        ("/admin/runs/runlane/", "runs_runlane"),
        ("/admin/runs/attempt/", "runs_attempt"),
    ]:
        (page,) = [sql for sql in sql_of(client, url) if f'FROM "{table}"' in sql and "COUNT(" not in sql]
        assert re.search(rf'ORDER BY "{table}"."id" DESC( LIMIT \d+)?$', page), (url, page)


def test_the_change_pages_read_only_the_big_columns_they_show(personas, client):
    seed(personas, runs=1, items=6)
    run = Run.objects.get()
    lane = RunLane.objects.first()
    item = GradeRevision.objects.first().item
    attempt = Attempt.objects.first()
    pages = {
        f"/admin/runs/run/{run.pk}/change/": ('"runs_run"."stats"',),
        f"/admin/runs/runlane/{lane.pk}/change/": ('"runs_runlane"."stats"',),
        f"/admin/runs/runitem/{item.pk}/change/": ('"runs_runitem"."evidence"', '"runs_runitem"."grade"'),
        f"/admin/runs/attempt/{attempt.pk}/change/": (),
    }
    for url, shown in pages.items():
        assert heavy_in(sql_of(client, url), allowed=shown) == [], url
    body = client.get(f"/admin/runs/run/{run.pk}/change/").content.decode()
    assert "Case findings" not in body and "Stats" in body
    assert "Counters" not in client.get(f"/admin/runs/runlane/{lane.pk}/change/").content.decode()


def test_an_items_page_lists_its_grade_revisions(personas, client):
    seed(personas, runs=1, items=6)
    revision = GradeRevision.objects.first()
    body = client.get(f"/admin/runs/runitem/{revision.item_id}/change/").content.decode()
    assert "Grade revisions" in body and "FAILED" in body


def test_a_list_past_the_count_cap_says_more_than_and_pages_up_to_it(personas, client, monkeypatch):
    seed(personas, runs=1, items=20)
    monkeypatch.setattr(admin_lib, "LIST_COUNT_CAP", 5)
    body = client.get("/admin/runs/runitem/").content.decode()
    assert "more than 5 run items (filter or search to see the rest)" in body
    body = client.get("/admin/runs/runitem/?state__exact=pending").content.decode()
    assert "0 run items" in body and "more than" not in body
    # "Select all" applies an action to every matching run: it does not name a count it
    # does not know.
    seed(personas, runs=1, items=2)
    monkeypatch.setattr(admin_lib, "LIST_COUNT_CAP", 1)
    body = client.get("/admin/runs/run/").content.decode()
    assert "Select all matching runs (more than 1)" in body and "Select all 1 runs" not in body


def test_a_run_id_searches_its_rows_through_the_index(personas, client):
    run = seed_run(workspace=personas.workspace, items=6, lanes=2)
    other = seed_run(workspace=personas.workspace, items=4, lanes=2, name="other")
    for url in ("/admin/runs/runitem/", "/admin/runs/runlane/", "/admin/runs/run/"):
        queries = sql_of(client, f"{url}?q={run.id}")
        assert not any("LIKE" in sql for sql in queries), url
        body = client.get(f"{url}?q={run.id}").content.decode()
        assert str(run.id) in body and str(other.id) not in body, url
    # An attempt list had no way to a run's attempts (the term searched the error texts).
    queries = sql_of(client, f"/admin/runs/attempt/?q={run.id}")
    assert not any("LIKE" in sql for sql in queries)
    body = client.get(f"/admin/runs/attempt/?q={run.id}").content.decode()
    listed = {int(pk) for pk in re.findall(r'href="/admin/runs/attempt/(\d+)/change/', body)}
    assert listed == set(Attempt.objects.filter(item__run=run).values_list("pk", flat=True)) != set()
    # Any other term searches the listed fields as before.
    assert "c-000001" in client.get("/admin/runs/runitem/?q=c-000001").content.decode()
    assert "other" in client.get("/admin/runs/run/?q=other").content.decode()


def test_the_big_lists_offer_to_sort_only_by_their_id(personas, client):
    # A header click on a case key, state, score or latency sorted every row of the table
    # (every item of every run) for one page.
    from packs import services
    from tests.packs.publish_fixtures import mental_math

    seed(personas, runs=1, items=6)
    artifact = services.artifact_store(workspace=personas.workspace, data=b"{}", filename="a.json").artifact
    services.pack_version_publish(
        workspace=personas.workspace, data=mental_math(asset_artifact_id=str(artifact.public_id)).encode()
    )
    expected = {
        "/admin/packs/asset/": [],
        "/admin/runs/runitem/": ["column-id"],
        "/admin/runs/attempt/": ["column-id"],
        "/admin/runs/runlane/": [],
        "/admin/packs/case/": [],
    }
    for url, sortable in expected.items():
        body = client.get(url).content.decode()
        assert 'id="result_list"' in body, url
        assert re.findall(r'<th scope="col" class="sortable (column-[\w-]+)', body) == sortable, url
