"""An API body over DATA_UPLOAD_MAX_MEMORY_SIZE is a JSON 413 ``payload_too_large``: Django's
``RequestDataTooBig``, raised when DRF reads a JSON or form body, went past the API's error
handler and answered Django's HTML 400 page (no error body, no code)."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.django_db

LIMIT = 10_000


@pytest.fixture
def small_limit(settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = LIMIT


def _json_body(size: int) -> bytes:
    body = json.dumps({"name": "x" * size}).encode()
    assert len(body) > size
    return body


@pytest.mark.parametrize(
    ("method", "url"),
    [
        ("post", "/api/v1/workspaces/acme/runs"),
        ("post", "/api/v1/workspaces/acme/drafts"),  # the drafts' own JSON parser
        ("post", "/api/v1/workspaces/acme/deployments"),  # the default parsers
        ("patch", "/api/v1/workspaces/acme"),
    ],
)
def test_a_json_body_over_the_limit_is_413(personas, small_limit, method, url):
    api = personas.api(personas.owner)
    response = getattr(api, method)(url, _json_body(LIMIT), content_type="application/json")
    assert response.status_code == 413, response.content
    assert response["Content-Type"] == "application/json"
    error = response.json()["error"]
    assert error["code"] == "payload_too_large" and f"{LIMIT} bytes" in error["message"]


def test_too_many_form_fields_is_a_400_error_body(personas, settings):
    settings.DATA_UPLOAD_MAX_NUMBER_FIELDS = 5
    api = personas.api(personas.owner)
    response = api.post("/api/v1/workspaces/acme/runs", {f"k{i}": "v" for i in range(10)}, format="multipart")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_input"


def test_a_form_body_over_the_limit_is_413(personas, small_limit):
    api = personas.api(personas.owner)
    body = "name=" + "x" * LIMIT
    response = api.patch("/api/v1/workspaces/acme", body, content_type="application/x-www-form-urlencoded")
    assert response.status_code == 413, response.content
    assert response.json()["error"]["code"] == "payload_too_large"


def test_a_body_within_the_limit_is_read(personas, small_limit):
    api = personas.api(personas.owner)
    response = api.patch("/api/v1/workspaces/acme", {"name": "Acme Labs"}, format="json")
    assert response.status_code == 200
    response = api.patch(
        "/api/v1/workspaces/acme", "name=Acme+Form", content_type="application/x-www-form-urlencoded"
    )
    assert (response.status_code, response.json()["name"]) == (200, "Acme Form")
