"""The two busiest flows with the keyboard alone, in Debian chromium: start a run from the
new-run form, and open a failed case from a run's overview and follow its evidence to the
transcript. Every stop on the way shows a focus ring."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import expect

import runs.services.runs as run_services
from runs import result_tasks
from runs.models import Run
from runs.result_tasks import compute_result_summary
from runs.seeding import seed_run

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

RING = """(e) => {
    const style = getComputedStyle(e);
    return style.outlineStyle !== "none" && parseFloat(style.outlineWidth) >= 2;
}"""


def tab_to(page: Any, target: Any, *, limit: int = 60) -> None:
    """Press Tab until ``target`` (a locator) has the focus; each element passed on the way
    must show a focus ring (a keyboard user has to see where they are). Waits for the page's
    load first: its text can be in the DOM while the stylesheet is still on its way, and then
    the browser's own 1 px ring is what a Tab shows (it failed so under load, 1 run of 3)."""
    page.wait_for_load_state("load")
    for _ in range(limit):
        page.keyboard.press("Tab")
        focused = page.locator("*:focus")
        assert focused.evaluate(RING), f"no visible focus on {focused.evaluate('e => e.outerHTML')[:200]}"
        if target.evaluate("(e) => e === document.activeElement"):
            return
    raise AssertionError(f"{target} not reached in {limit} Tab presses")


def skip_to_content(page: Any) -> None:
    """The page's first Tab stop, "Skip to content": past the navigation."""
    page.keyboard.press("Tab")
    expect(page.get_by_role("link", name="Skip to content")).to_be_focused()
    page.keyboard.press("Enter")


def test_start_a_run_from_the_new_run_form_with_the_keyboard(personas, login, page, monkeypatch):
    monkeypatch.setattr(run_services, "enqueue_run", lambda *a, **k: None)  # no worker here
    seed_run(workspace=personas.workspace, items=2, lanes=2, name="earlier")  # a version, deployments
    login(personas.owner)
    page.goto("/runs/")
    tab_to(page, page.get_by_role("link", name="New run"))
    page.keyboard.press("Enter")
    page.wait_for_url("**/runs/new/")
    skip_to_content(page)
    tab_to(page, page.get_by_label("Pack", exact=True), limit=2)  # after the breadcrumb
    page.keyboard.press("Tab")  # the pack is preselected: on to its versions
    expect(page.get_by_label("Pack version")).to_be_focused()
    page.keyboard.press("Tab")
    expect(page.get_by_label("Input set")).to_be_focused()
    page.keyboard.press("Tab")
    first = page.locator("input[name=deployments]").first
    expect(first).to_be_focused()
    page.keyboard.press("Space")
    expect(first).to_be_checked()
    # past the second deployment and the field for deployments beyond the listed ones
    tab_to(page, page.get_by_label("Repetitions"), limit=3)
    page.keyboard.press("ArrowUp")
    expect(page.get_by_label("Repetitions")).to_have_value("2")
    page.keyboard.press("Tab")
    expect(page.get_by_label("Name")).to_be_focused()
    page.keyboard.type("by keyboard")
    page.keyboard.press("Enter")  # submits the form
    expect(page.get_by_role("heading", level=1)).to_contain_text("by keyboard")
    run = Run.objects.get(name="by keyboard")
    assert urlsplit(page.url).path == f"/runs/{run.id}/"  # "#main" stays from the skip link
    assert run.lanes.count() == 1 and run.repetitions == 2
    assert page.js_errors == []


def test_open_a_failed_case_from_the_overview_and_read_its_evidence_with_the_keyboard(
    personas, login, page, monkeypatch
):
    monkeypatch.setattr(result_tasks.compute_result_summary, "delay", lambda *a: None)
    run = seed_run(workspace=personas.workspace, items=12, lanes=2, name="reviewed")
    compute_result_summary(str(run.id))
    login(personas.viewer)
    page.goto(f"/runs/{run.id}/")
    tab_to(page, page.get_by_role("link", name="Failed cases"))
    page.keyboard.press("Enter")
    page.wait_for_url("**/cases/?status=failed")
    skip_to_content(page)
    tab_to(page, page.locator("table.cases tbody tr[id^=item-] td:first-child a").first)
    page.keyboard.press("Enter")
    expect(page.locator('[data-testid="case-status"]')).to_have_text("FAILED")
    evidence = page.locator(".expectation.bad pre.evidence").first
    expect(evidence).to_be_visible()

    # the first cited evidence of the failed expectation, then its transcript item
    tab_to(page, page.locator(".expectation.bad a.ref", has_text="final_output").first)
    page.keyboard.press("Enter")
    page.wait_for_url("**/transcript/#ev-final_output")
    cited = page.locator("#ev-final_output")
    expect(cited).to_be_in_viewport()
    # the keyboard goes on from the cited item, not from the top of the page
    page.keyboard.press("Tab")
    assert cited.evaluate(
        "(li) => li.contains(document.activeElement)"
        " || !!(li.compareDocumentPosition(document.activeElement) & Node.DOCUMENT_POSITION_FOLLOWING)"
    )
    assert page.js_errors == []
