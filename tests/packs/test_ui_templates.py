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


@pytest.mark.parametrize(
    ("name", "slug", "title"),
    [
        ("Support replies", "support-replies", "Support replies"),
        ('  Ünïcode: "quoted" #not-a-comment ', "unicode-quoted-not-a-comment", 'Ünïcode: "quoted" #not-a-comment'),
        ("", "new-pack", "New pack"),
        ("会计", "my-pack", "会计"),
    ],
)  # fmt: skip
def test_a_blank_pack_is_named_after_its_draft(personas, name, slug, title):
    client = Client()
    client.force_login(personas.editor)
    client.post(reverse("draft-new"), {"template": "", "name": name})
    draft = Draft.objects.get()
    result = services.draft_publish(draft=draft, user=personas.editor)
    version = result.version
    assert (version.pack.slug, version.pack.name) == (slug, title)


def test_two_blank_packs_publish_as_two_packs(personas):
    # Every blank draft said `slug: my-pack`: the second one published was refused as
    # version 1 of the first one's pack (409 challenge_pack_version_exists).
    client = Client()
    client.force_login(personas.editor)
    slugs = []
    for _ in range(3):
        client.post(reverse("draft-new"), {"template": "", "name": "Support replies"})
        draft = Draft.objects.order_by("-id").first()
        slugs.append(services.draft_publish(draft=draft, user=personas.editor).version.pack.slug)
    assert slugs == ["support-replies", "support-replies-2", "support-replies-3"]


@pytest.mark.parametrize(
    "name", ['a "quoted" \\ back\\slash', "del\x7f and bom\ufeff", "emoji 🧪 tag\U000e0041", "x: y # z"]
)
def test_any_draft_name_gives_a_blank_pack_that_publishes_with_that_name(personas, name):
    draft = services.draft_blank(workspace=personas.workspace, user=personas.editor, name=name)
    version = services.draft_publish(draft=draft, user=personas.editor).version
    assert version.pack.name == " ".join(name.split())
