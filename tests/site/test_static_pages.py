"""Site-wide static bits: the favicon is served (no 404 in every page's console); the Redoc
page loads nothing from a CDN."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.contrib.staticfiles import finders
from django.test import Client

pytestmark = pytest.mark.django_db


def test_favicon_ico_redirects_to_the_static_icon():
    response = Client().get("/favicon.ico")
    assert response.status_code == 301 and response["Location"] == "/static/favicon.svg"
    assert finders.find("favicon.svg")


def test_every_page_links_the_icon():
    body = Client().get("/login/").content.decode()
    assert '<link rel="icon" href="/static/favicon.svg" type="image/svg+xml">' in body


def test_the_redoc_page_and_its_config_name_no_outside_url(personas):
    # The vendored bundle's Redocly logo came from https://cdn.redoc.ly: the page now loads
    # redoc-local.js first (which points it at our icon) and forbids outside images.
    client = Client()
    client.force_login(personas.owner)
    page = client.get("/api/v1/redoc/").content.decode()
    assert re.findall(r"(?:https?:)?//[\w.-]+", page) == []
    assert page.index("js/redoc-local.js") < page.index("redoc.standalone.js")
    assert "img-src 'self' data: blob:" in page
    script = (Path(finders.find("js/redoc-local.js"))).read_text()
    assert "https://cdn.redoc.ly/" in script and "setAttribute" in script
