"""The pages work under their Content-Security-Policy in Debian chromium: nothing is refused
(no inline script, no inline handler, the API docs start from files), and the workspace
switcher, which used an inline ``onchange``, still switches on change."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from agentclash_site.workspaces.models import Membership
from packs import services

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _violations(page) -> list[str]:
    found: list[str] = []
    page.on(
        "console",
        lambda message: (
            found.append(message.text)
            if "Content Security Policy" in message.text or "Refused to" in message.text
            else None
        ),
    )
    return found


def test_the_pages_run_under_their_policy(personas, login, page):
    violations = _violations(page)
    login(personas.owner)
    draft = services.draft_create(
        workspace=personas.workspace, user=personas.owner, name="d", bundle_text="pack: {slug: x}\n"
    )
    for url in ("/", "/packs/", "/runs/", "/deployments/", f"/packs/drafts/{draft.public_id}/"):
        page.goto(url)
        page.wait_for_load_state("networkidle")
    page.goto("/api/v1/docs/")
    expect(page.locator(".swagger-ui .opblock").first).to_be_visible(timeout=15_000)
    page.goto("/api/v1/redoc/")
    expect(page.get_by_text("API docs by Redocly")).to_be_visible(timeout=15_000)
    assert violations == []
    assert page.js_errors == []


def test_the_workspace_switcher_switches_on_change(personas, login, page):
    Membership.objects.create(workspace=personas.other_workspace, user=personas.owner, role="owner")
    violations = _violations(page)
    login(personas.owner)
    page.goto("/packs/")
    expect(page.locator("#ws-switch option:checked")).to_have_text("Acme")
    with page.expect_navigation():  # the form is submitted by app.js, not by a button
        page.select_option("#ws-switch", "globex")
    expect(page.locator("#ws-switch option:checked")).to_have_text("Globex")
    assert violations == []
