"""What a refused form says about the fields it cannot keep or that Django words for
developers: a typed secret is never sent back to the page, so the page says to type it
again (the next save stored the deployment without it, silently); too many repetitions
named neither the field nor its meaning ("Ensure this value is less than or equal to 10.")."""

from __future__ import annotations

import re

import pytest

from runs.models import Deployment, Run
from tests.clients import logged_in as login
from tests.runs.runfactory import hosted, publish

pytestmark = pytest.mark.django_db


def field_errors(body: str, name: str) -> str:
    found = re.search(rf'id="id_{name}_error"[^>]*>(.*?)</(?:ul|div)>', body, re.S)
    return re.sub(r"<[^>]+>", " ", found.group(1)) if found else ""


@pytest.mark.parametrize("edit", [False, True], ids=["create", "edit"])
def test_a_refused_deployment_form_says_to_type_the_secret_again(personas, edit):
    owner = login(personas.owner)
    url = "/deployments/new/"
    if edit:
        existing = hosted(personas.workspace, "https://agent.example.com/run", name="old", secret="first")
        url = f"/deployments/{existing.public_id}/edit/"
    posted = {
        "name": "agent",
        "kind": "openai_chat",
        "base_url": "https://models.example.com/v1",
        "model": "",  # refused: an openai_chat deployment needs a model
        "secret": "sk-typed",
        "max_in_flight": "8",
        "timeout_seconds": "120",
        "max_attempts": "3",
        "evidence_level": "structured",
    }
    response = owner.post(url, posted)
    assert response.status_code == 400
    body = response.content.decode()
    assert "Model is required" in field_errors(body, "model")
    assert "Type the secret again" in field_errors(body, "secret")
    assert "sk-typed" not in body  # still never sent back
    assert 'value="https://models.example.com/v1"' in body  # the other typed values stay

    # Nothing typed in the secret field: nothing to say about it.
    body = owner.post(url, {**posted, "secret": ""}).content.decode()
    assert "Model is required" in field_errors(body, "model")
    assert "Type the secret again" not in body
    # A trace import stores no secret (its field is hidden): nothing to say about it either.
    body = owner.post(url, {**posted, "kind": "trace_import", "name": ""}).content.decode()
    assert "This field is required" in field_errors(body, "name")
    assert "Type the secret again" not in body
    assert Deployment.objects.filter(name="agent").count() == 0


@pytest.mark.parametrize("value", ["11", "0", "two"])
def test_a_refused_repetitions_value_is_named_with_its_bounds(personas, value):
    version = publish(personas.workspace, slug="alpha", sets=1)
    agent = hosted(personas.workspace, "https://agent.example.com/run")
    owner = login(personas.owner)
    response = owner.post(
        "/runs/new/",
        {
            "pack": "alpha",
            "pack_version": version.id,
            "input_set": "set0",
            "deployments": [agent.id],
            "repetitions": value,
        },
    )
    assert response.status_code == 400
    body = response.content.decode()
    message = field_errors(body, "repetitions")
    assert "Repetitions must be a whole number from 1 to 10" in message, message
    assert re.search(rf'<input type="number" name="repetitions" value="{value}"', body)
    assert re.search(rf'<input type="checkbox" name="deployments" value="{agent.id}"[^>]*checked', body)
    assert Run.objects.count() == 0


def test_the_deployment_forms_page_order_names_each_of_its_fields_once():
    from runs.forms import DeploymentForm

    order = DeploymentForm.PAGE_ORDER
    assert len(order) == len(set(order)) and set(order) == set(DeploymentForm.base_fields)


def test_an_input_set_of_another_version_is_named_with_the_way_out(personas):
    """Changed the version without JavaScript, the set of the old one was refused in Django's
    words ("Select a valid choice. set2 is not one of the available choices."); and a pack
    that does not exist was said twice, once as the input set's error."""
    v1 = publish(personas.workspace, slug="beta", sets=2, number=1)
    publish(personas.workspace, slug="beta", sets=3, number=2)
    agent = hosted(personas.workspace, "https://agent.example.com/run")
    owner = login(personas.owner)
    posted = {
        "pack": "beta",
        "pack_version": v1.id,
        "input_set": "set2",
        "deployments": [agent.id],
        "repetitions": "1",
    }
    body = owner.post("/runs/new/", posted).content.decode()
    assert field_errors(body, "input_set").strip() == (
        "Input set set2 is not in beta v1: choose one of its input sets (listed now)."
    )
    body = owner.post("/runs/new/", {**posted, "pack": "gamma"}).content.decode()
    assert "No pack named" in field_errors(body, "pack")
    assert 'id="id_input_set_error"' not in body
    assert Run.objects.count() == 0
