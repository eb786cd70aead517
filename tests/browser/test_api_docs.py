"""The API docs in Debian chromium load nothing from outside the server: the vendored Redoc
bundle's Redocly logo (https://cdn.redoc.ly/redoc/logo-mini.svg) is pointed at our icon."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest
from playwright.sync_api import expect

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_redoc_requests_nothing_outside_the_server(personas, login, page, live_server):
    requested: list[str] = []
    page.on("request", lambda request: requested.append(request.url))
    login(personas.owner)
    page.goto("/api/v1/redoc/")
    expect(page.get_by_text("API docs by Redocly")).to_be_visible(timeout=15_000)
    expect(page.locator('img[alt="redocly logo"]')).to_have_attribute("src", "/static/favicon.svg")
    here = urlsplit(live_server.url).netloc
    outside = [
        url for url in requested if urlsplit(url).scheme in ("http", "https") and urlsplit(url).netloc != here
    ]
    assert outside == []
    assert page.js_errors == []
