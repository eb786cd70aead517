"""Run comparison: requested once, computed by the task into stored rows, shown by the page
(computing… then the verdict, regressions only, keyset pages) and the API (202 then 200)."""

from __future__ import annotations

import re

import pytest

from grading.engine.aggregate import CaseRecord
from grading.engine.compare import compare_records
from runs.compare_tasks import CompareError, comparison_request, compute_comparison
from runs.models import ComparisonCase, RunComparison, RunItem, RunLane
from runs.seeding import seed_run
from tests.clients import logged_in as login

pytestmark = pytest.mark.django_db
HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def runs(personas):
    baseline = seed_run(workspace=personas.workspace, items=80, lanes=2, name="base", seed=1)
    candidate = seed_run(
        workspace=personas.workspace, items=80, lanes=2, name="cand", seed=2, pass_rates=(0.4, 0.9)
    )
    return baseline, candidate


def url(baseline, candidate, extra=""):
    return f"/runs/compare/?baseline={baseline.id}&candidate={candidate.id}{extra}"


def test_the_task_stores_what_the_engine_computes(runs, django_capture_on_commit_callbacks):
    baseline, candidate = runs
    with django_capture_on_commit_callbacks() as callbacks:
        comparison = comparison_request(baseline=baseline, candidate=candidate)
        comparison_request(baseline=baseline, candidate=candidate)
    assert len(callbacks) == 1 and comparison.status == "pending"
    assert compute_comparison(comparison.id) == "ready"
    comparison.refresh_from_db()
    lane = next(x for x in comparison.result["lanes"] if x["deployment"] == "careful")

    def records(run):
        rows = RunItem.objects.filter(run=run, lane__deployment_name="careful").values_list(
            "case_key", "status", "last_category", "score"
        )
        return [
            CaseRecord("careful", "sum-open-invoices", k, status or category, score=score if status else None)
            for k, status, category, score in rows
        ]

    expected = compare_records(
        records(baseline), records(candidate), run_id=str(candidate.id), deployment="careful"
    )
    assert lane["verdict"] == expected.verdict
    assert lane["counts"] == expected.counts
    assert lane["pass_rate_delta_interval"] == expected.to_dict()["pass_rate_delta_interval"]
    stored = ComparisonCase.objects.filter(comparison=comparison, deployment="careful")
    assert stored.count() == 40
    assert stored.filter(change="regression").count() == expected.counts["regression"]
    regression = stored.filter(change="regression").first()
    assert RunItem.objects.get(id=regression.baseline_item_id).status == "PASSED"
    assert RunItem.objects.get(id=regression.candidate_item_id).status == "FAILED"
    # Idempotent: computing again gives the same rows, not twice as many.
    compute_comparison(comparison.id)
    assert ComparisonCase.objects.filter(comparison=comparison).count() == 80


def test_the_page_says_computing_then_shows_the_verdict(personas, runs):
    baseline, candidate = runs
    owner = login(personas.owner)
    body = owner.get(url(baseline, candidate)).content.decode()
    assert 'data-testid="computing"' in body and 'hx-trigger="every 2s"' in body
    # said by the page's announcer (static/js/app.js), outside the polled section, once it is ready
    result_html = body.split('<section id="compare-result"')[1]
    assert 'data-announce=""' in result_html and "role=" not in result_html and "aria-live" not in result_html
    assert (
        'id="run-announcer" role="status" aria-live="polite"' in body.split('<section id="compare-result"')[0]
    )
    compute_comparison(RunComparison.objects.get().id)
    fragment = owner.get(url(baseline, candidate, "&partial=result"), **HTMX).content.decode()
    assert "<html" not in fragment and 'data-testid="verdict"' in fragment and "hx-trigger" not in fragment
    assert '<section id="compare-result"\n  data-announce="Comparison ready."' in fragment
    result = RunComparison.objects.get().result
    assert f">{result['verdict']}<" in fragment
    for lane in result["lanes"]:
        assert lane["deployment"] in fragment


def test_regressions_only_lists_regressions_and_pages(personas, runs, django_assert_num_queries):
    baseline, candidate = runs
    comparison = comparison_request(baseline=baseline, candidate=candidate)
    compute_comparison(comparison.id)
    owner = login(personas.owner)
    body = owner.get(url(baseline, candidate, "&change=regression")).content.decode()
    changes = re.findall(r'class="badge change-(\w+)"', body)
    assert changes and set(changes) == {"regression"}
    assert len(changes) == ComparisonCase.objects.filter(comparison=comparison, change="regression").count()
    body = owner.get(url(baseline, candidate)).content.decode()
    cursor = re.search(r'after=([^"&]+)&amp;partial=rows"', body).group(1)
    with django_assert_num_queries(6):
        more = owner.get(url(baseline, candidate, f"&after={cursor}&partial=rows"), **HTMX).content.decode()
    assert len(re.findall(r'class="badge change-', more)) == 30  # 80 cases, pages of 50
    # keyboard focus goes to the first loaded row (the "More cases" link it replaces is gone)
    assert more.count("autofocus") == 1 and "autofocus" not in body


