"""The overview of a run cancelled before one of its lanes graded anything: the rank, the
score chart and the progress line say what happened rather than suggest a standing, an
empty distribution or finished work."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from runs import tasks
from runs.models import Run
from runs.services.deployments import deployment_create
from runs.services.operations import run_cancel
from tests.runs.runfactory import create_run, publish
from tests.runs.test_result_consistency import _upload

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def cancelled(personas) -> Run:
    """Lane "graded": c0 passed, c1 and c2 cancelled; lane "idle": all three cancelled."""
    version = publish(personas.workspace, cases=3)
    deps = [
        deployment_create(workspace=personas.workspace, name=name, kind="trace_import").deployment
        for name in ("graded", "idle")
    ]
    run = create_run(personas.workspace, version, deps)
    _upload(personas, run, [{"deployment": "graded", "case_key": "c0", "final_output": "answer-0"}])
    run_cancel(run=run)
    tasks.check_run(str(run.pk))  # what the worker does next: the lane figures and the ranking
    return Run.objects.get(pk=run.pk)


def _overview(personas, run: Run) -> str:
    client = Client()
    client.force_login(personas.viewer)
    return client.get(f"/runs/{run.pk}/").content.decode()


def _row(page: str, deployment: str) -> str:
    return re.search(
        rf'<tr[^>]*>\s*<td data-testid="rank">(?:(?!</tr>).)*?<th scope="row">(?:<bdi>)?{deployment}\b.*?</tr>',
        page,
        re.S,
    ).group(0)


def test_a_lane_with_nothing_graded_shows_no_rank(personas, cancelled):
    # The stored ranking (grading.md §10.4) ranks it last; only the page leaves the rank out.
    ranking = {r["deployment"]: r for r in cancelled.stats["ranking"]}
    assert (ranking["graded"]["rank"], ranking["idle"]["rank"]) == (1, 2)
    assert ranking["idle"]["graded_cases"] == 0
    page = _overview(personas, cancelled)
    assert re.search(r'data-testid="rank">1</td>', _row(page, "graded"))
    idle = _row(page, "idle")
    assert re.search(r'data-testid="rank">–<br><small class="muted">nothing graded</small></td>', idle)


def _figure(page: str, deployment: str) -> str:
    return re.search(
        rf"<figure[^>]*>\s*<figcaption><strong>(?:<bdi>)?{deployment}(?:</bdi>)?</strong>.*?</figure>",
        page,
        re.S,
    ).group(0)


def test_the_score_chart_of_a_lane_with_nothing_graded_says_so_instead_of_empty_axes(personas, cancelled):
    from runs.result_tasks import compute_result_summary

    compute_result_summary(str(cancelled.pk))
    page = _overview(personas, cancelled)
    graded, idle = _figure(page, "graded"), _figure(page, "idle")
    assert "Score distribution of graded" in graded and 'data-testid="no-scores"' not in graded
    assert "Score distribution of idle" not in idle
    assert re.search(r'data-testid="no-scores">[^<]*no graded cases; nothing was scored', idle)
    # its latency chart has no execution to draw either: the axes say "no data" visibly
    assert re.search(r"<text [^>]*>no data</text>", idle)


def test_a_cancelled_runs_progress_does_not_count_cancelled_items_as_finished(personas, cancelled):
    page = _overview(personas, cancelled)
    live = re.search(r'<div class="progress-line">\s*(<span>.*?)<span class="badge', page, re.S).group(1)
    text = re.sub(r"<[^>]+>", "", live)
    assert " ".join(text.split()) == "1 of 6 items finished, 5 cancelled"
    title = re.search(r'<svg class="progress".*?<title[^>]*>([^<]*)</title>', page, re.S).group(1)
    assert title.startswith("1 of 6 items finished (16.7%)")
