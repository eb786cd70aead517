"""Every starting point of "New pack" (the blank pack and each template of the form) opens a
draft the editor reports clean: no errors, no warnings, strict or not."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from packs import services
from packs.forms import NewDraftForm
from packs.models import Draft

pytestmark = pytest.mark.django_db


def template_choices() -> list[str]:
    form = NewDraftForm(templates=services.draft_templates())
    return [value for value, _ in form.fields["template"].choices]


def test_the_form_offers_the_blank_pack_and_the_example_templates():
    choices = template_choices()
    assert choices[0] == "" and len(choices) > 1


@pytest.mark.parametrize("template", template_choices())
def test_each_new_pack_starts_without_errors_or_warnings(personas, template):
    client = Client()
    client.force_login(personas.editor)
    response = client.post(
        reverse("draft-new"), {"template": template, "name": f"From {template or 'blank'}"}
    )
    assert response.status_code == 302
    draft = Draft.objects.get()
    for strict in (False, True):
        body = services.draft_validate(draft=draft, strict=strict).to_body()
        assert (body["valid"], body["errors"], body["warnings"]) == (True, [], []), (template, strict)
    page = client.get(response["Location"]).content.decode()
    assert "No errors, no warnings." in page


def test_the_blank_pack_still_shows_a_case_with_an_expectation(personas):
    client = Client()
    client.force_login(personas.editor)
    client.post(reverse("draft-new"), {"template": ""})
    text = Draft.objects.get().bundle_text
    assert "expectations:" in text and "expected_from: case.expectations.answer" in text
