"""Filters of the HTML lists take the spellings of spec/interfaces.md §3 in any case, and a
value they do not know is a 400 naming the parameter and what it accepts, never a list of
every case as if filtered."""

from __future__ import annotations

import re

import pytest

from runs.models import Run, RunItem, RunLane
from runs.results import CASE_FILTERS
from runs.seeding import seed_run
from runs.views.results import STATUS_VALUES
from tests.clients import logged_in as login

pytestmark = pytest.mark.django_db


def shown(body: str) -> list[int]:
    return [int(i) for i in re.findall(r'id="item-(\d+)"', body)]


@pytest.fixture
def run(personas) -> Run:
    return seed_run(workspace=personas.workspace, items=40, lanes=2, name="nightly", infra_error_rate=0.1)


def test_every_status_the_page_accepts_is_a_filter_of_the_case_list():
    assert set(STATUS_VALUES.values()) == set(CASE_FILTERS)


@pytest.mark.parametrize(
    ("spelling", "status"), [("FAILED", "failed"), ("Passed", "passed"), ("INFRA_ERROR", "infra_error")]
)
def test_the_statuses_of_the_spec_filter_in_any_case(personas, run, spelling, status):
    client = login(personas.viewer)
    expected = shown(client.get(f"/runs/{run.id}/cases/?status={status}").content.decode())
    response = client.get(f"/runs/{run.id}/cases/?status={spelling}")
    body = response.content.decode()
    assert response.status_code == 200
    assert shown(body) == expected and expected
    assert f'<option value="{status}" selected>' in body


def test_failed_lists_only_failed_cases(personas, run):
    body = login(personas.viewer).get(f"/runs/{run.id}/cases/?status=FAILED").content.decode()
    failed = sorted(RunItem.objects.filter(run=run, status="FAILED").values_list("id", flat=True))
    assert shown(body) == failed


@pytest.mark.parametrize(
    ("spelling", "where"),
    [
        ("UNAVAILABLE", {"status": "UNAVAILABLE"}),
        ("NOT_EVALUATED", {"status": "NOT_EVALUATED"}),
        ("infra_error", {"status": "", "last_category": "infra_error"}),
        ("config_error", {"status": "", "last_category": "config_error"}),
    ],
)
def test_each_status_is_its_own_filter_as_in_the_api(personas, run, spelling, where):
    # They used to share filters two by two (unavailable + not evaluated, infra + config),
    # while the API and the CLI filtered each exactly.
    items = list(RunItem.objects.filter(run=run).exclude(status="").order_by("id")[:4])
    RunItem.objects.filter(pk=items[0].pk).update(status="UNAVAILABLE")
    RunItem.objects.filter(pk=items[1].pk).update(status="NOT_EVALUATED")
    RunItem.objects.filter(pk=items[2].pk).update(status="", last_category="infra_error", state="done")
    RunItem.objects.filter(pk=items[3].pk).update(status="", last_category="config_error", state="done")
    expected = sorted(RunItem.objects.filter(run=run, **where).values_list("id", flat=True))
    response = login(personas.viewer).get(f"/runs/{run.id}/cases/?status={spelling}")
    body = response.content.decode()
    assert response.status_code == 200
    assert shown(body) == expected and expected
    assert f'<option value="{spelling.lower()}" selected>' in body


def test_cancelled_lists_the_cases_a_cancel_ended_without_a_grade(personas, run):
    ended = RunItem.objects.filter(run=run, status="").exclude(state="pending")[:2]
    ids = sorted(item.id for item in ended)
    assert ids  # the seeded run has infra errors
    RunItem.objects.filter(id__in=ids).update(last_category="cancelled", state="cancelled")
    response = login(personas.viewer).get(f"/runs/{run.id}/cases/?status=CANCELLED")
    assert response.status_code == 200
    assert shown(response.content.decode()) == ids
    assert '<option value="cancelled" selected>' in response.content.decode()


@pytest.mark.parametrize("value", ["bogus", "cancel", "FAILED,PASSED"])
def test_an_unknown_status_is_a_400_listing_the_accepted_ones(personas, run, value):
    response = login(personas.viewer).get(f"/runs/{run.id}/cases/", {"status": value, "q": "0000"})
    body = response.content.decode()
    assert response.status_code == 400
    assert (
        "status must be one of PASSED, FAILED, UNAVAILABLE, NOT_EVALUATED, ERROR, infra_error, "
        "config_error, cancelled, pending, not"
    ) in body
    assert 'name="status" aria-invalid="true"' in body
    assert shown(body) == [] and "No case listed: fix the filters above." in body
    assert 'name="q" value="0000"' in body  # what the user typed stays in the form


def test_an_unknown_sort_is_a_400(personas, run):
    response = login(personas.viewer).get(f"/runs/{run.id}/cases/?sort=latency")
    assert response.status_code == 400
    assert "sort must be one of id, score, -score, not &#x27;latency&#x27;." in response.content.decode()


def test_an_unknown_challenge_is_a_400_listing_the_runs_challenges(personas, run):
    response = login(personas.viewer).get(f"/runs/{run.id}/cases/?challenge=nope")
    body = response.content.decode()
    assert response.status_code == 400
    assert "challenge must be a challenge of this run (sum-open-invoices)." in body
    assert shown(body) == []


def test_a_challenge_of_the_version_with_no_finished_case_is_still_a_filter(personas):
    pending = seed_run(workspace=personas.workspace, items=4, lanes=2, status="running", done_fraction=0)
    RunLane.objects.filter(run=pending).update(counters={})  # no finished case: no tally
    response = login(personas.viewer).get(f"/runs/{pending.id}/cases/?challenge=sum-open-invoices")
    assert response.status_code == 200 and len(shown(response.content.decode())) == 4


def test_every_bad_filter_is_named_at_once(personas, run):
    response = login(personas.viewer).get(f"/runs/{run.id}/cases/?status=x&deployment=y&sort=z")
    body = response.content.decode()
    assert response.status_code == 400
    for name in ("status", "deployment", "sort"):
        assert f'name="{name}" aria-invalid="true"' in body, name


def test_the_outsider_still_gets_404_with_a_bad_filter(personas, run):
    assert login(personas.outsider).get(f"/runs/{run.id}/cases/?status=bogus").status_code == 404


# --- the run list and the comparison --------------------------------------------------------------


def test_the_run_list_status_filter_takes_any_case_and_refuses_unknown_values(personas, run):
    seed_run(workspace=personas.workspace, items=4, lanes=1, name="still-going", status="running")
    client = login(personas.viewer)
    body = client.get("/runs/?status=RUNNING").content.decode()
    assert "still-going" in body and "nightly" not in body
    response = client.get("/runs/?status=bogus")
    body = response.content.decode()
    assert response.status_code == 400
    assert "status must be one of draft, queued, running, scoring, completed, failed, cancelled" in body
    assert 'name="status" aria-invalid="true"' in body
    assert "still-going" not in body and "nightly" not in body


def test_an_unknown_comparison_class_is_a_400(personas, run):
    other = seed_run(workspace=personas.workspace, items=40, lanes=2, name="other", seed=11)
    client = login(personas.viewer)
    url = f"/runs/compare/?baseline={run.id}&candidate={other.id}"
    assert client.get(url + "&change=REGRESSION").status_code == 200
    response = client.get(url + "&change=worse")
    assert response.status_code == 400
    assert "change must be one of regression, improvement," in response.content.decode()
