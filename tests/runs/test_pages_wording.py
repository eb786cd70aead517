"""Page wording: a deployment form error names the field by its label ("Endpoint URL must
be...", not the API's "endpoint_url must be..."), while the API keeps its field names;
counts are pluralised ("1 item", "1 lane")."""

from __future__ import annotations

import pytest

from runs.seeding import seed_run
from tests.clients import logged_in as login
from tests.runs.test_deployments_pages import form_data

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    "data,shown,hidden",
    [
        (
            {"endpoint_url": "ftp://agent.example.com"},
            "Endpoint URL must be an absolute http(s) URL",
            "endpoint_url must",
        ),
        (
            {
                "kind": "openai_chat",
                "endpoint_url": "",
                "base_url": "https://api.example.com/v1",
                "model": "",
            },
            "Model is required for openai_chat deployments",
            "model is required",
        ),
        (
            {"kind": "openai_chat", "base_url": "not a url", "model": "m"},
            "Base URL must be an absolute http(s) URL",
            "base_url must",
        ),
    ],
)
def test_a_deployment_form_error_names_the_fields_label(personas, data, shown, hidden):
    response = login(personas.editor).post("/deployments/new/", form_data(**data))
    body = response.content.decode()
    assert response.status_code == 400
    assert shown in body and hidden not in body


def test_the_api_keeps_the_field_names_in_its_messages(personas):
    response = personas.api(personas.editor).post(
        "/api/v1/workspaces/acme/deployments",
        {"name": "x", "kind": "hosted_http", "endpoint_url": "ftp://agent.example.com"},
        format="json",
    )
    assert response.status_code == 400
    assert response.json()["error"]["message"].startswith("endpoint_url must be")


def test_a_one_item_run_says_1_item(personas):
    run = seed_run(workspace=personas.workspace, items=1, lanes=1)
    body = login(personas.owner).get(f"/runs/{run.id}/").content.decode()
    assert "of 1 item finished" in body
