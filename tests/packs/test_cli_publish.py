"""``manage.py pack publish`` exactly as spec/interfaces.md §4 pins it, and the demo step."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from packs import demo
from packs.models import Pack, PackVersion
from packs.services import draft_templates
from tests.packs.publish_fixtures import INVALID_PACK, invoice_zip, mental_math

pytestmark = pytest.mark.django_db


def run(*args: str) -> tuple[int, str, str]:
    out, err = StringIO(), StringIO()
    try:
        call_command("pack", *args, stdout=out, stderr=err)
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def pack_file(tmp_path: Path) -> Path:
    path = tmp_path / "pack.yaml"
    path.write_text(mental_math())
    return path


def test_publish_prints_the_document_and_exits_0(personas, pack_file):
    code, out, _ = run("publish", str(pack_file), "--workspace", "acme", "--json")
    assert code == 0
    doc = json.loads(out)
    version = PackVersion.objects.get()
    assert doc == {
        "pack_id": str(version.pack.public_id),
        "pack_version_id": str(version.public_id),
        "slug": "mental-math",
        "number": 1,
        "input_set_ids": {"smoke": str(version.input_sets.get().public_id)},
        "warnings": [],
        "already_published": False,
    }


def test_publishing_the_same_file_again_exits_0_already_published(personas, pack_file):
    run("publish", str(pack_file), "--workspace", "acme", "--json")
    code, out, _ = run("publish", str(pack_file), "--workspace", "acme", "--json")
    assert code == 0
    assert json.loads(out)["already_published"] is True
    assert PackVersion.objects.count() == 1


def test_an_invalid_pack_exits_1_with_the_validate_body(personas, tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text(INVALID_PACK)
    code, out, _ = run("publish", str(path), "--workspace", "acme", "--json")
    assert code == 1
    body = json.loads(out)
    assert set(body) == {"valid", "errors", "warnings"}
    assert body["valid"] is False and body["errors"]
    assert not Pack.objects.exists()


def test_a_conflict_exits_3_with_an_error_object(personas, pack_file, tmp_path):
    run("publish", str(pack_file), "--workspace", "acme", "--json")
    changed = tmp_path / "changed.yaml"
    changed.write_text(mental_math(extra_case=True))
    code, out, _ = run("publish", str(changed), "--workspace", "acme", "--json")
    assert code == 3
    assert json.loads(out)["error"]["code"] == "challenge_pack_version_exists"
    renamed = tmp_path / "renamed.yaml"
    renamed.write_text(mental_math(number=2, name="Renamed"))
    code, out, _ = run("publish", str(renamed), "--workspace", "acme", "--json")
    assert code == 3
    assert json.loads(out)["error"]["code"] == "challenge_pack_metadata_conflict"


def test_an_unknown_workspace_exits_2(personas, pack_file):
    code, out, _ = run("publish", str(pack_file), "--workspace", "nope", "--json")
    assert code == 2
    assert json.loads(out)["error"]["code"] == "unknown_workspace"


def test_a_missing_file_exits_2(personas, tmp_path):
    code, out, _ = run("publish", str(tmp_path / "missing.yaml"), "--workspace", "acme", "--json")
    assert code == 2
    assert "error" in json.loads(out)


def test_a_zip_bundle_publishes(personas, tmp_path):
    path = tmp_path / "invoice.zip"
    path.write_bytes(invoice_zip())
    code, out, _ = run("publish", str(path), "--workspace", "acme", "--json")
    assert code == 0, out
    assert PackVersion.objects.get().source_media_type == "application/zip"


def test_without_json_it_prints_readable_text(personas, pack_file, tmp_path):
    code, out, _ = run("publish", str(pack_file), "--workspace", "acme")
    assert code == 0
    assert out.startswith("published: mental-math v1")
    bad = tmp_path / "bad.yaml"
    bad.write_text(INVALID_PACK)
    code, out, err = run("publish", str(bad), "--workspace", "acme")
    assert code == 1
    assert "pack.family: is required" in err


def test_the_demo_step_publishes_every_example_pack_idempotently(personas):
    out = StringIO()
    demo.setup(workspace=personas.workspace, user=personas.owner, stdout=out)
    count = len(draft_templates())
    assert count and Pack.objects.filter(workspace=personas.workspace).count() == count
    lines = out.getvalue().strip().splitlines()
    assert len(lines) == count and all(line.endswith(": published") for line in lines)
    again = StringIO()
    demo.setup(workspace=personas.workspace, user=personas.owner, stdout=again)
    assert all(line.endswith(": already published") for line in again.getvalue().strip().splitlines())
    assert PackVersion.objects.count() == count
