"""Publish-time errors (they need the database) carry the value's line and column, as
pack-format §3 asks of every bad value, and the path the author wrote (legacy ``items``)."""

from __future__ import annotations

import json
import uuid
from io import StringIO

import pytest
from django.core.management import call_command

from packs import services
from packs.models import Artifact, Case, Pack, PackVersion
from tests.packs.bundle_helpers import base_pack, dump, pos_of, zip_bytes
from tests.packs.publish_fixtures import mental_math

pytestmark = pytest.mark.django_db

BASE = "/api/v1/workspaces/acme"
ARTIFACT = "must reference an artifact in this workspace"


def publish(personas, text: str):
    return services.pack_version_publish(
        workspace=personas.workspace, data=text.encode(), user=personas.owner
    )


def refused(personas, text: str) -> list[tuple[str, str, int | None, int | None]]:
    with pytest.raises(services.PackInvalid) as info:
        publish(personas, text)
    body = info.value.body()
    assert body["code"] == "invalid_challenge_pack" and body["valid"] is False
    return [(e["field"], e["message"], e["line"], e["column"]) for e in body["errors"]]


def artifact_of(workspace, content: bytes) -> Artifact:
    return services.artifact_store(workspace=workspace, data=content, filename="x.json").artifact


def test_a_foreign_artifact_id_is_reported_at_its_value_through_the_api(personas):
    theirs = artifact_of(personas.other_workspace, b"{}")
    text = mental_math(asset_artifact_id=str(theirs.public_id))
    response = personas.api(personas.owner).generic(
        "POST", f"{BASE}/packs", text.encode(), content_type="application/yaml"
    )
    assert response.status_code == 400
    line, column = pos_of(text, str(theirs.public_id))
    assert response.json()["errors"] == [
        {"field": "version.assets[0].artifact_id", "message": ARTIFACT, "line": line, "column": column}
    ]


def test_every_bad_artifact_id_is_reported_at_its_value_and_at_the_path_the_author_wrote(personas):
    mine = artifact_of(personas.workspace, b"mine")
    theirs = artifact_of(personas.other_workspace, b"theirs")
    unknown_challenge, unknown_item = str(uuid.uuid4()), str(uuid.uuid4())
    doc = base_pack()
    doc["version"]["assets"] = [{"key": "gold", "path": "gold.json", "artifact_id": str(theirs.public_id)}]
    doc["challenges"][0]["assets"] = [{"key": "c", "path": "c.json", "artifact_id": unknown_challenge}]
    doc["input_sets"][0]["cases"][0]["assets"] = [
        {"key": "m", "path": "m.json", "artifact_id": str(mine.public_id)}
    ]
    doc["input_sets"].append(
        {
            "key": "legacy",
            "name": "Legacy",
            "items": [
                {"challenge_key": "sum", "item_key": "i1", "payload": {}},
                {
                    "challenge_key": "sum",
                    "item_key": "i2",
                    "payload": {},
                    "assets": [{"key": "x", "path": "x.json", "artifact_id": unknown_item}],
                },
            ],
        }
    )
    text = dump(doc)
    assert refused(personas, text) == [
        ("version.assets[0].artifact_id", ARTIFACT, *pos_of(text, str(theirs.public_id))),
        ("challenges[0].assets[0].artifact_id", ARTIFACT, *pos_of(text, unknown_challenge)),
        ("input_sets[1].items[1].assets[0].artifact_id", ARTIFACT, *pos_of(text, unknown_item)),
    ]
    assert not Pack.objects.exists()


