"""Deployment pages in Debian chromium: the Test connection indicator ("testing…") is hidden
unless htmx is making the request, with JavaScript and without it (htmx's own indicator
styles are injected only when its script runs)."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.test import Client
from playwright.sync_api import expect

from runs.services.deployments import deployment_create

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def deployment(personas):
    return deployment_create(
        workspace=personas.workspace, name="agent", kind="hosted_http", url="https://agent.example.com/run"
    ).deployment


def test_the_testing_indicator_is_hidden_without_javascript(personas, chromium, live_server, deployment):
    context = chromium.new_context(base_url=live_server.url, java_script_enabled=False)
    try:
        client = Client()
        client.force_login(personas.owner)
        cookie = client.cookies[settings.SESSION_COOKIE_NAME].value
        context.add_cookies([{"name": settings.SESSION_COOKIE_NAME, "value": cookie, "url": live_server.url}])
        page = context.new_page()
        page.goto(f"/deployments/{deployment.public_id}/")
        expect(page.get_by_role("button", name="Test connection")).to_be_visible()
        expect(page.locator("#test-busy")).to_be_hidden()
    finally:
        context.close()


def test_the_testing_indicator_is_hidden_until_htmx_sends(personas, login, page, deployment):
    login(personas.owner)
    page.goto(f"/deployments/{deployment.public_id}/")
    expect(page.get_by_role("button", name="Test connection")).to_be_visible()
    expect(page.locator("#test-busy")).to_be_hidden()
    assert page.js_errors == []


def test_a_trace_import_form_hides_what_only_calls_use(personas, login, page):
    login(personas.owner)
    page.goto("/deployments/new/")
    credentials = page.get_by_test_id("credentials")
    expect(credentials).to_be_visible()
    page.get_by_label("Kind").select_option("trace_import")
    expect(page.locator("#kind-fields legend")).to_have_text("Trace import")
    expect(credentials).to_be_hidden()
    page.get_by_text("Limits, evidence and headers").click()
    expect(page.get_by_label("Evidence level")).to_be_visible()  # what is stored still applies
    timeout = page.get_by_label("Timeout (seconds)")
    expect(timeout).to_be_attached()  # in the page, not shown
    expect(timeout).to_be_hidden()
    page.get_by_label("Kind").select_option("hosted_http")
    expect(page.locator("#kind-fields legend")).to_have_text("Agent endpoint")
    expect(credentials).to_be_visible()
    expect(timeout).to_be_visible()
    assert page.js_errors == []
