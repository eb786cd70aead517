"""Result pages never load a whole run (ARCHITECTURE.md): each page's query count is the same
for a run of 8 items as for one of 80 with more lanes, repetitions and a stored comparison,
including the htmx fragments (expansion, grid page, summary, live progress)."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from runs.compare_tasks import comparison_request
from runs.models import Run, RunItem
from runs.result_tasks import compute_result_summary
from runs.seeding import seed_run
from tests.clients import logged_in as login

pytestmark = pytest.mark.django_db
HTMX = {"HTTP_HX_REQUEST": "true"}


def _urls(run: Run, other: Run) -> list[tuple[str, bool]]:
    item = RunItem.objects.filter(run=run, status="FAILED").order_by("id").first()
    grid = f"/runs/{run.id}/?partial=grid&after="
    return [
        (f"/runs/{run.id}/", False),
        (f"/runs/{run.id}/?partial=live", True),
        (f"/runs/{run.id}/?partial=summary", True),
        (grid, True),
        (f"/runs/{run.id}/cases/", False),
        (f"/runs/{run.id}/cases/?status=failed", False),
        (f"/runs/{run.id}/cases/{item.id}/", False),
        (f"/runs/{run.id}/cases/{item.id}/expectations/", True),
        (f"/runs/{run.id}/cases/{item.id}/transcript/", False),
        (f"/runs/compare/?baseline={other.id}&candidate={run.id}", False),
        (f"/runs/compare/?baseline={other.id}&candidate={run.id}&change=regression", False),
    ]


def _counts(client, run: Run, other: Run) -> list[int]:
    compute_result_summary(str(run.id))
    comparison = comparison_request(baseline=other, candidate=run)
    from runs.compare_tasks import compute_comparison

    compute_comparison(comparison.id)
    out = []
    for url, htmx in _urls(run, other):
        if url.endswith("after="):
            first = client.get(f"/runs/{run.id}/").content.decode()
            cursor = re.search(r"partial=grid&amp;after=([^\"&]+)", first)
            url = url + (cursor.group(1) if cursor else "")
        client.get(url, **(HTMX if htmx else {}))  # warm-up (session, caches)
        with CaptureQueriesContext(connection) as ctx:
            response = client.get(url, **(HTMX if htmx else {}))
        assert response.status_code == 200, url
        out.append(len(ctx.captured_queries))
    return out


def test_no_result_page_queries_more_for_a_bigger_run(personas):
    owner = login(personas.owner)
    small = seed_run(workspace=personas.workspace, items=8, lanes=2, seed=1)
    small_other = seed_run(workspace=personas.workspace, items=8, lanes=2, seed=2)
    big = seed_run(workspace=personas.workspace, items=180, lanes=3, seed=3)
    big_other = seed_run(workspace=personas.workspace, items=180, lanes=3, seed=4)
    assert _counts(owner, small, small_other) == _counts(owner, big, big_other)
