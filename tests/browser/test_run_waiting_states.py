"""What only a browser shows of a run that waits: the no-worker notice arriving with the
progress poll (no reload) and said once by the page's announcer, the run finishing said after
the reload it causes, the summary and a comparison being ready said once (their polls say nothing), the trace-import upload panel's Copy button putting the curl
command on the clipboard (mouse and keyboard), and the admin's workspace slug box reached
and used with the keyboard."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone
from playwright.sync_api import expect

from runs import compare_tasks
from runs.compare_tasks import compute_comparison
from runs.models import Deployment, Run, RunComparison
from runs.result_tasks import compute_result_summary
from runs.seeding import seed_run
from runs.services.deployments import deployment_create
from runs.views.runs import NO_WORKER_AFTER, POLL_SECONDS
from tests.browser.test_keyboard_flows import tab_to
from tests.runs.runfactory import create_run, publish

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# Long enough for two polls of the live progress (every POLL_SECONDS), never waited in full.
POLLED = (POLL_SECONDS * 2 + 5) * 1000


def queued_run(workspace: Any) -> Run:
    workspace.allow_private_endpoints = True
    workspace.save(update_fields=["allow_private_endpoints"])
    agent = deployment_create(
        workspace=workspace, name="agent", kind="openai_chat", url="http://127.0.0.1:9/v1", model="m"
    ).deployment
    return create_run(workspace, publish(workspace, cases=2), [agent])


def trace_run(workspace: Any) -> Run:
    uploads = Deployment.objects.create(workspace=workspace, name="uploads", kind="trace_import")
    return create_run(workspace, publish(workspace, cases=2), [uploads])


# Records, in the page, each text the announcer takes and each swap of a polled fragment (by id).
WATCH_ANNOUNCER = """() => {
  const region = document.getElementById("run-announcer");
  window.announced = [];
  window.swaps = {};
  new MutationObserver(() => window.announced.push(region.textContent))
    .observe(region, { childList: true, characterData: true, subtree: true });
  document.addEventListener("htmx:afterSwap", (event) => {
    const id = event.target.id;
    window.swaps[id] = (window.swaps[id] || 0) + 1;
  });
}"""


def live_regions_in(*ids: str) -> str:
    """Nothing the polls replace is a live region of its own: only the announcer, outside them."""
    return ", ".join(
        f"#{i}[role], #{i}[aria-live], #{i} [role=status], #{i} [role=alert], #{i} [aria-live]" for i in ids
    )


LIVE_REGIONS_IN_SWAPPED = live_regions_in("live", "summary")


def wait_for_polls(page: Any, count: int, target: str = "live") -> None:
    """Until ``count`` more swaps of #target happened (bounded by POLLED per poll)."""
    swaps = f"(window.swaps[{target!r}] || 0)"
    seen = page.evaluate(f"() => {swaps}")
    page.wait_for_function(f"() => {swaps} >= {seen + count}", timeout=POLLED * count)


@pytest.fixture
def no_broker(monkeypatch: Any) -> None:
    """A finished run's page asks for its summary on commit; no worker runs here."""
    from runs import result_tasks

    monkeypatch.setattr(result_tasks.compute_result_summary, "delay", lambda *a: None)


def test_the_no_worker_notice_arrives_with_the_poll_and_is_announced_once(personas, login, page):
    run = queued_run(personas.workspace)
    login(personas.owner)
    page.goto(f"/runs/{run.id}/")
    expect(page.get_by_test_id("live-status")).to_have_text("queued")
    expect(page.get_by_test_id("no-worker")).to_have_count(0)
    announcer = page.get_by_test_id("run-announcer")
    expect(announcer).to_have_text("")
    expect(announcer).to_have_attribute("role", "status")
    expect(announcer).to_have_attribute("aria-live", "polite")
    page.evaluate(WATCH_ANNOUNCER)
    page.evaluate("() => { window.sameDocument = true; }")  # gone if the page reloaded
    # The run has now waited past the threshold: the next poll brings the notice.
    Run.objects.filter(id=run.id).update(queued_at=run.queued_at - NO_WORKER_AFTER - timedelta(seconds=5))
    notice = page.locator("#live").get_by_test_id("no-worker")
    expect(notice).to_be_visible(timeout=POLLED)
    expect(notice).to_contain_text("No worker has picked up this run for 1 minute.")
    wait_for_polls(page, 3)  # the notice shown by each of them
    expect(notice).to_be_visible()
    assert page.evaluate("() => window.announced") == ["No worker has picked up this run."]
    expect(announcer).to_have_text("No worker has picked up this run.")
    assert page.locator(LIVE_REGIONS_IN_SWAPPED).count() == 0
    assert page.evaluate("() => window.sameDocument === true")


def test_what_the_page_shows_on_load_is_not_announced_by_the_polls(personas, login, page):
    run = trace_run(personas.workspace)
    login(personas.viewer)
    page.goto(f"/runs/{run.id}/")
    expect(page.get_by_test_id("awaiting-upload")).to_be_visible()
    page.evaluate(WATCH_ANNOUNCER)
    wait_for_polls(page, 2)
    expect(page.get_by_test_id("awaiting-upload")).to_be_visible()
    assert page.evaluate("() => window.announced") == []
    expect(page.get_by_test_id("run-announcer")).to_have_text("")
    assert page.locator(LIVE_REGIONS_IN_SWAPPED).count() == 0


