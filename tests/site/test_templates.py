"""The templates as source: what a Django template treats as a comment stays out of the page."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.conf import settings

from packs import services
from tests.clients import logged_in
from tests.packs.publish_fixtures import mental_math

TEMPLATE_DIRS = [Path(d) for d in settings.TEMPLATES[0]["DIRS"]]


def template_lines() -> list[tuple[str, int, str]]:
    return [
        (str(path.relative_to(root)), number, line)
        for root in TEMPLATE_DIRS
        for path in sorted(root.rglob("*.html"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
    ]


def test_every_short_comment_closes_on_its_own_line():
    # {# ... #} is one line only: one spread over lines is printed into the page as text.
    # Longer notes are {% comment %} blocks.
    open_ended = [
        f"{name}:{number}" for name, number, line in template_lines() if re.search(r"\{#(?![^\n]*#\})", line)
    ]
    assert open_ended == []


@pytest.mark.django_db
def test_the_draft_editor_shows_none_of_its_template_comments(personas):
    draft = services.draft_create(
        workspace=personas.workspace, user=personas.owner, name="Math", bundle_text=mental_math()
    )
    body = logged_in(personas.editor).get(f"/packs/drafts/{draft.public_id}/").content.decode()
    assert "{#" not in body and "#}" not in body and "hx-sync &quot;queue last&quot;" not in body
