"""Opening a pack file someone already has (a pack YAML or a zip bundle) as a new draft from
the packs page: the editor then validates and publishes it like any draft."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from packs import services
from packs.models import Artifact, Draft
from tests.clients import logged_in as client_for
from tests.packs.publish_fixtures import INVOICES_JSON, invoice_zip, make_zip, mental_math

pytestmark = pytest.mark.django_db
URL = "/packs/open/"


def open_file(user, data: bytes, filename: str = "pack.yaml", name: str = ""):
    upload = SimpleUploadedFile(filename, data, content_type="application/octet-stream")
    return client_for(user).post(URL, {"file": upload, "name": name}, follow=True)


def messages_of(response) -> list[str]:
    return [str(m) for m in response.context["messages"]]


def test_the_url_is_the_one_the_page_posts_to(personas):
    assert reverse("draft-open-file") == URL
    page = client_for(personas.editor).get(reverse("pack-list")).content.decode()
    assert f'action="{URL}" enctype="multipart/form-data"' in page


def test_a_pack_yaml_opens_as_a_draft_that_publishes(personas):
    text = mental_math()
    response = open_file(personas.editor, ("\ufeff" + text).encode(), "mental-math.yaml")
    draft = Draft.objects.get()
    assert response.redirect_chain[-1][0] == reverse("draft-editor", kwargs={"draft_id": draft.public_id})
    assert draft.bundle_text == text and draft.files == {} and draft.workspace == personas.workspace
    assert draft.name == "Opened from mental-math.yaml"
    assert "mental-math.yaml opened as a draft" in " ".join(messages_of(response))
    version = services.draft_publish(draft=draft, user=personas.editor).version
    assert version.pack.slug == "mental-math"  # the pack keeps its own slug


def test_a_zip_bundle_opens_with_its_files(personas):
    open_file(personas.editor, invoice_zip(), "invoices.zip", name="Invoices, imported")
    draft = Draft.objects.get()
    assert draft.name == "Invoices, imported"
    assert set(draft.files) == {"data/invoices.json"}
    stored = Artifact.objects.get(public_id=draft.files["data/invoices.json"])
    assert services.artifact_read(artifact=stored) == INVOICES_JSON
    assert services.draft_publish(draft=draft, user=personas.editor).version is not None


@pytest.mark.parametrize(
    ("data", "filename", "says"),
    [
        ("pack: {slug: café}\n".encode("latin-1"), "latin1.yaml", "not UTF-8 text (byte 0xe9 at offset 16)"),
        (b"pack:\x00 x\n", "nul.yaml", "NUL character (offset 5)"),
        (b"PK\x03\x04 not really a zip", "broken.zip", "broken.zip: the bundle must be a valid zip archive"),
        (make_zip({"data/x.json": b"[]"}), "nopack.zip", "must contain pack.yaml at the archive root"),
        (b"x" * (5 * 1024 * 1024 + 1), "huge.yaml", "a pack YAML must be at most 5 MiB"),
    ],
)
def test_a_file_that_cannot_be_a_pack_is_refused_with_what_to_do_and_nothing_is_kept(
    personas, data, filename, says
):
    response = open_file(personas.editor, data, filename)
    assert response.redirect_chain[-1][0] == reverse("pack-list")
    text = " ".join(messages_of(response))
    assert "Not opened:" in text and says in text, text
    assert not Draft.objects.exists() and not Artifact.objects.exists()


def test_no_file_is_a_message_not_an_error_page(personas):
    response = client_for(personas.editor).post(URL, {"name": "x"}, follow=True)
    assert response.status_code == 200
    assert "Choose a pack YAML or zip to open." in " ".join(messages_of(response))


def test_a_viewer_cannot_open_a_file_and_an_outsider_opens_into_their_own_workspace(personas):
    upload = SimpleUploadedFile("pack.yaml", mental_math().encode())
    assert client_for(personas.viewer).post(URL, {"file": upload}).status_code == 403
    assert not Draft.objects.exists()
    open_file(personas.outsider, mental_math().encode())
    assert Draft.objects.get().workspace == personas.other_workspace
    page = client_for(personas.owner).get(reverse("pack-list")).content.decode()
    assert "Opened from pack.yaml" not in page


def test_a_user_of_no_workspace_gets_the_page_saying_so_not_a_500(personas):
    from django.contrib.auth import get_user_model

    loner = get_user_model().objects.create_user("lone", password="pw-lone-12345")
    upload = SimpleUploadedFile("pack.yaml", mental_math().encode())
    response = client_for(loner).post(URL, {"file": upload})
    assert response.status_code == 403  # a write: the page saying there is no workspace
    assert "Challenge packs" in response.content.decode()
    assert not Draft.objects.exists()


def test_a_zip_of_the_pack_folder_says_to_zip_what_is_inside_it(personas):
    """Compressing the pack's folder puts pack.yaml one level down: "the bundle must contain
    pack.yaml at the archive root" did not say where it was or what to do."""
    data = make_zip({"mental-math/pack.yaml": mental_math(), "mental-math/data/x.json": "{}"})
    response = open_file(personas.editor, data, filename="mental-math.zip")
    assert messages_of(response) == [
        "Not opened: mental-math.zip: the bundle must contain pack.yaml at the archive root; it has "
        "mental-math/pack.yaml: zip what is inside mental-math/, not the folder."
    ]
    assert not Draft.objects.exists()
