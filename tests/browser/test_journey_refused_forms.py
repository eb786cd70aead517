"""A refused form in Debian chromium: the page opens with the keyboard focus on the first field
named in an error (it was on the page's top, the error left to be found), the error says the
way out, and what was typed stays."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from runs.models import Run
from runs.services.deployments import deployment_create
from tests.runs.runfactory import publish

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_duplicate_deployment_name_is_focused_and_says_the_way_out(personas, login, page):
    deployment_create(workspace=personas.workspace, name="agent", kind="trace_import")
    login(personas.owner)
    page.goto("/deployments/new/")
    page.get_by_label("Name").fill("agent")
    page.get_by_label("Endpoint URL").fill("https://agent.example.com/run")
    page.get_by_role("button", name="Create deployment").click()
    name = page.get_by_label("Name")
    expect(name).to_be_focused()
    expect(name).to_have_value("agent")
    expect(page.get_by_label("Endpoint URL")).to_have_value("https://agent.example.com/run")
    expect(page.locator("#id_name_error")).to_have_text(
        "A deployment named 'agent' already exists in this workspace: choose another name, or open"
        " that deployment and edit it."
    )
    assert page.js_errors == []


def test_too_many_repetitions_are_focused_and_the_choices_stay(personas, login, page):
    publish(personas.workspace, slug="echo", sets=2)
    for name in ("one", "two"):
        deployment_create(workspace=personas.workspace, name=name, kind="trace_import")
    login(personas.owner)
    page.goto("/runs/new/")
    page.get_by_label("Input set").select_option("set1")
    page.get_by_label("one").check()
    page.get_by_label("two").check()
    page.get_by_label("Repetitions").fill("11")
    page.get_by_role("button", name="Start the run").click()
    repetitions = page.get_by_label("Repetitions")
    expect(repetitions).to_be_focused()
    expect(repetitions).to_have_value("11")
    expect(page.locator("#id_repetitions_error")).to_contain_text(
        "Repetitions must be a whole number from 1 to 10"
    )
    expect(page.get_by_label("Input set")).to_have_value("set1")
    expect(page.get_by_label("one")).to_be_checked()
    expect(page.get_by_label("two")).to_be_checked()
    assert Run.objects.count() == 0
    assert page.js_errors == []
