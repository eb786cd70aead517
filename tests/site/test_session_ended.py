"""A request htmx sends after the session ended (logged out in another tab, expired) is
answered 401 with a note linking the login page, not with the redirect to the login page:
the browser follows a redirect inside the request, and htmx then swapped the whole login
page into the fragment's place and the editor reported "Saved" for a save that never
happened. A plain request still goes to the login page."""

from __future__ import annotations

import re
from urllib.parse import quote

import pytest
from django.test import Client
from django.urls import reverse

from packs import services
from runs.seeding import seed_run
from tests.packs.publish_fixtures import mental_math

pytestmark = pytest.mark.django_db


def htmx(page: str) -> dict[str, str]:
    return {"HTTP_HX_REQUEST": "true", "HTTP_HX_CURRENT_URL": f"http://testserver{page}"}


@pytest.fixture
def draft(personas):
    return services.draft_create(
        workspace=personas.workspace, user=personas.owner, name="Math", bundle_text=mental_math()
    )


def test_an_autosave_after_the_session_ended_is_refused_with_a_login_link(draft):
    editor = reverse("draft-editor", kwargs={"draft_id": draft.public_id})
    response = Client().post(
        reverse("draft-save", kwargs={"draft_id": draft.public_id}),
        {"name": "Renamed", "bundle_text": "pack: {}\n"},
        **htmx(editor),
    )
    assert response.status_code == 401 and "Location" not in response
    body = response.content.decode()
    assert "<main" not in body and 'name="password"' not in body  # a note, not the login page
    note = re.search(r"<p [^>]*data-session-ended[^>]*>(.*?)</p>", body, re.S)
    assert note and "Your session has ended: nothing was saved or loaded." in note.group(1)
    # The link brings the user back to the page they were on, not to the POST-only save URL.
    assert f'href="/login/?next={quote(editor, safe="/")}"' in note.group(1)
    draft.refresh_from_db()
    assert draft.name == "Math" and draft.bundle_text == mental_math()


def test_a_progress_poll_after_the_session_ended_is_refused_the_same_way(personas):
    run = seed_run(workspace=personas.workspace, items=2, lanes=1)
    page = reverse("run-detail", kwargs={"run_id": run.id})
    response = Client().get(f"{page}?partial=live&was=running", **htmx(page))
    assert response.status_code == 401 and "data-session-ended" in response.content.decode()


def test_a_page_load_after_the_session_ended_still_goes_to_the_login_page(draft):
    editor = reverse("draft-editor", kwargs={"draft_id": draft.public_id})
    response = Client().get(editor)
    assert response.status_code == 302
    assert response["Location"] == f"/login/?next={quote(editor, safe='/')}"