def test_values_longer_than_their_columns_are_field_errors_at_their_values(personas):
    # PostgreSQL refused them with a DataError (500); SQLite stored them whole. The validator
    # refuses them (tests/packs/test_bundle_limits.py), so publish stops before the database.
    doc = base_pack()
    doc["pack"]["name"] = "N" * 301
    doc["challenges"][0]["title"] = "T" * 501
    doc["input_sets"][0]["cases"][0]["case_key"] = "k" * 201
    doc["input_sets"].append(
        {"key": "legacy", "name": "Legacy", "items": [{"challenge_key": "sum", "item_key": "i" * 201}]}
    )
    doc["version"]["assets"] = [{"key": "a", "path": "p" * 1001, "artifact_id": str(uuid.uuid4())}]
    text = dump(doc)
    assert refused(personas, text) == [
        ("pack.name", "must be at most 300 characters", *pos_of(text, "N" * 301)),
        ("version.assets[0].path", "must be at most 1000 characters", *pos_of(text, "p" * 1001)),
        ("challenges[0].title", "must be at most 500 characters", *pos_of(text, "T" * 501)),
        ("input_sets[0].cases[0].case_key", "must be at most 200 characters", *pos_of(text, "k" * 201)),
        ("input_sets[1].items[0].item_key", "must be at most 200 characters", *pos_of(text, "i" * 201)),
    ]
    assert not Pack.objects.exists()


def test_values_at_their_column_length_publish(personas):
    doc = base_pack()
    doc["pack"]["name"] = "N" * 300
    doc["challenges"][0]["title"] = "T" * 500
    doc["input_sets"][0]["cases"][0]["case_key"] = "k" * 200
    result = publish(personas, dump(doc))
    assert result.pack.name == "N" * 300
    assert Case.objects.get(input_set__version=result.version).case_key == "k" * 200


def test_a_too_long_value_in_a_zip_stores_no_artifact(personas):
    doc = base_pack()
    doc["challenges"][0]["category"] = "c" * 201
    doc["version"]["assets"] = [{"key": "gold", "path": "gold.json"}]
    data = zip_bytes({"pack.yaml": dump(doc), "gold.json": "{}"})
    with pytest.raises(services.PackInvalid):
        services.pack_version_publish(workspace=personas.workspace, data=data, user=personas.owner)
    assert not Artifact.objects.exists()


def test_conflicts_give_the_position_of_the_conflicting_value_in_the_message(personas):
    """The error object is exactly {code, message, field} (interfaces §2, §7); the position
    of the conflicting value is part of the message."""
    publish(personas, mental_math())
    client = personas.api(personas.owner)
    changed = mental_math(extra_case=True)
    exists = client.generic("POST", f"{BASE}/packs", changed.encode(), content_type="application/yaml")
    assert exists.status_code == 409
    line, column = pos_of(changed, "number: 1")
    assert exists.json()["error"] == {
        "code": "challenge_pack_version_exists",
        "message": "version 1 of pack 'mental-math' is already published with different content; "
        f"publish a new version number (line {line}, column {column + len('number: ')})",
        "field": "version.number",
    }
    renamed = mental_math(number=2, family="maths")
    conflict = client.generic("POST", f"{BASE}/packs", renamed.encode(), content_type="application/yaml")
    assert conflict.status_code == 409
    error = conflict.json()["error"]
    line, column = pos_of(renamed, "family: maths")
    assert set(error) == {"code", "message", "field"}
    assert (error["code"], error["field"]) == ("challenge_pack_metadata_conflict", "pack.family")
    assert error["message"].endswith(f"(line {line}, column {column + len('family: ')})")
    assert PackVersion.objects.count() == 1


def test_the_cli_prints_the_conflict_position_in_the_message_too(personas, tmp_path):
    publish(personas, mental_math())
    path = tmp_path / "pack.yaml"
    path.write_text(mental_math(number=1, name="Renamed"))
    out, err = StringIO(), StringIO()
    with pytest.raises(SystemExit) as info:
        call_command("pack", "publish", str(path), "--workspace", "acme", "--json", stdout=out, stderr=err)
    assert info.value.code == 3
    error = json.loads(out.getvalue())["error"]
    line, column = pos_of(path.read_text(), "name: Renamed")
    assert set(error) == {"code", "message", "field"}
    assert (error["code"], error["field"]) == ("challenge_pack_metadata_conflict", "pack.name")
    assert error["message"].endswith(f"(line {line}, column {column + len('name: ')})")
    with pytest.raises(SystemExit):
        call_command("pack", "publish", str(path), "--workspace", "acme", stdout=out, stderr=err)
    assert f"(line {line}, column {column + len('name: ')})" in err.getvalue()
