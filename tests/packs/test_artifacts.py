"""Artifacts: content addressing, storage, and the asset downloads built on them."""

from __future__ import annotations

import hashlib
import threading
from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from django.db import connection
from django.test import Client

from agentclash_site.lib.signing import asset_token
from packs import services
from packs.models import Artifact, Asset
from tests.packs.publish_fixtures import INVOICES_JSON, invoice_zip

pytestmark = pytest.mark.django_db


def test_an_artifact_holds_its_bytes_under_a_content_address(personas):
    result = services.artifact_store(workspace=personas.workspace, data=b"hello", filename="hello.txt")
    artifact = result.artifact
    digest = hashlib.sha256(b"hello").hexdigest()
    assert (artifact.sha256, artifact.size, artifact.media_type) == (digest, 5, "text/plain")
    assert artifact.file.name.endswith(digest)
    assert str(personas.workspace.public_id) in artifact.file.name
    assert services.artifact_read(artifact=artifact) == b"hello"


def test_an_explicit_media_type_wins(personas):
    artifact = services.artifact_store(
        workspace=personas.workspace, data=b"{}", filename="x.bin", media_type="application/json"
    ).artifact
    assert artifact.media_type == "application/json"


@pytest.mark.django_db(transaction=True)
def test_two_concurrent_stores_of_the_same_bytes_make_one_artifact(personas):
    if connection.vendor != "postgresql":
        pytest.skip("needs concurrent connections")
    barrier = threading.Barrier(2, timeout=10)
    results = []

    def store():
        try:
            barrier.wait()
            results.append(services.artifact_store(workspace=personas.workspace, data=b"race", filename="r"))
        finally:
            connection.close()

    threads = [threading.Thread(target=store) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=20)
    assert len(results) == 2
    assert len({r.artifact.pk for r in results}) == 1
    assert Artifact.objects.count() == 1


@pytest.fixture
def asset(personas) -> Asset:
    version = services.pack_version_publish(
        workspace=personas.workspace, data=invoice_zip(), user=personas.owner
    ).version
    return Asset.objects.get(version=version)


def test_a_signed_link_downloads_the_asset_without_credentials(asset):
    response = Client().get(f"/assets/signed/{asset_token(asset.public_id)}")
    assert response.status_code == 200
    assert b"".join(response.streaming_content) == INVOICES_JSON
    assert response["Content-Type"] == "application/json"
    assert 'filename="invoices.json"' in response["Content-Disposition"]


def test_a_tampered_or_expired_link_is_404(asset):
    token = asset_token(asset.public_id)
    assert Client().get(f"/assets/signed/{token[:-2]}xx").status_code == 404
    with time_machine.travel(datetime.now(UTC) + timedelta(days=2)):
        assert Client().get(f"/assets/signed/{token}").status_code == 404


def test_members_download_assets_and_outsiders_get_404(personas, asset):
    client = Client()
    client.force_login(personas.viewer)
    assert client.get(f"/packs/assets/{asset.public_id}/").status_code == 200
    client.force_login(personas.outsider)
    assert client.get(f"/packs/assets/{asset.public_id}/").status_code == 404


def _asset_with_media_type(personas, media_type: str) -> Asset:
    from tests.packs.publish_fixtures import INVOICE_PACK, make_zip

    pack = INVOICE_PACK.replace("media_type: application/json", f"media_type: {media_type}")
    assert pack != INVOICE_PACK
    bundle = make_zip({"pack.yaml": pack, "data/invoices.json": INVOICES_JSON})
    version = services.pack_version_publish(
        workspace=personas.workspace, data=bundle, user=personas.owner
    ).version
    return Asset.objects.get(version=version)


@pytest.mark.parametrize(
    "media_type", ['"text/plain\\r\\nX-Injected: 1"', '"text/plain; x=\\u0001"', '"not a media type"']
)
def test_an_asset_whose_media_type_is_no_header_value_downloads_as_octet_stream(personas, media_type):
    """The pack's ``media_type`` is any text (pack-format §4.3): a line break in it made the
    download a 500 (Django refuses the header), for members and agents alike."""
    asset = _asset_with_media_type(personas, media_type)
    client = Client()
    client.force_login(personas.viewer)
    for response in (
        client.get(f"/packs/assets/{asset.public_id}/"),
        Client().get(f"/assets/signed/{asset_token(asset.public_id)}"),
    ):
        assert response.status_code == 200
        assert response["Content-Type"] == "application/octet-stream"
        assert "X-Injected" not in response
        assert b"".join(response.streaming_content) == INVOICES_JSON


def test_an_asset_media_type_with_parameters_is_kept(personas):
    asset = _asset_with_media_type(personas, '"application/json; charset=utf-8"')
    response = Client().get(f"/assets/signed/{asset_token(asset.public_id)}")
    assert response["Content-Type"] == "application/json; charset=utf-8"