def test_two_runs_picked_in_the_list_compare_older_against_newer(personas, runs):
    baseline, candidate = runs
    body = login(personas.owner).get(f"/runs/compare/?run={candidate.id}&run={baseline.id}").content.decode()
    assert re.search(r"Baseline</h2><p><a href=\"/runs/" + str(baseline.id), body)
    response = login(personas.owner).get(f"/runs/compare/?run={baseline.id}")
    assert response.status_code == 400 and "exactly two runs" in response.content.decode()


def test_runs_of_different_packs_are_refused(personas, runs):
    from packs.services import pack_version_publish
    from tests.packs.publish_fixtures import mental_math

    baseline, _ = runs
    other = pack_version_publish(workspace=personas.workspace, data=mental_math().encode()).version
    stray = type(baseline).objects.create(workspace=personas.workspace, pack_version=other, name="other pack")
    with pytest.raises(CompareError, match="different packs"):
        comparison_request(baseline=baseline, candidate=stray)
    response = login(personas.owner).get(url(baseline, stray))
    assert response.status_code == 400 and "different packs" in response.content.decode()


def test_an_outsider_gets_404_on_the_page_and_the_api(personas, runs):
    baseline, candidate = runs
    assert login(personas.outsider).get(url(baseline, candidate)).status_code == 404
    api = personas.api(personas.outsider)
    response = api.get(f"/api/v1/workspaces/acme/compare?baseline={baseline.id}&candidate={candidate.id}")
    assert response.status_code == 404
    theirs = personas.api(personas.outsider)
    response = theirs.get(
        f"/api/v1/workspaces/globex/compare?baseline={baseline.id}&candidate={candidate.id}"
    )
    assert response.status_code == 404 and response.json()["error"]["field"] == "baseline"


def test_the_api_answers_202_while_computing_then_200_with_pages(personas, runs):
    baseline, candidate = runs
    api = personas.api(personas.viewer)
    base = f"/api/v1/workspaces/acme/compare?baseline={baseline.id}&candidate={candidate.id}"
    first = api.get(base)
    assert first.status_code == 202 and first.json()["status"] == "pending"
    compute_comparison(first.json()["id"])
    ready = api.get(base + "&change=regression")
    body = ready.json()
    assert ready.status_code == 200 and body["result"]["verdict"] in ("regressed", "improved", "within_noise")
    assert all(c["change"] == "regression" for c in body["cases"])
    assert api.get(base + "&change=bogus").json()["error"]["choices"][0] == "regression"
    assert api.get(base + "&after=zzz").status_code == 400


@pytest.mark.parametrize("value", ["\u00b2", "\u0661", "1.0", "-1"])
def test_the_api_refuses_a_side_that_is_not_an_ascii_lane_id_or_a_uuid(personas, runs, value):
    # "²" and "١" are str.isdigit() but not lane ids: "²" reached int() and answered 500.
    baseline, _ = runs
    api = personas.api(personas.viewer)
    response = api.get("/api/v1/workspaces/acme/compare", {"baseline": value, "candidate": str(baseline.id)})
    assert response.status_code == 400
    assert (response.json()["error"]["code"], response.json()["error"]["field"]) == (
        "invalid_parameter",
        "baseline",
    )


def test_the_api_compares_two_lanes_of_one_run(personas, runs):
    baseline, _ = runs
    careful, sloppy = RunLane.objects.filter(run=baseline).order_by("position")
    api = personas.api(personas.owner)
    base = f"/api/v1/workspaces/acme/compare?baseline={careful.id}&candidate={sloppy.id}"
    pending = api.get(base).json()
    compute_comparison(pending["id"])
    body = api.get(base).json()
    assert body["baseline"]["lane"] == careful.id and body["candidate"]["lane"] == sloppy.id
    assert [lane["deployment"] for lane in body["result"]["lanes"]] == ["careful → sloppy"]
    assert api.get(f"/api/v1/workspaces/acme/compare?baseline=x&candidate={sloppy.id}").status_code == 400
    assert (
        api.get(f"/api/v1/workspaces/acme/compare?candidate={sloppy.id}").json()["error"]["field"]
        == "baseline"
    )


def test_a_rescored_run_makes_the_comparison_stale(runs, django_capture_on_commit_callbacks):
    baseline, candidate = runs
    comparison = comparison_request(baseline=baseline, candidate=candidate)
    compute_comparison(comparison.id)
    type(candidate).objects.filter(id=candidate.id).update(scoring_revision=2)
    candidate.refresh_from_db()
    with django_capture_on_commit_callbacks() as callbacks:
        again = comparison_request(baseline=baseline, candidate=candidate)
    assert again.status == "pending" and len(callbacks) == 1


