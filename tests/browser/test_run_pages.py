"""The result pages in Debian chromium: a run's progress bar finishes, a failed case opens,
an evidence link lands on its transcript item, two runs compare, the CSV downloads.

The README screenshots come from the demo run (scripts/screenshots.py), not from here.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import expect

from runs import compare_tasks, result_tasks
from runs.compare_tasks import compute_comparison
from runs.models import ItemState, Run, RunComparison, RunItem, RunLane, RunStatus
from runs.result_tasks import compute_result_summary
from runs.seeding import seed_run

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def no_broker(monkeypatch):
    """The live server's requests enqueue tasks on commit; no worker runs here, so record
    them instead of sending them to a broker (the test runs the task functions itself)."""
    sent: list[tuple[str, tuple]] = []
    monkeypatch.setattr(compare_tasks.compute_comparison, "delay", lambda *a: sent.append(("compare", a)))
    monkeypatch.setattr(result_tasks.compute_result_summary, "delay", lambda *a: sent.append(("summary", a)))
    return sent


def finish(run: Run) -> None:
    """What the workers do when the last items land: items done, lane and run counters."""
    for lane in RunLane.objects.filter(run=run):
        pending = RunItem.objects.filter(lane=lane, state=ItemState.PENDING)
        n = pending.update(state=ItemState.DONE, last_category="infra_error", attempt_count=3)
        RunLane.objects.filter(id=lane.id).update(
            pending=0, infra_error=lane.infra_error + n, status="completed"
        )
    Run.objects.filter(id=run.id).update(status=RunStatus.COMPLETED, items_open=0)


def test_the_progress_bar_finishes_then_a_failed_case_links_into_its_transcript(
    personas, login, page, no_broker
):
    run = seed_run(
        workspace=personas.workspace, items=40, lanes=2, status="running", done_fraction=0.5, name="live"
    )
    login(personas.owner)
    page.goto(f"/runs/{run.id}/")
    expect(page.locator('[data-testid="live-status"]')).to_have_text("running")
    expect(page.locator('[data-testid="done"]')).to_have_text("20")

    finish(run)  # the htmx poll notices, and the page reloads once with the final figures
    expect(page.locator('[data-testid="live-status"]')).to_have_text("completed", timeout=15_000)
    expect(page.locator("#run-status")).to_have_text("completed")
    expect(page.locator('[data-testid="done"]')).to_have_text("40")
    assert ("summary", (str(run.id),)) in no_broker
    # The table's last row draws no rule under its row header (the cells had none, the `th`
    # kept one: a stray line under the leaderboard's deployment column).
    last_row = page.locator("table.leaderboard tbody tr").last
    for cell in (last_row.locator("th").first, last_row.locator("td").first):
        assert cell.evaluate("e => getComputedStyle(e).borderBottomWidth") == "0px"

    # A failed case, from the case list filtered to failures.
    page.get_by_role("link", name="Failed cases").click()
    first = page.locator("table.cases tbody tr[id^=item-] a").first
    first.click()
    expect(page.locator('[data-testid="case-status"]')).to_have_text("FAILED")
    expect(page.locator(".expectation.bad").first).to_be_visible()

    # Its evidence link lands on the cited transcript item.
    page.locator("a.ref", has_text="final_output").first.click()
    page.wait_for_url("**/transcript/#ev-final_output")
    target = page.locator("#ev-final_output")
    expect(target).to_be_visible()
    expect(target).to_contain_text("Final output")
    assert page.evaluate("document.querySelector(':target').id") == "ev-final_output"
    assert page.js_errors == []


def test_compare_two_runs_and_download_the_csv(personas, login, page, no_broker):
    base = seed_run(workspace=personas.workspace, items=30, lanes=2, name="monday", seed=1)
    cand = seed_run(
        workspace=personas.workspace, items=30, lanes=2, name="tuesday", seed=2, pass_rates=(0.3, 0.9)
    )
    for run in (base, cand):
        compute_result_summary(str(run.id))
    login(personas.owner)
    page.goto("/runs/")
    page.get_by_label("Compare monday").check()
    page.get_by_label("Compare tuesday").check()
    page.get_by_role("button", name="Compare the two selected runs").click()
    expect(page.locator('[data-testid="computing"]')).to_be_visible()

    compute_comparison(RunComparison.objects.get(baseline=base, candidate=cand).id)  # the worker's job
    verdict = page.locator('[data-testid="verdict"]')
    expect(verdict).to_be_visible(timeout=15_000)
    expect(verdict).to_have_text(RunComparison.objects.get().result["verdict"])
    page.get_by_role("link", name="regression").first.click()
    changes = page.locator("table.cases .badge[class*=change-]")
    assert changes.count() > 0
    assert set(changes.all_text_contents()) == {"regression"}

    page.goto(f"/runs/{cand.id}/")
    with page.expect_download() as info:
        page.get_by_role("link", name="CSV").click()
    download = info.value
    raw = Path(download.path()).read_bytes()
    assert raw.startswith(b"\xef\xbb\xbf")  # the page's CSV opens in Excel as UTF-8 (runs/exports.py)
    header, *rows = raw.decode("utf-8-sig").strip().splitlines()
    assert header.startswith("deployment,challenge_key,case_key")
    assert len(rows) == RunItem.objects.filter(run=cand).count()

    failed = RunItem.objects.filter(run=cand, status="FAILED").order_by("id").first()
    page.goto(f"/runs/{cand.id}/cases/{failed.id}/")
    expect(page.locator('[data-testid="case-status"]')).to_have_text("FAILED")
    assert page.js_errors == []


def test_the_header_badge_follows_the_live_status_and_cancel_asks_first(personas, login, page, no_broker):
    # The header badge stayed "queued" while the polled badge said "running"; and the run
    # page had no Cancel button.
    run = seed_run(workspace=personas.workspace, items=8, lanes=1, status="queued", done_fraction=0)
    login(personas.owner)
    page.goto(f"/runs/{run.id}/")
    expect(page.locator("#run-status")).to_have_text("queued")
    Run.objects.filter(id=run.id).update(status=RunStatus.RUNNING)
    expect(page.locator('[data-testid="live-status"]')).to_have_text("running", timeout=15_000)
    expect(page.locator("#run-status")).to_have_text("running")

    cancel = page.get_by_role("link", name="Cancel run")
    page.once("dialog", lambda dialog: dialog.dismiss())
    cancel.click()
    expect(page.locator("#run-status")).to_have_text("running")
    assert Run.objects.get(id=run.id).status == RunStatus.RUNNING

    page.once("dialog", lambda dialog: dialog.accept())
    cancel.click()
    expect(page.locator(".messages")).to_contain_text("Run cancelled")
    expect(page.locator("#run-status")).to_have_text("cancelled")
    expect(page.get_by_role("link", name="Cancel run")).to_have_count(0)
    assert page.url.endswith(f"/runs/{run.id}/")
    assert page.js_errors == []


def test_older_runs_moves_the_keyboard_focus_to_the_first_loaded_run(personas, login, page, monkeypatch):
    from runs.views import runs as run_views

    monkeypatch.setattr(run_views, "RUN_PAGE", 2)
    for i in range(3):  # created in order: run-0 is the oldest, alone on the second page
        seed_run(workspace=personas.workspace, items=1, lanes=1, name=f"run-{i}")
    login(personas.viewer)
    page.goto("/runs/")
    older = page.get_by_role("link", name="Older runs")
    older.focus()
    page.keyboard.press("Enter")
    expect(page.get_by_role("link", name="run-0")).to_be_visible()
    expect(older).to_have_count(0)
    expect(page.get_by_role("link", name="run-0")).to_be_focused()
    assert page.js_errors == []


def test_more_rows_on_the_case_list_and_the_grid_move_the_focus_to_the_first_loaded_row(
    personas, login, page, monkeypatch
):
    """ "Next N cases" and "Show more rows" replaced the focused link with the loaded rows, so
    keyboard focus fell back to the page's start, as "Older runs" did."""
    import runs.results

    monkeypatch.setattr(runs.results, "CASE_PAGE", 2)
    monkeypatch.setattr(runs.results, "GRID_PAGE", 2)
    run = seed_run(workspace=personas.workspace, items=3, lanes=1, name="paged")
    login(personas.viewer)
    page.goto(f"/runs/{run.id}/cases/")
    more = page.get_by_role("link", name="Next 2 cases")
    more.focus()
    page.keyboard.press("Enter")
    expect(more).to_have_count(0)
    expect(page.locator("#case-rows tr[id^=item-] a[autofocus]")).to_be_focused()
    page.goto(f"/runs/{run.id}/")
    grid_more = page.get_by_role("link", name="Show more rows")
    grid_more.focus()
    page.keyboard.press("Enter")
    expect(grid_more).to_have_count(0)
    expect(page.locator("#grid-body th[autofocus]")).to_be_focused()
    assert page.js_errors == []


