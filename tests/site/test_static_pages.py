"""Site-wide static bits: the favicon is served (no 404 in every page's console)."""

from __future__ import annotations

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