def test_the_worker_knows_the_result_page_tasks():
    """In a fresh process (this one imported the task modules already): what a worker
    registers at start from the autodiscovered ``tasks`` modules."""
    import os
    import subprocess
    import sys

    code = (
        "import django; django.setup(); from agentclash_site.celery import app; "
        "app.loader.import_default_modules(); "
        "print(sorted(t for t in app.tasks if t.startswith('runs.')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env=dict(os.environ),
    ).stdout
    assert "'runs.compute_comparison'" in out and "'runs.compute_result_summary'" in out


def _trace_run(personas, version, dep, lines):
    from tests.runs.runfactory import create_run

    run = create_run(personas.workspace, version, [dep])
    _import(run, lines)
    return run


def _import(run, lines):
    import json

    from runs.services.trace_import import run_import_results

    outcome = run_import_results(run=run, data="\n".join(json.dumps(line) for line in lines).encode())
    assert not outcome.bad_lines
    run.refresh_from_db()


def test_a_comparison_made_while_a_run_was_running_is_computed_again_as_its_cases_finish(personas):
    """A comparison is stored once; only a re-score made it stale, so one asked for while the
    candidate still ran kept its unfinished cases as not_comparable for good, whatever the
    run later finished with (grading.md §10.4)."""
    from runs.services.deployments import deployment_create
    from tests.runs.runfactory import publish

    version = publish(personas.workspace, cases=2)
    dep = deployment_create(workspace=personas.workspace, name="ci", kind="trace_import").deployment
    both = [{"case_key": "c0", "final_output": "answer-0"}, {"case_key": "c1", "final_output": "answer-1"}]
    baseline = _trace_run(personas, version, dep, both)
    candidate = _trace_run(personas, version, dep, both[:1])
    assert (baseline.status, candidate.status) == ("completed", "running")
    comparison = comparison_request(baseline=baseline, candidate=candidate)
    compute_comparison(comparison.id)
    comparison.refresh_from_db()
    assert comparison.result["counts"]["not_comparable"] == 1
    # asked again with nothing new: the stored comparison, not a recomputation
    assert comparison_request(baseline=baseline, candidate=candidate).status == "ready"
    _import(candidate, [{"case_key": "c1", "final_output": "wrong"}])
    assert candidate.status == "completed"
    again = comparison_request(baseline=baseline, candidate=candidate)
    assert again.status == "pending"
    compute_comparison(again.id)
    again.refresh_from_db()
    assert (again.result["counts"]["regression"], again.result["counts"]["not_comparable"]) == (1, 0)


def test_a_lane_against_a_run_is_compared_with_that_runs_lane_of_the_same_deployment(runs):
    """``compare?baseline={lane}&candidate={run}`` (interfaces.md §7) took the candidate run's
    first lane whatever the baseline lane's deployment, so the "sloppy" lane was compared
    with the candidate's "careful" lane."""
    baseline, candidate = runs
    sloppy = RunLane.objects.get(run=baseline, deployment_name="sloppy")
    for kwargs in ({"baseline_lane": sloppy}, {}):
        comparison = comparison_request(baseline=baseline, candidate=candidate, **kwargs)
        compute_comparison(comparison.id)
    lane_vs_run = RunComparison.objects.get(baseline_lane=sloppy).result["lanes"]
    run_vs_run = RunComparison.objects.get(baseline_lane=None).result["lanes"]
    assert [lane["deployment"] for lane in lane_vs_run] == ["sloppy"]
    assert lane_vs_run[0] == next(lane for lane in run_vs_run if lane["deployment"] == "sloppy")
    # and the other way round
    careful = RunLane.objects.get(run=candidate, deployment_name="careful")
    comparison = comparison_request(baseline=baseline, candidate=candidate, candidate_lane=careful)
    compute_comparison(comparison.id)
    comparison.refresh_from_db()
    assert (
        comparison.result["lanes"][0]["baseline_lane"]
        == RunLane.objects.get(run=baseline, deployment_name="careful").id
    )


def test_not_comparable_says_why_when_the_input_sets_differ(personas, runs):
    from django.db.models import Value
    from django.db.models.functions import Concat

    from packs.models import InputSet

    baseline, candidate = runs
    version = candidate.pack_version
    other = InputSet.objects.create(version=version, key="held-out", name="Held out", position=9)
    type(candidate).objects.filter(id=candidate.id).update(input_set=other)
    RunItem.objects.filter(run=candidate).update(case_key=Concat(Value("other-"), "case_key"))
    candidate.refresh_from_db()
    compute_comparison(comparison_request(baseline=baseline, candidate=candidate).id)
    assert RunComparison.objects.get().result["verdict"] == "not_comparable"
    body = login(personas.owner).get(url(baseline, candidate)).content.decode()
    why = re.search(r'data-testid="not-comparable-why">(.*?)</p>', body, re.S).group(1)
    assert "different input sets" in why and "<code>held-out</code>" in why
    # a side with no item shows one dash, not a status dash and a score dash
    assert "– –" not in re.sub(r"<[^>]+>", "", body).replace("\n", " ").replace("  ", " ")
