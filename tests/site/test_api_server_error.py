"""An unexpected exception under /api/v1/ answers the error body of spec/interfaces.md §7
(``internal_error``, 500), not the HTML page a browser gets; the traceback is logged, never
sent."""

from __future__ import annotations

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db


class Boom(RuntimeError):
    pass


@pytest.fixture
def broken(monkeypatch):
    def explode(*args, **kwargs):
        raise Boom("secret detail /srv/agentclash/settings.py")

    # one API view and one page, each failing with a bug
    monkeypatch.setattr("agentclash_site.api.HealthApi.get", explode)
    monkeypatch.setattr("agentclash_site.api.WorkspaceListApi.get", explode)
    monkeypatch.setattr("django.contrib.auth.views.LoginView.get", explode)


def test_an_api_route_that_fails_answers_the_json_error_body(broken, settings, caplog):
    settings.DEBUG = False
    client = Client(raise_request_exception=False)
    response = client.get("/api/v1/health")
    assert response.status_code == 500
    assert response["Content-Type"] == "application/json"
    error = response.json()["error"]
    assert error["code"] == "internal_error"
    assert "secret detail" not in response.content.decode()
    assert any("Boom" in (r.exc_text or "") or r.exc_info for r in caplog.records)


def test_an_authenticated_api_route_that_fails_answers_the_json_error_body(broken, personas, settings):
    settings.DEBUG = False
    client = personas.api(personas.owner)
    client.raise_request_exception = False
    response = client.get("/api/v1/workspaces")
    assert response.status_code == 500
    assert response.json()["error"]["code"] == "internal_error"


def test_a_page_that_fails_still_answers_the_html_error_page(broken, settings):
    settings.DEBUG = False
    client = Client(raise_request_exception=False)
    response = client.get("/login/")
    assert response.status_code == 500
    assert response["Content-Type"].startswith("text/html")


def test_a_refused_host_under_the_api_answers_the_json_error_body(settings):
    # Django's 400 for a Host outside ALLOWED_HOSTS was its HTML "Bad Request (400)" page.
    settings.DEBUG = False
    response = Client(HTTP_HOST="elsewhere.example").get("/api/v1/health")
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "bad_request" and "ALLOWED_HOSTS" in error["message"]
    page = Client(HTTP_HOST="elsewhere.example").get("/login/")
    assert page.status_code == 400 and page["Content-Type"].startswith("text/html")
