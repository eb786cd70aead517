"""A refused publish leaves no artifact behind (pack-format §12: "any error rolls all back").

Bound zip files are written to storage before the transaction; their rows are inserted in
it. A publish that fails removes the files it wrote and nothing else: not a file an earlier
upload or a concurrent publish holds, and a storage error never hides the publish's error.
"""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path

import pytest
from django.conf import settings
from django.core.files.storage import default_storage
from django.db import connection

from packs import services
from packs.models import Artifact, Asset, Pack
from packs.services import publish as publish_module
from packs.services.artifacts import artifact_files_forget
from tests.commands import json_command
from tests.packs.publish_fixtures import INVOICE_PACK, INVOICES_JSON, invoice_zip, make_zip

pytestmark = pytest.mark.django_db

OTHER_INVOICES = INVOICES_JSON.replace(b"1000.5", b"2000.5")


def stored_files() -> set[str]:
    root = Path(settings.MEDIA_ROOT) / "artifacts"
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()} if root.exists() else set()


def publish(personas, data: bytes):
    return services.pack_version_publish(workspace=personas.workspace, data=data, user=personas.owner)


def renamed_pack_zip(invoices: bytes) -> bytes:
    """Version 2 of invoice-totals under another name: a metadata conflict."""
    text = INVOICE_PACK.replace("name: Invoice Totals", "name: Invoice Sums").replace(
        "number: 1", "number: 2"
    )
    return make_zip({"pack.yaml": text, "data/invoices.json": invoices})


def other_pack_zip(invoices: bytes) -> bytes:
    """A new pack (another slug) that ships the same file."""
    text = INVOICE_PACK.replace("slug: invoice-totals", "slug: invoice-copies")
    return make_zip({"pack.yaml": text, "data/invoices.json": invoices})


def artifact_path(personas, data: bytes) -> Path:
    digest = hashlib.sha256(data).hexdigest()
    return Path(settings.MEDIA_ROOT) / "artifacts" / str(personas.workspace.public_id) / digest[:2] / digest


@pytest.mark.parametrize(
    ("refused", "code"),
    [
        (invoice_zip(OTHER_INVOICES), "challenge_pack_version_exists"),
        (renamed_pack_zip(OTHER_INVOICES), "challenge_pack_metadata_conflict"),
    ],
)
def test_a_refused_publish_of_a_zip_leaves_no_artifact_row_or_file(personas, refused, code):
    publish(personas, invoice_zip())
    rows, files = set(Artifact.objects.values_list("pk", flat=True)), stored_files()
    with pytest.raises(services.PublishConflict) as caught:
        publish(personas, refused)
    assert caught.value.code == code
    assert set(Artifact.objects.values_list("pk", flat=True)) == rows
    assert stored_files() == files
    assert not artifact_path(personas, OTHER_INVOICES).exists()


def test_the_cli_publish_refused_with_exit_3_leaves_no_artifact(personas, tmp_path):
    first, second = tmp_path / "first.zip", tmp_path / "second.zip"
    first.write_bytes(invoice_zip())
    second.write_bytes(invoice_zip(OTHER_INVOICES))
    assert json_command("pack", "publish", str(first), "--workspace", "acme", "--json")[0] == 0
    rows, files = Artifact.objects.count(), stored_files()
    code, doc = json_command("pack", "publish", str(second), "--workspace", "acme", "--json")
    assert (code, doc["error"]["code"]) == (3, "challenge_pack_version_exists")
    assert (Artifact.objects.count(), stored_files()) == (rows, files)


def test_a_file_an_earlier_upload_stored_survives_a_refused_publish(personas):
    publish(personas, invoice_zip())
    uploaded = services.artifact_store(workspace=personas.workspace, data=OTHER_INVOICES, filename="x.json")
    with pytest.raises(services.PublishConflict):
        publish(personas, invoice_zip(OTHER_INVOICES))
    assert Artifact.objects.filter(pk=uploaded.artifact.pk).exists()
    assert services.artifact_read(artifact=uploaded.artifact) == OTHER_INVOICES


