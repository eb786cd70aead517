"""``manage.py pack validate`` and ``pack schema`` (spec/interfaces.md §4): real processes,
pointed at a database that cannot exist, since neither command may touch one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from packs.bundle.schema import SCHEMA_PATH
from tests.packs.bundle_helpers import base_pack, dump, symlink_info

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "packs"


def run(*args: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["DATABASE_URL"] = f"sqlite:///{tmp_path}/no/such/dir/db.sqlite3"  # unreachable: any query fails
    env["CELERY_BROKER_URL"] = "memory://"
    return subprocess.run(
        [sys.executable, "manage.py", "pack", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_valid_pack_exits_0_with_the_body(tmp_path):
    result = run("validate", str(EXAMPLES / "mental-math" / "pack.yaml"), "--json", tmp_path=tmp_path)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"valid": True, "errors": [], "warnings": []}


def test_an_invalid_pack_exits_1_and_prints_readable_positions(tmp_path):
    path = tmp_path / "pack.yaml"
    doc = base_pack()
    del doc["pack"]["family"]
    doc["stray"] = 1
    path.write_text(dump(doc))
    result = run("validate", str(path), tmp_path=tmp_path)
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert lines[0] == "invalid: 1 error, 1 warning"
    assert "pack.family: is required (line 2, column 3)" in lines
    assert any(
        line.startswith("warning: stray: is not an allowed key (line ") and line.endswith("[unknown_key]")
        for line in lines
    )

    result = run("validate", str(path), "--json", tmp_path=tmp_path)
    assert result.returncode == 1
    body = json.loads(result.stdout)
    assert body["errors"] == [{"field": "pack.family", "message": "is required", "line": 2, "column": 3}]
    assert body["warnings"][0]["rule"] == "unknown_key"


def test_strict_moves_warnings_into_errors(tmp_path):
    path = tmp_path / "pack.yaml"
    doc = base_pack()
    doc["stray"] = 1
    path.write_text(dump(doc))
    assert run("validate", str(path), tmp_path=tmp_path).returncode == 0
    result = run("validate", str(path), "--strict", "--json", tmp_path=tmp_path)
    assert result.returncode == 1
    body = json.loads(result.stdout)
    assert body["warnings"] == []
    assert body["errors"][0]["rule"] == "unknown_key"


def test_malformed_yaml_is_a_field_error_with_the_parser_position(tmp_path):
    path = tmp_path / "pack.yaml"
    path.write_text("pack: {slug: demo\nversion: [\n")
    result = run("validate", str(path), "--json", tmp_path=tmp_path)
    assert result.returncode == 1
    (error,) = json.loads(result.stdout)["errors"]
    assert error["field"] == "bundle" and error["message"] == "must be valid YAML"
    assert error["line"] is not None and error["detail"]


def test_an_undeclared_challenge_has_its_hint_in_the_detail(tmp_path):
    path = tmp_path / "pack.yaml"
    doc = base_pack()
    doc["input_sets"][0]["cases"][0]["challenge_key"] = "summ"
    path.write_text(dump(doc))
    result = run("validate", str(path), "--json", tmp_path=tmp_path)
    assert result.returncode == 1
    (error,) = json.loads(result.stdout)["errors"]
    assert (error["message"], error["detail"]) == (
        "must reference a declared challenge",
        'declared: "sum"; did you mean "sum"?',
    )
    lines = run("validate", str(path), tmp_path=tmp_path).stdout.splitlines()
    at = lines.index(next(line for line in lines if "must reference a declared challenge" in line))
    assert lines[at + 1] == '    declared: "sum"; did you mean "sum"?'


def test_a_zip_and_a_pack_directory_validate(tmp_path):
    assert run("validate", str(EXAMPLES / "invoice-totals.zip"), tmp_path=tmp_path).returncode == 0
    result = run("validate", str(EXAMPLES / "invoice-totals"), "--json", tmp_path=tmp_path)
    assert result.returncode == 0, result.stdout
    assert json.loads(result.stdout)["warnings"] == []


def test_archive_errors_have_null_positions(tmp_path):
    import zipfile

    path = tmp_path / "bad.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("pack.yaml", dump(base_pack()))
        archive.writestr(symlink_info("data/link"), "/etc/passwd")
    result = run("validate", str(path), "--json", tmp_path=tmp_path)
    assert result.returncode == 1
    assert json.loads(result.stdout)["errors"] == [
        {
            "field": "bundle",
            "message": "must not contain symbolic links",
            "line": None,
            "column": None,
            "detail": "data/link",
        }
    ]


@pytest.mark.parametrize("json_flag", [True, False])
def test_a_missing_file_is_an_io_error_exit_2(tmp_path, json_flag):
    args = ["validate", str(tmp_path / "nope.yaml")] + (["--json"] if json_flag else [])
    result = run(*args, tmp_path=tmp_path)
    assert result.returncode == 2
    if json_flag:
        assert json.loads(result.stdout)["error"]["code"] == "io_error"
    else:
        assert "cannot read" in result.stderr


def test_usage_errors_exit_2(tmp_path):
    result = run("validate", "--json", tmp_path=tmp_path)
    assert result.returncode == 2
    assert json.loads(result.stdout)["error"]["code"] == "usage"


def test_pack_schema_prints_the_checked_in_schema(tmp_path):
    result = run("schema", tmp_path=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == SCHEMA_PATH.read_text()
    assert json.loads(result.stdout)["$schema"] == "https://json-schema.org/draft/2020-12/schema"
