"""Saving a draft the server refuses (pack.yaml over 5 MiB, a name over 300 characters):
nothing is saved, the plain form gets the editor again with the error next to the field and
the posted text kept, the autosave (htmx) gets a 400 whose message the editor shows. Never a
bare error body, never a false "Draft saved"."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse
from django.utils.html import escape

from packs import services
from packs.models import Draft, PackVersion
from packs.services.drafts import MAX_BUNDLE_TEXT
from tests.clients import logged_in as client_for
from tests.packs.publish_fixtures import mental_math

pytestmark = pytest.mark.django_db
HTMX = {"HTTP_HX_REQUEST": "true"}
SAVED = mental_math()


@pytest.fixture
def draft(personas) -> Draft:
    return services.draft_create(
        workspace=personas.workspace, user=personas.owner, name="Math", bundle_text=SAVED
    )


def url(draft: Draft, name: str = "draft-save") -> str:
    return reverse(name, kwargs={"draft_id": draft.public_id})


def too_big() -> str:
    return SAVED + "# " + "x" * (MAX_BUNDLE_TEXT - len(SAVED)) + "\n"


def assert_unchanged(draft: Draft) -> None:
    draft.refresh_from_db()
    assert draft.name == "Math" and draft.bundle_text == SAVED


def test_a_text_over_5_mib_shows_the_editor_again_with_the_error_at_the_field(personas, draft):
    text = too_big()
    response = client_for(personas.editor).post(url(draft), {"name": "Renamed", "bundle_text": text})
    assert response.status_code == 400
    body = response.content.decode()
    assert '<textarea id="bundle-text"' in body and 'id="report"' in body  # the editor, not a bare body
    error = re.search(r'<p class="error" id="bundle-text-error">([^<]+)</p>', body).group(1)
    assert (
        f"pack.yaml must be at most 5 MiB (5,242,880 bytes); this text is {len(text.encode()):,} bytes"
        in error
    )
    assert 'aria-describedby="bundle-text-error editor-help"' in body
    assert "Not saved." in body and "the draft keeps its last saved name and text" in body
    assert escape(text) in body and 'value="Renamed"' in body  # the user's input is still in the form
    assert "Draft saved." not in body
    assert_unchanged(draft)


def test_the_autosave_of_a_text_over_5_mib_answers_the_message_for_the_status(personas, draft):
    response = client_for(personas.editor).post(
        url(draft), {"name": "Math", "bundle_text": too_big()}, **HTMX
    )
    assert response.status_code == 400
    body = response.content.decode()
    assert "<html" not in body
    assert 'data-save-error data-field="bundle_text"' in body
    assert "Not saved: pack.yaml must be at most 5 MiB" in body
    assert_unchanged(draft)


def test_a_name_over_300_characters_saves_nothing_and_says_so(personas, draft):
    response = client_for(personas.editor).post(
        url(draft), {"name": "n" * 301, "bundle_text": SAVED + "# edited\n"}
    )
    assert response.status_code == 400
    body = response.content.decode()
    assert re.search(
        r'<p class="error" id="draft-name-error">Draft name must be at most 300 characters \(it has 301\)\.',
        body,
    )
    assert 'aria-invalid="true" aria-describedby="draft-name-error"' in body
    assert "# edited" in body and "Draft saved." not in body
    assert_unchanged(draft)


def test_the_autosave_of_a_name_over_300_characters_is_a_400_naming_the_field(personas, draft):
    response = client_for(personas.editor).post(url(draft), {"name": "n" * 301, "bundle_text": SAVED}, **HTMX)
    assert response.status_code == 400
    body = response.content.decode()
    assert 'data-field="name"' in body
    assert "Not saved: Draft name must be at most 300 characters (it has 301)." in body
    assert 'data-valid="true"' not in body  # not the report of a successful save
    assert_unchanged(draft)


def test_a_good_save_still_saves_both(personas, draft):
    client = client_for(personas.editor)
    response = client.post(url(draft), {"name": "Renamed", "bundle_text": SAVED + "# more\n"}, follow=True)
    assert response.status_code == 200 and "Draft saved." in response.content.decode()
    draft.refresh_from_db()
    assert draft.name == "Renamed" and draft.bundle_text.endswith("# more\n")


def test_a_post_of_the_name_alone_keeps_the_text(personas, draft):
    response = client_for(personas.editor).post(url(draft), {"name": "Renamed"}, **HTMX)
    assert response.status_code == 200
    draft.refresh_from_db()
    assert draft.name == "Renamed" and draft.bundle_text == SAVED


def test_publishing_a_text_over_5_mib_publishes_nothing_and_keeps_the_text(personas, draft):
    text = too_big()
    response = client_for(personas.editor).post(
        url(draft, "draft-publish"), {"name": "Math", "bundle_text": text}
    )
    assert response.status_code == 400
    body = response.content.decode()
    assert "Not saved or published." in body and "pack.yaml must be at most 5 MiB" in body
    assert escape(text) in body
    assert not PackVersion.objects.exists()
    assert_unchanged(draft)


def test_the_editor_keeps_a_leading_blank_line_of_the_text(personas):
    draft = services.draft_create(
        workspace=personas.workspace, user=personas.owner, name="Blank first", bundle_text="\n" + SAVED
    )
    body = client_for(personas.editor).get(url(draft, "draft-editor")).content.decode()
    textarea = re.search(r"<textarea id=\"bundle-text\"[^>]*>(.*?)</textarea>", body, re.S).group(1)
    # HTML drops one newline right after the start tag; the text's own must follow it.
    assert textarea.startswith("\n\n")


def test_an_outsider_cannot_save_and_learns_nothing(personas, draft):
    response = client_for(personas.outsider).post(url(draft), {"name": "n" * 301, "bundle_text": too_big()})
    assert response.status_code == 404
    assert_unchanged(draft)
