"""The filters of the case list and the run list after the back button, with JavaScript and
without it: going back to the unfiltered page showed the filter's old choice (the browser
restored the form's controls) over a list that the filter had not narrowed."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.conf import settings
from django.test import Client
from playwright.sync_api import expect

from runs.seeding import seed_run

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture(params=[True, False], ids=["js", "no-js"])
def owner_page(request: Any, personas: Any, chromium: Any, live_server: Any) -> Iterator[Any]:
    context = chromium.new_context(base_url=live_server.url, java_script_enabled=request.param)
    context.set_default_timeout(10_000)
    client = Client()
    client.force_login(personas.owner)
    cookie = client.cookies[settings.SESSION_COOKIE_NAME].value
    context.add_cookies([{"name": settings.SESSION_COOKIE_NAME, "value": cookie, "url": live_server.url}])
    try:
        yield context.new_page()
    finally:
        context.close()


def test_back_to_the_unfiltered_list_shows_no_filter(personas, owner_page):
    page = owner_page
    run = seed_run(workspace=personas.workspace, items=6, lanes=2, name="back")
    page.goto(f"/runs/{run.id}/cases/")
    page.get_by_label("Status").select_option("failed")
    page.get_by_role("button", name="Apply").click()
    page.wait_for_url("**/cases/?status=failed**")
    page.go_back()
    page.wait_for_url(f"**/runs/{run.id}/cases/")
    expect(page.get_by_label("Status")).to_have_value("")

    page.goto("/runs/")
    page.get_by_label("Status").select_option("completed")
    page.get_by_role("button", name="Filter").click()
    page.wait_for_url("**/runs/?*status=completed*")
    page.go_back()
    page.wait_for_url("**/runs/")
    expect(page.get_by_label("Status")).to_have_value("")
