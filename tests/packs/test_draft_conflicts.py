"""Optimistic concurrency of drafts: every change names the revision it was based on, and one
based on an older revision than the draft's is refused with nothing of it stored. Two tabs
autosaving the same draft used to keep the last save silently, the first tab still saying
"Saved and validated."."""

from __future__ import annotations

import hashlib
import re
import threading

import pytest
from django.db import connection
from django.urls import reverse

from packs import services
from packs.models import Draft, PackVersion
from packs.services.yaml_edit import CaseEdit
from tests.clients import logged_in
from tests.packs.publish_fixtures import mental_math

pytestmark = pytest.mark.django_db
HTMX = {"HTTP_HX_REQUEST": "true"}
SAVED = mental_math()
A_TEXT = SAVED + "# tab A\n"
B_TEXT = SAVED + "# tab B\n"
BASE = "/api/v1/workspaces/acme"


@pytest.fixture
def draft(personas) -> Draft:
    return services.draft_create(
        workspace=personas.workspace, user=personas.owner, name="Math", bundle_text=SAVED
    )


def stored(draft: Draft) -> tuple[str, int]:
    fresh = Draft.objects.get(pk=draft.pk)
    return fresh.bundle_text, fresh.revision


# --- service -------------------------------------------------------------------------------


def test_of_two_saves_from_the_same_revision_the_second_is_refused_and_stores_nothing(draft):
    tab_a, tab_b = Draft.objects.get(pk=draft.pk), Draft.objects.get(pk=draft.pk)
    services.draft_update(draft=tab_a, bundle_text=A_TEXT, revision=1)
    with pytest.raises(services.DraftConflict, match="changed elsewhere"):
        services.draft_update(draft=tab_b, name="B's name", bundle_text=B_TEXT, revision=1)
    assert stored(draft) == (A_TEXT, 2)
    assert Draft.objects.get(pk=draft.pk).name == "Math"
    assert (tab_b.bundle_text, tab_b.name, tab_b.revision) == (SAVED, "Math", 1)  # untouched


def test_a_save_counts_one_revision_and_the_next_save_from_it_is_accepted(draft):
    services.draft_update(draft=draft, bundle_text=A_TEXT)
    assert draft.revision == 2
    services.draft_update(draft=draft, bundle_text=B_TEXT, revision=draft.revision)
    assert stored(draft) == (B_TEXT, 3)


def test_a_case_edit_on_a_draft_read_before_another_save_is_refused(draft):
    stale = Draft.objects.get(pk=draft.pk)
    services.draft_update(draft=draft, bundle_text=A_TEXT)
    edit = CaseEdit(input_set_key="default", challenge_key="add", case_key="new-case")
    with pytest.raises(services.DraftConflict):
        services.draft_case_upsert(draft=stale, edit=edit)
    assert stored(draft) == (A_TEXT, 2)