def test_a_long_transcript_loads_more_items_in_place_and_copies_its_markdown(
    personas, login, page, live_server
):
    # The transcript rendered every item of a long conversation and embedded its Markdown
    # for the Copy button; now "N more items" loads the next ones in place (htmx) and Copy
    # fetches the Markdown download.
    run = seed_run(workspace=personas.workspace, items=2, lanes=1, name="long")
    item = RunItem.objects.filter(run=run).exclude(evidence=None).order_by("id").first()
    response = dict(item.evidence["response"])
    response["messages"] = [
        {"role": ("user", "assistant")[i % 2], "content": f"message {i}"} for i in range(300)
    ]
    response["tool_calls"] = [{"name": "search", "args": {"q": f"query {i}"}} for i in range(700)]
    RunItem.objects.filter(id=item.id).update(evidence={"response": response, "timing": {}})
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=live_server.url)
    login(personas.owner)
    page.goto(f"/runs/{run.id}/cases/{item.id}/transcript/")
    items = page.locator("ol.transcript > li.t-message, ol.transcript > li.t-tool_call")
    expect(items).to_have_count(100 + 10)
    page.get_by_role("link", name="890 more items: show up to 200").click()
    expect(items).to_have_count(100 + 200 + 10)
    expect(page.get_by_role("link", name="690 more items: show up to 200")).to_be_visible()

    copy = page.locator('[data-testid="copy-markdown"]')
    expect(copy).to_have_text("Copy as Markdown")
    copy.click()
    expect(copy).to_have_text("Copied")
    copied = page.evaluate("navigator.clipboard.readText()")
    assert "`tool_call:699`" in copied and "`message:299`" in copied
    assert page.js_errors == []