def test_the_run_finishing_is_announced_after_the_reload(personas, login, page, no_broker):
    run = queued_run(personas.workspace)
    login(personas.owner)
    page.goto(f"/runs/{run.id}/")
    expect(page.get_by_test_id("live-status")).to_have_text("queued")
    page.evaluate("() => { window.sameDocument = true; }")
    Run.objects.filter(id=run.id).update(status="completed", finished_at=timezone.now())
    # The poll that sees the run finished reloads the page (charts, final ranking) ...
    page.wait_for_function("() => window.sameDocument === undefined", timeout=POLLED)
    expect(page.get_by_test_id("live-status")).to_have_text("completed")
    # ... which then says so, in the announcer that was there when it loaded.
    expect(page.get_by_test_id("run-announcer")).to_have_text("Run completed.")
    assert page.locator(LIVE_REGIONS_IN_SWAPPED).count() == 0
    # Opening a finished run announces nothing: the page is read as it is.
    page.goto(f"/runs/{run.id}/")
    expect(page.get_by_test_id("live-status")).to_have_text("completed")
    page.wait_for_timeout(1500)  # past the moment the reloaded page waits before it speaks
    expect(page.get_by_test_id("run-announcer")).to_have_text("")


def test_the_summary_being_ready_is_announced_once(personas, login, page, no_broker):
    """A finished run's distributions and assertion health poll (#summary) until the summary is
    stored: the polls say nothing, the summary arriving is said once."""
    run = seed_run(workspace=personas.workspace, items=4, lanes=2, name="done")
    login(personas.owner)
    page.goto(f"/runs/{run.id}/")
    summary = page.locator("#summary")
    expect(summary).to_contain_text("Computing…")
    page.evaluate(WATCH_ANNOUNCER)
    wait_for_polls(page, 1, "summary")
    assert page.evaluate("() => window.announced") == []
    compute_result_summary(str(run.id))  # the worker's job
    expect(summary.locator("table[aria-labelledby=health-h]")).to_be_visible(timeout=POLLED)
    expect(page.get_by_test_id("run-announcer")).to_have_text("Distributions and assertion health ready.")
    assert page.evaluate("() => window.announced") == ["Distributions and assertion health ready."]
    assert page.locator(LIVE_REGIONS_IN_SWAPPED).count() == 0


def test_the_comparison_arriving_is_announced_once_and_its_polls_say_nothing(
    personas, login, page, monkeypatch
):
    monkeypatch.setattr(compare_tasks.compute_comparison, "delay", lambda *a: None)
    baseline = seed_run(workspace=personas.workspace, items=4, lanes=2, name="monday", seed=1)
    candidate = seed_run(workspace=personas.workspace, items=4, lanes=2, name="tuesday", seed=2)
    login(personas.owner)
    page.goto(f"/runs/compare/?baseline={baseline.id}&candidate={candidate.id}")
    expect(page.get_by_test_id("computing")).to_be_visible()
    announcer = page.get_by_test_id("run-announcer")
    expect(announcer).to_have_text("")
    expect(announcer).to_have_attribute("role", "status")
    expect(announcer).to_have_attribute("aria-live", "polite")
    page.evaluate(WATCH_ANNOUNCER)
    wait_for_polls(page, 2, "compare-result")  # "Computing…" each time
    assert page.evaluate("() => window.announced") == []
    assert page.locator(live_regions_in("compare-result")).count() == 0

    compute_comparison(RunComparison.objects.get(baseline=baseline, candidate=candidate).id)
    expect(page.get_by_test_id("verdict")).to_be_visible(timeout=POLLED)
    expect(announcer).to_have_text("Comparison ready.")
    assert page.evaluate("() => window.announced") == ["Comparison ready."]
    assert page.locator(live_regions_in("compare-result")).count() == 0
    # The result stops the polling; opening it again announces nothing.
    page.reload()
    expect(page.get_by_test_id("verdict")).to_be_visible()
    page.wait_for_timeout(1000)
    expect(announcer).to_have_text("")
    assert page.js_errors == []


def test_the_copy_button_copies_the_upload_command(personas, login, page):
    run = trace_run(personas.workspace)
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    login(personas.editor)
    page.goto(f"/runs/{run.id}/")
    curl = page.locator("#upload-curl").text_content()
    assert curl.startswith('curl --fail-with-body -X POST "http://') and f"/runs/{run.id}/results" in curl
    button = page.get_by_role("button", name="Copy the command")
    button.click()
    expect(page.get_by_role("button", name="Copied")).to_be_visible()
    assert page.evaluate("() => navigator.clipboard.readText()") == curl
    # and with the keyboard: Tab reaches the button, Enter copies
    page.evaluate("() => navigator.clipboard.writeText('')")
    page.goto(f"/runs/{run.id}/")
    tab_to(page, page.get_by_role("button", name="Copy the command"))
    page.keyboard.press("Enter")
    expect(page.get_by_role("button", name="Copied")).to_be_focused()
    assert page.evaluate("() => navigator.clipboard.readText()") == curl


def test_the_admin_slug_filter_with_the_keyboard(personas, login, page):
    queued_run(personas.workspace)
    queued_run(personas.other_workspace)
    login(get_user_model().objects.create_superuser("root", password="pw-root-123"))
    page.goto("/admin/runs/run/")
    expect(page.locator("#result_list tbody tr")).to_have_count(2)
    box = page.get_by_role("searchbox", name="Workspace slug")
    for _ in range(80):  # bounded: the box is a Tab stop of the page
        page.keyboard.press("Tab")
        if box.evaluate("(e) => e === document.activeElement"):
            break
    else:
        raise AssertionError("the slug box is not reachable with Tab")
    page.keyboard.type(personas.workspace.slug)
    page.keyboard.press("Enter")
    page.wait_for_url(f"**workspace__slug={personas.workspace.slug}**")
    expect(page.locator("#result_list tbody tr")).to_have_count(1)
    expect(page.get_by_role("searchbox", name="Workspace slug")).to_have_value(personas.workspace.slug)