@pytest.mark.django_db(transaction=True)
def test_two_saves_racing_from_the_same_revision_store_exactly_one(personas):
    draft = services.draft_create(
        workspace=personas.workspace, user=personas.owner, name="M", bundle_text=SAVED
    )
    barrier = threading.Barrier(2)
    outcomes: list[str] = []

    def save(text: str) -> None:
        mine = Draft.objects.get(pk=draft.pk)
        barrier.wait()
        try:
            services.draft_update(draft=mine, bundle_text=text, revision=1)
            outcomes.append(text)
        except services.DraftConflict:
            outcomes.append("refused")
        finally:
            connection.close()

    threads = [threading.Thread(target=save, args=(text,)) for text in (A_TEXT, B_TEXT)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert sorted(outcomes, key=lambda o: o == "refused") == [*(set(outcomes) - {"refused"}), "refused"]
    [winner] = [o for o in outcomes if o != "refused"]
    assert stored(draft) == (winner, 2)


# --- the editor (htmx autosave and plain form) ---------------------------------------------


def editor_revision(body: str) -> str:
    return re.search(r'<input type="hidden" name="revision" value="(\d+)" id="draft-revision">', body).group(
        1
    )


def test_the_editor_carries_the_revision_it_loaded(personas, draft):
    body = logged_in(personas.editor).get(reverse("draft-editor", args=[draft.public_id])).content.decode()
    assert editor_revision(body) == "1"
    assert '<p id="save-conflict" class="callout" hidden>' in body
    # One autosave in flight per tab, the newest queued behind it: an aborted ("replace")
    # request still ran on the server and left the next save holding an old revision.
    assert 'hx-sync="this:queue last"' in body


def test_the_second_tab_autosave_is_409_and_the_first_tabs_text_survives(personas, draft):
    url = reverse("draft-save", args=[draft.public_id])
    tab_a, tab_b = logged_in(personas.editor), logged_in(personas.owner)
    saved = tab_a.post(url, {"name": "Math", "bundle_text": A_TEXT, "revision": "1"}, **HTMX)
    assert saved.status_code == 200
    # The autosave answer moves the editor on to the new revision (an out-of-band swap).
    assert '<input type="hidden" name="revision" id="draft-revision" value="2" hx-swap-oob="true">' in (
        saved.content.decode()
    )
    refused = tab_b.post(url, {"name": "Math", "bundle_text": B_TEXT, "revision": "1"}, **HTMX)
    assert refused.status_code == 409
    body = refused.content.decode()
    assert "data-save-error" in body and "data-conflict" in body
    assert (
        "Not saved: this draft was changed elsewhere (in another tab or by another user); "
        "reload to see it." in body
    )
    assert "Your text is still here" in body
    assert stored(draft) == (A_TEXT, 2)
    # Tab A's next autosave, from the revision its last save answered, is accepted.
    again = tab_a.post(url, {"name": "Math", "bundle_text": A_TEXT + "# more\n", "revision": "2"}, **HTMX)
    assert again.status_code == 200
    assert stored(draft) == (A_TEXT + "# more\n", 3)


def test_a_plain_save_from_an_old_revision_is_409_with_the_text_kept_and_a_reload_link(personas, draft):
    services.draft_update(draft=draft, bundle_text=A_TEXT)
    url = reverse("draft-save", args=[draft.public_id])
    response = logged_in(personas.editor).post(url, {"name": "Math", "bundle_text": B_TEXT, "revision": "1"})
    assert response.status_code == 409
    body = response.content.decode()
    assert "# tab B" in body  # the user's text, still in the form
    assert editor_revision(body) == "1"  # submitting it again is refused again, not an overwrite
    assert "changed elsewhere" in body
    assert f'<a href="{reverse("draft-editor", args=[draft.public_id])}">Reload the saved draft</a>' in body
    assert "Draft saved." not in body
    assert stored(draft) == (A_TEXT, 2)


def test_publishing_from_an_old_revision_is_409_and_publishes_nothing(personas, draft):
    services.draft_update(draft=draft, bundle_text=A_TEXT)
    url = reverse("draft-publish", args=[draft.public_id])
    response = logged_in(personas.editor).post(url, {"name": "Math", "bundle_text": B_TEXT, "revision": "1"})
    assert response.status_code == 409
    assert not PackVersion.objects.exists()
    assert stored(draft) == (A_TEXT, 2)


def test_a_save_without_a_revision_is_based_on_the_draft_as_it_is(personas, draft):
    services.draft_update(draft=draft, bundle_text=A_TEXT)
    url = reverse("draft-save", args=[draft.public_id])
    response = logged_in(personas.editor).post(url, {"name": "Math", "bundle_text": B_TEXT}, **HTMX)
    assert response.status_code == 200
    assert stored(draft) == (B_TEXT, 3)


def test_an_outsider_saving_with_a_revision_gets_404(personas, draft):
    url = reverse("draft-save", args=[draft.public_id])
    response = logged_in(personas.outsider).post(url, {"bundle_text": B_TEXT, "revision": "1"}, **HTMX)
    assert response.status_code == 404
    assert stored(draft) == (SAVED, 1)


# --- API -----------------------------------------------------------------------------------


def test_the_api_answers_the_revision_and_an_etag(personas, draft):
    response = personas.api(personas.owner).get(f"{BASE}/drafts/{draft.public_id}")
    assert response.json()["revision"] == 1
    assert response["ETag"] == '"1"'
    listed = personas.api(personas.owner).get(f"{BASE}/drafts").json()["results"]
    assert listed[0]["revision"] == 1


def test_an_api_put_from_an_old_revision_is_409_draft_conflict(personas, draft):
    client = personas.api(personas.owner)
    url = f"{BASE}/drafts/{draft.public_id}"
    first = client.put(url, {"bundle": A_TEXT, "revision": 1}, format="json")
    assert first.status_code == 200 and first.json()["revision"] == 2 and first["ETag"] == '"2"'
    second = client.put(url, {"bundle": B_TEXT, "revision": 1}, format="json")
    assert second.status_code == 409
    assert second.json()["error"]["code"] == "draft_conflict"
    assert stored(draft) == (A_TEXT, 2)


def test_an_api_put_with_a_stale_if_match_is_412_and_a_current_one_is_accepted(personas, draft):
    client = personas.api(personas.owner)
    url = f"{BASE}/drafts/{draft.public_id}"
    services.draft_update(draft=draft, bundle_text=A_TEXT)
    stale = client.put(url, {"bundle": B_TEXT}, format="json", HTTP_IF_MATCH='"1"')
    assert stale.status_code == 412
    assert stale.json()["error"]["code"] == "precondition_failed"
    assert stored(draft) == (A_TEXT, 2)
    current = client.put(url, {"bundle": B_TEXT}, format="json", HTTP_IF_MATCH='"2"')
    assert current.status_code == 200 and current["ETag"] == '"3"'
    assert stored(draft) == (B_TEXT, 3)


def test_removing_a_file_of_a_draft_changed_in_between_is_a_message_not_a_500(personas, draft, monkeypatch):
    def changed_elsewhere(**kwargs):
        raise services.DraftConflict("this draft was changed elsewhere; reload to see it")

    monkeypatch.setattr(services, "draft_file_remove", changed_elsewhere)
    client = logged_in(personas.owner)
    url = reverse("draft-file-remove", kwargs={"draft_id": draft.public_id})
    response = client.post(url, {"path": "data/a.json"}, follow=True)
    assert response.status_code == 200
    assert "data/a.json not removed: this draft was changed elsewhere" in response.content.decode()


def test_a_refused_file_add_leaves_no_artifact_behind_and_keeps_one_stored_before(
    personas, draft, django_capture_on_commit_callbacks
):
    # The file was stored as an artifact before the draft row refused the edit: an orphan
    # artifact (and file) per refused upload, listed in the admin and never named again.
    from django.core.files.storage import default_storage

    from packs.models import Artifact

    stale = Draft.objects.get(pk=draft.pk)
    services.draft_update(draft=draft, bundle_text=A_TEXT)
    with django_capture_on_commit_callbacks(execute=True), pytest.raises(services.DraftConflict):
        services.draft_file_add(draft=stale, path="data/new.json", data=b'{"new": 1}', user=personas.owner)
    assert not Artifact.objects.filter(workspace=personas.workspace).exists()
    sha = hashlib.sha256(b'{"new": 1}').hexdigest()
    assert not default_storage.exists(f"artifacts/{personas.workspace.public_id}/{sha[:2]}/{sha}")

    # The same bytes stored before the refused edit (the workspace's own artifact) stay.
    kept = services.artifact_store(workspace=personas.workspace, data=b'{"new": 1}', filename="new.json")
    with django_capture_on_commit_callbacks(execute=True), pytest.raises(services.DraftConflict):
        services.draft_file_add(draft=stale, path="data/new.json", data=b'{"new": 1}', user=personas.owner)
    assert list(Artifact.objects.filter(workspace=personas.workspace)) == [kept.artifact]
    assert default_storage.exists(kept.artifact.file.name)


def test_a_template_draft_that_cannot_be_created_leaves_no_artifacts(
    personas, django_capture_on_commit_callbacks
):
    from packs.models import Artifact

    with (
        django_capture_on_commit_callbacks(execute=True),
        pytest.raises(services.DraftError, match="at most 300"),
    ):
        services.draft_from_template(
            workspace=personas.workspace, user=personas.owner, template="invoice-totals", name="N" * 301
        )
    assert not Artifact.objects.filter(workspace=personas.workspace).exists()
    assert not Draft.objects.exists()
