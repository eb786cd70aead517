"""The drafts API refuses what it would otherwise drop or coerce: an unknown field or a value
of the wrong type is a 400 naming the field (as ``POST runs``), and nothing changes."""

from __future__ import annotations

import pytest

from packs import services
from packs.models import Draft
from tests.packs.publish_fixtures import mental_math

pytestmark = pytest.mark.django_db

BASE = "/api/v1/workspaces/acme"


def error_of(response) -> dict:
    assert response.status_code == 400, response.content
    return response.json()["error"]


@pytest.fixture
def draft(personas) -> Draft:
    return services.draft_create(
        workspace=personas.workspace, user=personas.owner, name="Mine", bundle_text=mental_math()
    )


def test_creating_a_draft_with_an_unknown_field_is_400_with_a_suggestion(personas):
    response = personas.api(personas.owner).post(
        f"{BASE}/drafts", {"name": "api draft", "bundle_text": mental_math()}, format="json"
    )
    error = error_of(response)
    assert (error["code"], error["field"]) == ("invalid", "bundle_text")
    assert error["message"] == 'unknown field; did you mean "bundle"?'
    assert not Draft.objects.exists()


def test_an_unknown_field_with_no_close_match_lists_the_fields(personas):
    error = error_of(personas.api(personas.owner).post(f"{BASE}/drafts", {"zzz": 1}, format="json"))
    assert error["field"] == "zzz"
    assert error["message"] == "unknown field; the fields are name, bundle, files, template"


def test_changing_a_draft_with_an_unknown_field_is_400_and_changes_nothing(personas, draft):
    client = personas.api(personas.owner)
    url = f"{BASE}/drafts/{draft.public_id}"
    for body in ({"bundle_text": "a: ["}, {"template": "mental-math"}, {"name": "x", "extra": True}):
        error = error_of(client.put(url, body, format="json"))
        assert error["message"].startswith("unknown field")
        assert error["field"] == next(k for k in body if k not in ("name",))
    draft.refresh_from_db()
    assert (draft.name, draft.bundle_text) == ("Mine", mental_math())


@pytest.mark.parametrize(
    "body, field",
    [
        ({"name": 5}, "name"),
        ({"name": True}, "name"),
        ({"bundle": 12}, "bundle"),
        ({"bundle": ["pack: {}"]}, "bundle"),
        ({"template": 1}, "template"),
        ({"files": ["a"]}, "files"),
        ({"files": {"data/x": 5}}, "files.data/x"),
    ],
)
def test_creating_a_draft_with_a_value_of_the_wrong_type_is_400_naming_it(personas, body, field):
    error = error_of(personas.api(personas.owner).post(f"{BASE}/drafts", body, format="json"))
    assert (error["code"], error["field"]) == ("invalid", field)
    assert not Draft.objects.exists()


@pytest.mark.parametrize("body, field", [({"name": 5}, "name"), ({"bundle": 1.5}, "bundle")])
def test_changing_a_draft_with_a_value_of_the_wrong_type_is_400_naming_it(personas, draft, body, field):
    error = error_of(
        personas.api(personas.owner).put(f"{BASE}/drafts/{draft.public_id}", body, format="json")
    )
    assert (error["code"], error["field"]) == ("invalid", field)
    assert error["message"] == "must be a string"
    draft.refresh_from_db()
    assert (draft.name, draft.bundle_text) == ("Mine", mental_math())


def test_an_unknown_template_is_400_naming_the_field_and_the_templates(personas):
    # "no template named 'nope'" named neither the field nor the templates there are.
    response = personas.api(personas.owner).post(f"{BASE}/drafts", {"template": "nope"}, format="json")
    error = error_of(response)
    assert (error["code"], error["field"]) == ("invalid_draft", "template")
    assert error["choices"] == [t["name"] for t in services.draft_templates()]
    assert "mental-math" in error["choices"]
    assert not Draft.objects.exists()


def test_known_fields_still_work(personas, draft):
    client = personas.api(personas.owner)
    changed = client.put(f"{BASE}/drafts/{draft.public_id}", {"name": "Renamed", "bundle": ""}, format="json")
    assert changed.status_code == 200
    assert (changed.json()["name"], changed.json()["bundle"]) == ("Renamed", "")


def test_the_openapi_schema_lists_the_draft_fields_and_the_400(personas):
    schema = personas.api(personas.owner).get("/api/v1/schema/", {"format": "json"}).json()
    create = schema["paths"]["/api/v1/workspaces/{ws}/drafts"]["post"]
    assert "400" in create["responses"]
    update = schema["paths"]["/api/v1/workspaces/{ws}/drafts/{draft_id}"]["put"]
    assert "400" in update["responses"]
    fields = schema["components"]["schemas"]["DraftCreateInputRequest"]["properties"]
    assert set(fields) == {"name", "bundle", "files", "template"}
    assert fields["bundle"]["type"] == "string"