def test_a_storage_delete_that_fails_does_not_hide_the_conflict(personas, monkeypatch):
    publish(personas, invoice_zip())

    def broken_delete(name):
        raise OSError("storage is down")

    monkeypatch.setattr(default_storage, "delete", broken_delete)
    with pytest.raises(services.PublishConflict) as caught:
        publish(personas, invoice_zip(OTHER_INVOICES))
    assert caught.value.code == "challenge_pack_version_exists"
    assert not Artifact.objects.filter(sha256=hashlib.sha256(OTHER_INVOICES).hexdigest()).exists()


def test_a_publish_that_commits_the_file_while_a_refused_one_deletes_it_keeps_it(personas, monkeypatch):
    """The refused publish deletes its file just after another publish committed a row
    for the same bytes (it found the file and did not write it): the file is restored."""
    publish(personas, invoice_zip())
    original_delete = default_storage.delete
    state: dict[str, object] = {}

    def delete_after_another_commit(name):
        if not state:
            state["other"] = None
            state["other"] = publish(personas, other_pack_zip(OTHER_INVOICES))
        original_delete(name)

    monkeypatch.setattr(default_storage, "delete", delete_after_another_commit)
    with pytest.raises(services.PublishConflict):
        publish(personas, invoice_zip(OTHER_INVOICES))
    asset = Asset.objects.get(version=state["other"].version)
    assert services.artifact_read(artifact=asset.artifact) == OTHER_INVOICES


def test_a_publish_whose_file_a_refused_one_deleted_before_its_commit_writes_it_again(personas, monkeypatch):
    """A refused publish wrote the file; another publish found it there and did not write
    it; the refused one deleted it before the other committed: after its commit it is back."""
    refused = publish_module._stage_files(
        workspace=personas.workspace, files={"data/invoices.json": OTHER_INVOICES}, user=None
    )
    assert list(refused.written) == [
        str(artifact_path(personas, OTHER_INVOICES).relative_to(settings.MEDIA_ROOT))
    ]
    original = publish_module._check_artifact_ids

    def the_refused_publish_cleans_up_meanwhile(**kwargs):
        found = original(**kwargs)
        artifact_files_forget(workspace=personas.workspace, written=refused.written)
        assert not artifact_path(personas, OTHER_INVOICES).exists()
        return found

    monkeypatch.setattr(publish_module, "_check_artifact_ids", the_refused_publish_cleans_up_meanwhile)
    result = publish(personas, other_pack_zip(OTHER_INVOICES))
    asset = Asset.objects.get(version=result.version)
    assert services.artifact_read(artifact=asset.artifact) == OTHER_INVOICES


@pytest.mark.django_db(transaction=True)
def test_a_concurrent_publish_of_the_same_file_keeps_it_when_the_other_is_refused(personas, monkeypatch):
    if connection.vendor != "postgresql":
        pytest.skip("needs concurrent connections")
    publish(personas, invoice_zip())
    barrier = threading.Barrier(2, timeout=10)
    original = publish_module._check_artifact_ids

    def check_then_wait(**kwargs):
        found = original(**kwargs)
        barrier.wait()  # both wrote or found the file and hold their transactions open
        return found

    monkeypatch.setattr(publish_module, "_check_artifact_ids", check_then_wait)
    outcomes: list[object] = [None, None]

    def run(index: int, data: bytes) -> None:
        try:
            outcomes[index] = publish(personas, data)
        except Exception as exc:  # the outcome is what the test inspects
            outcomes[index] = exc
        finally:
            connection.close()

    datas = [invoice_zip(OTHER_INVOICES), other_pack_zip(OTHER_INVOICES)]
    threads = [threading.Thread(target=run, args=(i, d)) for i, d in enumerate(datas)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert isinstance(outcomes[0], services.PublishConflict), outcomes
    assert isinstance(outcomes[1], services.PublishResult), outcomes
    assert Pack.objects.count() == 2
    artifact = Artifact.objects.get(sha256=hashlib.sha256(OTHER_INVOICES).hexdigest())
    assert services.artifact_read(artifact=artifact) == OTHER_INVOICES
