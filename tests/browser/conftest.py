"""Shared browser fixtures: Django's live server, one Debian chromium for the browser tests, and a
logged-in page. Tests using them are marked ``@pytest.mark.browser``.

Never downloads a browser: Playwright launches the system ``chromium``. Every request the
page makes to anything but the live server is aborted, so the tests stay on loopback.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest
from django.conf import settings
from django.test import Client

from tests.browser import console_errors

CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking"]
DEFAULT_TIMEOUT_MS = 10_000
ASYNC_UNSAFE = "DJANGO_ALLOW_ASYNC_UNSAFE"


@pytest.fixture(scope="package")
def chromium() -> Iterator[Any]:
    """One headless Debian chromium for all the browser tests (they run together, as this
    package), stopped before any other test runs."""
    executable = shutil.which("chromium")
    if executable is None:
        pytest.skip("Debian's chromium is not installed (make test installs it)")
    from playwright.sync_api import sync_playwright

    # Playwright's sync API keeps an event loop on this thread while it runs, and Django
    # refuses ORM calls next to a running loop; the tests' own ORM calls are plain
    # synchronous ones. Allowed only while the browser runs, so no other test (or child
    # process it starts) inherits the switch.
    previous = os.environ.get(ASYNC_UNSAFE)
    os.environ[ASYNC_UNSAFE] = "true"
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=executable, args=CHROMIUM_ARGS, headless=True
            )
            try:
                yield browser
            finally:
                browser.close()
    finally:
        if previous is None:
            os.environ.pop(ASYNC_UNSAFE, None)
        else:
            os.environ[ASYNC_UNSAFE] = previous


@pytest.fixture
def page(chromium: Any, live_server: Any) -> Iterator[Any]:
    """A fresh browser context and page whose relative URLs go to the live server."""
    allowed = urlsplit(live_server.url).netloc
    context = chromium.new_context(base_url=live_server.url, viewport={"width": 1280, "height": 900})
    context.set_default_timeout(DEFAULT_TIMEOUT_MS)

    def only_the_live_server(route: Any) -> None:
        url = urlsplit(route.request.url)
        if url.scheme in ("data", "blob") or url.netloc == allowed:
            route.continue_()
        else:
            route.abort()

    context.route("**/*", only_the_live_server)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.js_errors = errors  # type: ignore[attr-defined]
    page.console_errors = console_errors(page)  # type: ignore[attr-defined]
    try:
        yield page
    finally:
        context.close()
    # Every page a browser test drove logged no script error (checked after the test's own
    # assertions, so a test's failure is reported as itself).
    assert page.console_errors == [], page.console_errors


@pytest.fixture
def login(page: Any, live_server: Any) -> Callable[[Any], Any]:
    """``login(user)`` puts a session cookie for ``user`` into the page's context."""

    def _login(user: Any) -> Any:
        client = Client()
        client.force_login(user)
        cookie = client.cookies[settings.SESSION_COOKIE_NAME]
        page.context.add_cookies(
            [{"name": settings.SESSION_COOKIE_NAME, "value": cookie.value, "url": live_server.url}]
        )
        return page

    return _login