def test_a_bare_anchor_to_a_hidden_transcript_item_opens_the_window_holding_it(
    personas, login, page, live_server
):
    # A link like transcript/#ev-tool_call-500 (a bookmark from before the transcript was
    # paged) opened the first page, which leaves that item out: the server never sees the
    # fragment. The page now asks for the window holding it (?at=) and lands on the item.
    run = seed_run(workspace=personas.workspace, items=2, lanes=1, name="anchored")
    item = RunItem.objects.filter(run=run).exclude(evidence=None).order_by("id").first()
    response = dict(item.evidence["response"])
    response["tool_calls"] = [{"name": "search", "args": {"q": f"query {i}"}} for i in range(700)]
    RunItem.objects.filter(id=item.id).update(evidence={"response": response, "timing": {}})
    login(personas.owner)
    page.goto(f"/runs/{run.id}/cases/{item.id}/transcript/#ev-tool_call-500")
    expect(page.locator("#ev-tool_call-500")).to_be_attached()
    assert "at=ev-tool_call-500" in page.url and page.url.endswith("#ev-tool_call-500")
    # an item that does not exist leaves the page where it is (no reload loop)
    page.goto(f"/runs/{run.id}/cases/{item.id}/transcript/?at=ev-tool_call-9999#ev-tool_call-9999")
    expect(page.locator("ol.transcript")).to_be_attached()
    assert page.url.endswith("?at=ev-tool_call-9999#ev-tool_call-9999")
    assert page.js_errors == []
