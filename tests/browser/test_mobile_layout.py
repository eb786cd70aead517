"""At a phone's width (375 px) every form fits the window: no field, select or action reaches
past it, so nothing is cut off and the page never scrolls sideways."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.test_long_names import PAST_THE_WINDOW, overflow

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PHONE = {"width": 375, "height": 740}


def test_the_deployment_forms_limits_fit_a_phone(personas, login, page):
    """The limits section is a two-column grid that becomes one column on a phone; its ``1fr``
    column was as wide as the evidence level select's longest option, which pushed the four
    fields 23 px past the window and cut the select's text off."""
    login(personas.owner)
    page.set_viewport_size(PHONE)
    page.goto("/deployments/new/")
    page.get_by_text("Limits, evidence and headers").click()
    expect(page.get_by_label("Evidence level")).to_be_visible()
    assert overflow(page) == 0, page.evaluate(PAST_THE_WINDOW)


def test_the_run_overview_with_long_lane_settings_fits_a_phone(personas, login, page):
    """What each lane ran with (a model name, an endpoint host, a config value: one long word
    each) and the "deployment changed" mark wrap inside the window; so do the upload panel's
    URL and curl command of a trace-import run."""
    from runs.models import Deployment
    from runs.services.deployments import deployment_create, deployment_update
    from tests.runs.runfactory import create_run, publish

    workspace = personas.workspace
    workspace.allow_private_endpoints = True
    workspace.save(update_fields=["allow_private_endpoints"])
    model = "org-" + "m" * 150
    host = "agent-" + "h" * 50 + "." + "example-" + "d" * 60 + ".internal"
    agent = deployment_create(
        workspace=workspace,
        name="D" * 100,
        kind="openai_chat",
        url=f"http://{host}:8080/" + "p" * 200,
        model=model,
        config={"system_prompt": "S" * 300, "temperature": 0.25},
    ).deployment
    uploads = Deployment.objects.create(workspace=workspace, name="U" * 100, kind="trace_import")
    version = publish(workspace, cases=2)
    run = create_run(workspace, version, [agent, uploads])
    deployment_update(deployment=agent, model=model + "-edited")
    login(personas.owner)
    page.set_viewport_size(PHONE)
    page.goto(f"/runs/{run.id}/")
    expect(page.get_by_test_id("lane-settings")).to_contain_text(model[:40])
    expect(page.get_by_test_id("deployment-changed")).to_be_visible()
    expect(page.get_by_test_id("upload-how")).to_be_visible()
    # The message names the first elements past the window outside the tables' scroll boxes.
    assert overflow(page) == 0, page.evaluate(
        """() => [...document.querySelectorAll("body *")]
        .filter((e) => !e.closest(".table-wrap")
            && e.getBoundingClientRect().right > document.documentElement.clientWidth)
        .slice(0, 5).map((e) => `${e.tagName}#${e.id}.${e.className} in ${e.parentElement.tagName}`)"""
    )
