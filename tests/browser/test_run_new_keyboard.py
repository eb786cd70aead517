"""The new-run form in Debian chromium, with the keyboard alone: the pack is typed and picked
from its suggestions, which loads that pack's versions (and a version's input sets); a
deployment is ticked and another typed and picked by name; the run starts. Enter in a name
field takes the suggestion's value without sending the form."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

import runs.forms
import runs.services.runs
from packs.models import PackVersion
from runs.models import Run
from tests.runs.runfactory import publish
from tests.workspace_rows import bulk_deployments

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_run_is_started_choosing_pack_version_and_deployments_with_the_keyboard(
    personas, login, page, monkeypatch
):
    # No worker here: the run is only created (trace_import lanes wait for results anyway).
    monkeypatch.setattr(runs.services.runs, "enqueue_run", lambda *a, **k: None)
    monkeypatch.setattr(runs.forms, "DEPLOYMENTS_LISTED", 2)
    ws = personas.workspace
    publish(ws, slug="alpha")
    publish(ws, slug="beta", sets=1, number=1)
    publish(ws, slug="beta", sets=2, number=2)
    bulk_deployments(ws, ["d-a", "d-b", "zeta-agent"])
    login(personas.owner)
    page.goto("/runs/new/")

    pack = page.get_by_label("Pack", exact=True)
    expect(pack).to_have_value("alpha")  # the first pack, preselected
    pack.focus()
    page.keyboard.press("Control+A")
    page.keyboard.type("be")
    beta = page.get_by_role("button", name="beta")
    expect(beta).to_be_visible()
    expect(page.locator("#id_pack-suggestions-status")).to_have_text(re.compile("1 pack matching 'be'"))
    page.keyboard.press("ArrowDown")
    expect(beta).to_be_focused()
    page.keyboard.press("Enter")
    expect(pack).to_be_focused()
    expect(pack).to_have_value("beta")
    expect(beta).to_have_count(0)

    version = page.get_by_label("Pack version")
    expect(version.locator("option")).to_have_text(["v2", "v1"])
    expect(page.get_by_label("Input set").locator("option")).to_have_count(2)
    page.keyboard.press("Tab")
    expect(version).to_be_focused()
    page.keyboard.press("ArrowDown")  # v1, with its one set
    expect(version).to_have_value(str(PackVersion.objects.get(pack__slug="beta", number=1).id))
    expect(page.get_by_label("Input set").locator("option")).to_have_count(1)

    page.keyboard.press("Tab")
    expect(page.get_by_label("Input set")).to_be_focused()
    page.keyboard.press("Tab")
    expect(page.get_by_label("d-a")).to_be_focused()
    page.keyboard.press("Space")
    expect(page.get_by_label("d-a")).to_be_checked()
    page.keyboard.press("Tab")
    page.keyboard.press("Tab")
    names = page.get_by_label("Other deployments, by name")
    expect(names).to_be_focused()
    page.keyboard.type("zet")
    zeta = page.get_by_role("button", name="zeta-agent")
    status = page.locator("#id_deployment_names-suggestions-status")
    expect(status).to_have_text(re.compile("1 deployment matching 'zet'"))
    expect(zeta).to_be_visible()
    page.keyboard.press("Escape")  # nothing picked: the list closes, the focus stays
    expect(zeta).to_have_count(0)
    expect(names).to_be_focused()
    page.keyboard.type("a")
    expect(zeta).to_be_visible()
    page.keyboard.press("ArrowDown")
    page.keyboard.press("Enter")
    expect(names).to_have_value("zeta-agent, ")
    expect(names).to_be_focused()
    page.keyboard.press("Enter")  # takes the value; the form is not sent
    expect(page).to_have_url(re.compile(r"/runs/new/$"))

    page.keyboard.press("Tab")
    expect(page.get_by_label("Repetitions")).to_be_focused()
    page.keyboard.press("Tab")
    page.keyboard.type("by keyboard")
    page.keyboard.press("Enter")
    expect(page).to_have_url(re.compile(r"/runs/[0-9a-f-]{36}/$"))
    run = Run.objects.get(name="by keyboard")
    assert (run.pack_version.pack.slug, run.pack_version.number) == ("beta", 1)
    assert [lane.deployment_name for lane in run.lanes.order_by("position")] == ["d-a", "zeta-agent"]


def test_a_slug_typed_whole_loads_its_versions_when_the_focus_leaves_the_field(personas, login, page):
    publish(personas.workspace, slug="alpha")
    publish(personas.workspace, slug="beta", sets=2, number=3)
    login(personas.owner)
    page.goto("/runs/new/")
    pack = page.get_by_label("Pack", exact=True)
    pack.focus()
    page.keyboard.press("Control+A")
    page.keyboard.type("beta")
    expect(page.get_by_role("button", name="beta")).to_be_visible()
    page.keyboard.press("Tab")  # into the suggestions: nothing is loaded for a half-typed name
    expect(page.get_by_role("button", name="beta")).to_be_focused()
    page.keyboard.press("Tab")  # out of the field and its list
    expect(page.get_by_label("Pack version").locator("option")).to_have_text(["v3"])
    expect(page.get_by_label("Pack version")).to_be_focused()
    page.keyboard.press("Shift+Tab")
    page.keyboard.press("Shift+Tab")
    expect(pack).to_be_focused()
    page.keyboard.press("Control+A")
    page.keyboard.type("nope")
    page.keyboard.press("Enter")
    expect(page.get_by_role("alert")).to_have_text(re.compile("No pack named “nope” in this workspace"))
    expect(page).to_have_url(re.compile(r"/runs/new/$"))
