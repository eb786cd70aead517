"""Keyboard focus after an htmx action in Debian chromium: "Test connection" is disabled while
its request runs (hx-disabled-elt), and a disabled button loses the focus to the page's body,
where it stayed once the result came: a keyboard user had to find their way back from the top."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from runs.services.deployments import deployment_create
from tests.fakes.agent_server import FakeAgent

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_test_connection_keeps_the_focus_on_its_button(personas, login, page):
    ws = personas.workspace
    ws.allow_private_endpoints = True
    ws.save(update_fields=["allow_private_endpoints"])
    with FakeAgent() as agent:
        deployment = deployment_create(
            workspace=ws, name="agent", kind="hosted_http", url=agent.url
        ).deployment
        login(personas.owner)
        page.goto(f"/deployments/{deployment.public_id}/")
        button = page.get_by_role("button", name="Test connection")
        button.focus()
        page.keyboard.press("Enter")
        expect(page.locator("#test-result")).to_contain_text("ok:")
        expect(button).to_be_enabled()
        expect(button).to_be_focused()
        agent.wait_idle(timeout=5)
    assert agent.calls == 1
    assert page.js_errors == []
