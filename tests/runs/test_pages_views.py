"""Result pages: run list, overview (live progress, leaderboard, charts, assertion health,
grid), case list, case page and transcript. Each page is workspace-scoped (outsiders get
404) and its query count is pinned, the same for a deep page as for the first."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from runs.models import ItemState, Run, RunItem, RunLane, RunResultSummary, RunStatus
from runs.result_tasks import compute_result_summary, result_summary_request
from runs.seeding import seed_run
from tests.clients import logged_in as login

pytestmark = pytest.mark.django_db
HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def run(personas):
    return seed_run(workspace=personas.workspace, items=60, lanes=2, name="nightly", infra_error_rate=0.1)


@pytest.fixture
def owner(personas):
    return login(personas.owner)


def a_failed_item(run: Run) -> RunItem:
    return RunItem.objects.filter(run=run, status="FAILED").order_by("id").first()


def page_urls(run: Run) -> list[str]:
    item = a_failed_item(run)
    return [
        f"/runs/{run.id}/",
        f"/runs/{run.id}/?partial=live",
        f"/runs/{run.id}/cases/",
        f"/runs/{run.id}/cases/{item.id}/",
        f"/runs/{run.id}/cases/{item.id}/expectations/",
        f"/runs/{run.id}/cases/{item.id}/transcript/",
        f"/runs/compare/?baseline={run.id}&candidate={run.id}",
    ]


def test_every_run_page_is_404_to_an_outsider(personas, run):
    outsider = login(personas.outsider)
    for url in page_urls(run):
        assert outsider.get(url, **HTMX).status_code == 404, url


def test_every_run_page_needs_a_login(run):
    for url in page_urls(run):
        response = Client().get(url)
        assert response.status_code == 302 and "/login/" in response["Location"], url


def test_a_viewer_sees_every_page(personas, run):
    viewer = login(personas.viewer)
    for url in page_urls(run)[:-1]:
        assert viewer.get(url).status_code == 200, url


def test_an_item_of_another_run_is_404(personas, run, owner):
    other = seed_run(workspace=personas.workspace, items=4, lanes=2)
    item = a_failed_item(run) or RunItem.objects.filter(run=run).first()
    assert owner.get(f"/runs/{other.id}/cases/{item.id}/").status_code == 404


# --- run list ----------------------------------------------------------------------------------


def test_the_run_list_shows_this_workspaces_runs_and_filters_them(personas, run, owner):
    seed_run(workspace=personas.other_workspace, items=2, lanes=1, name="theirs")
    running = seed_run(workspace=personas.workspace, items=4, lanes=1, name="still-going", status="running")
    page = owner.get("/runs/").content.decode()
    assert "nightly" in page and "still-going" in page and "theirs" not in page
    assert 'name="run"' in page  # checkboxes to pick two runs to compare
    page = owner.get("/runs/?status=running").content.decode()
    assert "still-going" in page and "nightly" not in page
    page = owner.get("/runs/?deployment=sloppy").content.decode()
    assert "nightly" in page and "still-going" not in page  # the running run has one lane, careful
    page = owner.get("/runs/?pack=no-such-pack").content.decode()
    assert "No runs match these filters" in page
    assert running.id


def test_the_run_list_pages_with_a_cursor(personas, run, owner, django_assert_num_queries):
    Run.objects.bulk_create(
        [Run(workspace=personas.workspace, pack_version=run.pack_version, name=f"bulk{i}") for i in range(30)]
    )
    first = owner.get("/runs/").content.decode()
    cursor = re.search(r'after=([^"&]+)"', first).group(1)
    # 7: the pack and deployment filters are text fields now, no longer two lists of names
    with django_assert_num_queries(7):
        second = owner.get(f"/runs/?after={cursor}").content.decode()
    picked = r'name="run" value="([0-9a-f-]+)"'
    shown = re.findall(picked, first) + re.findall(picked, second)
    assert len(shown) == len(set(shown)) == Run.objects.filter(workspace=personas.workspace).count()
    assert owner.get("/runs/?after=garbage").status_code == 400


def test_an_empty_run_list_offers_new_run_only_to_those_who_may_start_one(personas):
    # A viewer was told to start one with "New run", a button only editors and owners get.
    editor = login(personas.editor).get("/runs/").content.decode()
    assert 'No runs yet. Start one with "New run"' in editor
    viewer = login(personas.viewer).get("/runs/").content.decode()
    assert "No runs yet." in viewer and "New run" not in viewer and "eval start" not in viewer


def test_an_older_runs_batch_that_comes_back_empty_adds_no_empty_list_row(personas, run, owner):
    # The runs after the cursor were deleted meanwhile: the rows swapped in said "No runs yet"
    # under a list of runs.
    from agentclash_site.lib.pagination import encode_cursor

    cursor = encode_cursor("-created_at", [run.created_at, run.id])
    Run.objects.exclude(pk=run.pk).delete()
    body = owner.get(f"/runs/?after={cursor}&partial=rows", **HTMX).content.decode()
    assert "No runs" not in body and "<html" not in body


# --- new run -----------------------------------------------------------------------------------


def test_a_viewer_cannot_open_the_new_run_form(personas, run):
    assert login(personas.viewer).get("/runs/new/").status_code == 403


def test_the_new_run_form_shows_field_errors_and_creates_a_run(personas, run, owner):
    version = run.pack_version
    lanes = list(RunLane.objects.filter(run=run))
    response = owner.post("/runs/new/", {"pack_version": version.id, "repetitions": "0"})
    body = response.content.decode()
    assert response.status_code == 400
    assert "This field is required." in body  # deployments
    assert "Repetitions must be a whole number from 1 to 10" in body
    response = owner.post(
        "/runs/new/",
        {
            "pack_version": version.id,
            "deployments": [lanes[0].deployment_id],
            "repetitions": "1",
            "input_set": "nope",
        },
    )
    assert response.status_code == 400 and "nope" in response.content.decode()
    response = owner.post(
        "/runs/new/",
        {
            "pack_version": version.id,
            "deployments": [lanes[0].deployment_id],
            "repetitions": "2",
            "name": "from the form",
        },
    )
    created = Run.objects.get(name="from the form")
    assert response.status_code == 302 and response["Location"] == f"/runs/{created.id}/"
    assert created.repetitions == 2 and created.created_by == personas.owner


# --- overview ----------------------------------------------------------------------------------


def test_the_overview_shows_the_leaderboard_with_the_winner(run, owner):
    body = owner.get(f"/runs/{run.id}/").content.decode()
    assert "Leaderboard" in body and "winner" in body
    winner = run.stats["ranking"][0]["deployment"]
    assert re.search(r'class="winner">.*?<th scope="row"><bdi>' + re.escape(winner) + "</bdi>", body, re.S)
    lane = RunLane.objects.get(run=run, deployment_name=winner)
    assert f"{lane.stats['pass_rate'] * 100:.1f}%" in body
    low, high = lane.stats["pass_rate_interval"]
    assert f"{low * 100:.1f}–{high * 100:.1f}%" in body
    assert "hx-trigger" not in body.split('id="live"')[1].split(">")[0]  # finished: no polling
    for fmt in ("csv", "jsonl", "junit", "grading"):
        assert f"/runs/{run.id}/export/{fmt}/" in body


def test_lanes_within_noise_of_the_leader_are_marked(run, owner):
    stats = dict(run.stats)
    stats["ranking"] = [dict(r, within_noise=(i == 1)) for i, r in enumerate(stats["ranking"])]
    Run.objects.filter(id=run.id).update(stats=stats)
    assert "within noise" in owner.get(f"/runs/{run.id}/").content.decode()


def test_lanes_tied_for_first_place_are_all_winners(run):
    """§10.4: ranks are shared when every sort figure is equal (1, 1, 3), and the name only
    orders the display; the first lane by name alone was marked the winner of a tie."""
    from runs.results import lanes_of, leaderboard

    stats = dict(run.stats)
    stats["ranking"] = [dict(r, rank=1) for r in stats["ranking"]]
    Run.objects.filter(id=run.id).update(stats=stats)
    run.refresh_from_db()
    rows = leaderboard(run, lanes_of(run))
    assert len(rows) == 2 and [r.winner for r in rows] == [True, True]
    stats["ranking"] = [dict(r, rank=i + 1) for i, r in enumerate(stats["ranking"])]
    Run.objects.filter(id=run.id).update(stats=stats)
    run.refresh_from_db()
    assert [r.winner for r in leaderboard(run, lanes_of(run))] == [True, False]


def test_a_running_run_polls_its_progress_until_it_finishes(personas, owner):
    live = seed_run(workspace=personas.workspace, items=20, lanes=2, status="running", done_fraction=0.5)
    body = owner.get(f"/runs/{live.id}/").content.decode()
    assert 'hx-trigger="every 2s"' in body and "partial=live" in body
    assert re.search(r'data-testid="done">10<', body)
    fragment = owner.get(f"/runs/{live.id}/?partial=live&was=running", **HTMX)
    assert fragment.status_code == 200 and "<html" not in fragment.content.decode()
    assert "HX-Refresh" not in fragment
    Run.objects.filter(id=live.id).update(status=RunStatus.COMPLETED)
    RunLane.objects.filter(run=live).update(pending=0, status="completed")
    RunItem.objects.filter(run=live, state=ItemState.PENDING).update(
        state=ItemState.DONE, last_category="cancelled"
    )
    fragment = owner.get(f"/runs/{live.id}/?partial=live&was=running", **HTMX)
    assert fragment["HX-Refresh"] == "true"
    assert "hx-trigger" not in fragment.content.decode()


def test_a_finished_run_asks_once_for_its_summary_and_shows_it_when_stored(
    run, owner, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks() as callbacks:
        body = owner.get(f"/runs/{run.id}/").content.decode()
        owner.get(f"/runs/{run.id}/?partial=summary", **HTMX)
    assert len(callbacks) == 1  # one task, however many requests
    assert "Computing…" in body
    compute_result_summary(str(run.id))
    body = owner.get(f"/runs/{run.id}/").content.decode()
    assert "Computing…" not in body
    assert body.count('<svg class="chart"') == 4  # score and latency histogram per lane
    assert "query-then-write" in body and "Assertion health" in body
    summary = RunResultSummary.objects.get(run=run)
    careful = RunLane.objects.get(run=run, deployment_name="careful")
    bins = summary.score_bins[str(careful.id)]
    assert sum(bins) == careful.passed + careful.failed and bins[9] == careful.passed


def test_a_validator_that_never_discriminates_is_flagged(personas, owner):
    always = seed_run(
        workspace=personas.workspace, items=12, lanes=2, pass_rates=(1.0, 1.0), infra_error_rate=0
    )
    compute_result_summary(str(always.id))
    summary = RunResultSummary.objects.get(run=always)
    entry = next(e for e in summary.assertion_health if e["key"] == "names-customer")
    assert entry["discriminates"] is False
    assert "never discriminates" in owner.get(f"/runs/{always.id}/").content.decode()


def test_a_rescore_makes_the_summary_stale_and_asks_again(run, django_capture_on_commit_callbacks):
    compute_result_summary(str(run.id))
    Run.objects.filter(id=run.id).update(scoring_revision=2)
    run.refresh_from_db()
    with django_capture_on_commit_callbacks() as callbacks:
        summary = result_summary_request(run=run)
        result_summary_request(run=run)
    assert len(callbacks) == 1 and summary.status == "pending" and summary.scoring_revision == 2


def test_the_grid_pages_through_cases_with_htmx(run, owner):
    body = owner.get(f"/runs/{run.id}/").content.decode()
    assert "Show more rows" not in body  # 30 cases fit one page of 40
    big = seed_run(workspace=run.workspace, items=100, lanes=2)
    body = owner.get(f"/runs/{big.id}/").content.decode()
    assert body.count('<tr>\n      <th scope="row"><code>c-0000') == 40
    cursor = re.search(r"partial=grid&amp;after=([^\"]+)\"", body).group(1)
    more = owner.get(f"/runs/{big.id}/?partial=grid&after={cursor}", **HTMX).content.decode()
    assert "c-000040" in more and "c-000049" in more and "c-000039" not in more
    assert "Show more rows" not in more  # 50 cases: the second page is the last


def test_the_overview_query_count_is_pinned(run, owner, django_assert_num_queries):
    compute_result_summary(str(run.id))
    owner.get(f"/runs/{run.id}/")  # session warm-up
    with django_assert_num_queries(10):
        owner.get(f"/runs/{run.id}/")
    with django_assert_num_queries(6):
        owner.get(f"/runs/{run.id}/?partial=live", **HTMX)


# --- case list ---------------------------------------------------------------------------------


def _ids(body: str) -> list[int]:
    return [int(i) for i in re.findall(r'<tr id="item-(\d+)">', body)]


def test_the_case_list_visits_every_item_once_with_keyset_pages(run, owner, django_assert_num_queries):
    seen: list[int] = []
    url = f"/runs/{run.id}/cases/?partial=rows"
    first = owner.get(f"/runs/{run.id}/cases/").content.decode()
    seen += _ids(first)
    cursor = re.search(r'after=([^"&]+)"', first)
    while cursor:
        with django_assert_num_queries(6):
            body = owner.get(f"{url}&after={cursor.group(1)}", **HTMX).content.decode()
        seen += _ids(body)
        cursor = re.search(r'after=([^"&]+)&amp;partial=rows"', body)
    assert seen == sorted(RunItem.objects.filter(run=run).values_list("id", flat=True))


def test_the_case_list_filters(run, owner):
    careful = RunLane.objects.get(run=run, deployment_name="careful")
    cases = {
        "failed": RunItem.objects.filter(run=run, status="FAILED"),
        "passed": RunItem.objects.filter(run=run, status="PASSED"),
        "infra_error": RunItem.objects.filter(run=run, status="", last_category="infra_error"),
    }
    for status, expected in cases.items():
        body = owner.get(f"/runs/{run.id}/cases/?status={status}").content.decode()
        assert _ids(body) == sorted(expected.values_list("id", flat=True))[:50], status
    body = owner.get(f"/runs/{run.id}/cases/?deployment={careful.id}&status=failed").content.decode()
    assert _ids(body) == sorted(cases["failed"].filter(lane=careful).values_list("id", flat=True))
    body = owner.get(f"/runs/{run.id}/cases/?q=00001").content.decode()
    assert _ids(body) == sorted(
        RunItem.objects.filter(run=run, case_key__contains="00001").values_list("id", flat=True)
    )
    assert _ids(owner.get(f"/runs/{run.id}/cases/?challenge=nope").content.decode()) == []


def test_a_status_filter_that_lists_nothing_links_to_the_statuses_the_run_has(personas, owner):
    """The overview's "Failed cases" button opened an empty list on a run whose cases all ended
    in infra errors ("No case matches these filters."), with no way on but guessing a filter."""
    broken = seed_run(workspace=personas.workspace, items=4, lanes=1, infra_error_rate=1.0)
    body = owner.get(f"/runs/{broken.id}/cases/?status=failed").content.decode()
    assert "No case matches these filters." in body
    link = f'<a href="/runs/{broken.id}/cases/?status=infra_error">Infra error (4)</a>'
    assert f"This run's cases by status: {link}." in body
    listed = owner.get(f"/runs/{broken.id}/cases/?status=infra_error").content.decode()
    assert len(_ids(listed)) == 4 and "statuses-present" not in listed
    assert login(personas.outsider).get(f"/runs/{broken.id}/cases/?status=failed").status_code == 404


def test_the_case_list_sorts_by_score_with_ungraded_cases_last(run, owner):
    body = owner.get(f"/runs/{run.id}/cases/?sort=score").content.decode()
    ids = _ids(body)
    scores = dict(RunItem.objects.filter(run=run).values_list("id", "score"))
    shown = [scores[i] for i in ids]
    graded = [s for s in shown if s is not None]
    assert graded == sorted(graded) and shown[: len(graded)] == graded


def test_a_foreign_cursor_is_a_clear_400(run, owner):
    response = owner.get(f"/runs/{run.id}/cases/?sort=score&after=bm90LWEtY3Vyc29y")
    assert response.status_code == 400 and "start from the first page" in response.content.decode()


def test_a_case_row_expands_to_its_expectations(run, owner):
    item = a_failed_item(run)
    body = owner.get(f"/runs/{run.id}/cases/{item.id}/expectations/", **HTMX).content.decode()
    assert "<html" not in body and "FAIL" in body and "names-customer" not in body
    assert "contains on final_output" in body


# --- case page and transcript ------------------------------------------------------------------


def test_the_case_page_links_each_expectation_to_its_transcript_anchor(run, owner):
    item = a_failed_item(run)
    body = owner.get(f"/runs/{run.id}/cases/{item.id}/").content.decode()
    assert "FAIL" in body and "query-then-write" in body and "Harbor Tools Ltd" in body
    links = re.findall(rf'href="/runs/{run.id}/cases/{item.id}/transcript/(?:\?at=[\w-]+)?#([\w-]+)"', body)
    assert {"ev-tool_call-0", "ev-final_output", "ev-path-report_2e_json"} <= set(links)
    transcript = owner.get(f"/runs/{run.id}/cases/{item.id}/transcript/").content.decode()
    for anchor in links:
        assert f'id="{anchor}"' in transcript, anchor


def test_the_case_page_shows_the_other_deployments_side_by_side(run, owner):
    item = a_failed_item(run)
    sibling = RunItem.objects.filter(run=run, case_key=item.case_key).exclude(id=item.id).get()
    body = owner.get(f"/runs/{run.id}/cases/{item.id}/").content.decode()
    assert "Same case, other deployments" in body
    assert f'href="/runs/{run.id}/cases/{sibling.id}/"' in body


def test_an_infra_error_case_explains_why_it_has_no_grade(run, owner):
    item = RunItem.objects.filter(run=run, last_category="infra_error").first()
    body = owner.get(f"/runs/{run.id}/cases/{item.id}/").content.decode()
    assert "No grade" in body and "infra_error" in body and "HTTP 503 from agent" in body
    assert owner.get(f"/runs/{run.id}/cases/{item.id}/?format=json").status_code == 404


def test_grading_json_downloads_per_case(run, owner):
    item = a_failed_item(run)
    response = owner.get(f"/runs/{run.id}/cases/{item.id}/?format=json")
    assert response.status_code == 200 and response["Content-Disposition"].startswith("attachment")
    assert response.json()["status"] == "FAILED" and response.json()["case"]["case_key"] == item.case_key


def test_the_case_and_transcript_query_counts_are_pinned(run, owner, django_assert_num_queries):
    item = a_failed_item(run)
    owner.get(f"/runs/{run.id}/cases/{item.id}/")
    with django_assert_num_queries(9):
        owner.get(f"/runs/{run.id}/cases/{item.id}/")
    with django_assert_num_queries(6):
        owner.get(f"/runs/{run.id}/cases/{item.id}/transcript/")


def test_the_transcript_escapes_agent_content_and_copies_as_markdown(run, owner):
    item = a_failed_item(run)
    evil = '<script>alert("x")</script>'
    response = dict(item.evidence["response"])
    response["final_output"] = evil
    response["files"] = {"page.html": f"<b>{evil}</b>"}
    RunItem.objects.filter(id=item.id).update(evidence={"response": response, "timing": {}})
    body = owner.get(f"/runs/{run.id}/cases/{item.id}/transcript/").content.decode()
    assert evil not in body and "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in body
    assert 'id="ev-path-page_2e_html"' in body and 'data-copy-url="' in body
    md = owner.get(f"/runs/{run.id}/cases/{item.id}/transcript/?format=md")
    assert md["Content-Type"].startswith("text/markdown") and evil in md.content.decode()


def test_a_case_without_evidence_says_so(run, owner):
    item = RunItem.objects.filter(run=run, evidence=None).first() or a_failed_item(run)
    RunItem.objects.filter(id=item.id).update(evidence=None)
    body = owner.get(f"/runs/{run.id}/cases/{item.id}/transcript/").content.decode()
    assert "No evidence was recorded" in body


def test_the_overview_says_when_a_run_was_re_scored(run, owner):
    assert 'data-testid="scoring-revision"' not in owner.get(f"/runs/{run.id}/").content.decode()
    Run.objects.filter(id=run.id).update(scoring_revision=3)
    body = owner.get(f"/runs/{run.id}/").content.decode()
    assert 'data-testid="scoring-revision">revision 3 <span class="muted">(re-scored)</span>' in body


def test_a_running_lanes_judge_spend_of_unknown_cost_is_unknown_not_zero(personas):
    from runs.results import lanes_of, leaderboard

    run = seed_run(workspace=personas.workspace, items=8, lanes=2, status="running", done_fraction=0.5)
    unknown, known = RunLane.objects.filter(run=run).order_by("position")
    for lane, cost, unknown_calls in ((unknown, 0.0, 3), (known, 0.02, 1)):
        counters = dict(lane.counters)
        counters["judge"] = {**counters.get("judge", {}), "calls": 3, "cost_unknown": unknown_calls}
        RunLane.objects.filter(pk=lane.pk).update(counters=counters, judge_calls=3, judge_cost_usd=cost)
    rows = {row.lane.pk: row for row in leaderboard(run, lanes_of(run))}
    # Every call of unknown cost: unknown. Some known: the known part (what was spent at least).
    assert rows[unknown.pk].judge_cost_usd is None
    assert rows[known.pk].judge_cost_usd == 0.02


def test_the_polled_progress_also_updates_the_header_status_badge_out_of_band(personas, owner):
    # The header badge stayed "queued" while the polled progress said "running".
    run = seed_run(workspace=personas.workspace, items=4, lanes=1, status="running", done_fraction=0.5)
    page = owner.get(f"/runs/{run.id}/").content.decode()
    assert page.count('id="run-status"') == 1 and "hx-swap-oob" not in page
    live = owner.get(f"/runs/{run.id}/?partial=live&was=running", **HTMX).content.decode()
    assert '<span class="badge st-running" id="run-status" hx-swap-oob="true">running</span>' in live


def test_the_transcript_metrics_read_as_the_other_pages_do(run, owner):
    # The metrics line printed the raw numbers: "cost 0.0022 · ttft 439.0 ms", and "– ms"
    # for a reply without a time to first token.
    item = a_failed_item(run)
    response = dict(item.evidence["response"])
    response["metrics"] = {"input_tokens": 10, "output_tokens": 3, "cost_usd": 0.0022, "ttft_ms": 439.0}
    RunItem.objects.filter(id=item.id).update(evidence={"response": response, "timing": {}})
    body = owner.get(f"/runs/{run.id}/cases/{item.id}/transcript/").content.decode()
    assert "cost $0.0022" in body and "time to first token 439 ms" in body
    response["metrics"] = {"input_tokens": 10}
    RunItem.objects.filter(id=item.id).update(evidence={"response": response, "timing": {}})
    body = owner.get(f"/runs/{run.id}/cases/{item.id}/transcript/").content.decode()
    assert "time to first token – ms" not in body and "time to first token –" in body
