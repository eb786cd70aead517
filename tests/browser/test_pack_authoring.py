"""An author's journey through the pack editor in Debian chromium, as a keyboard and screen
reader user meets it: what the live regions say, where the focus lands, where errors point."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from packs import services
from tests.packs.publish_fixtures import mental_math

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_save_status_says_what_the_report_found(personas, login, page):
    """The save status is the live region a screen reader hears while typing: it said "Saved
    and validated." whether the text had no issue or ten, and the report (not live) said how many."""
    draft = services.draft_create(
        workspace=personas.workspace, user=personas.owner, name="Math", bundle_text=mental_math()
    )
    login(personas.editor)
    page.goto(f"/packs/drafts/{draft.public_id}/")
    status = page.locator("#save-status")
    editor = page.locator("#bundle-text")

    editor.fill(mental_math(number=0).replace("difficulty: easy", "difficulty: Easy"))
    expect(status).to_have_text("Saved and validated: 2 errors, 0 warnings. F8 moves to the next one.")
    editor.fill(mental_math().replace("      pass_threshold: 1\n", ""))
    expect(status).to_have_text("Saved and validated: valid, 1 warning.")
    editor.fill(mental_math())
    expect(status).to_have_text("Saved and validated: valid, 0 warnings.")
    assert page.js_errors == []
