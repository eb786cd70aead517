"""PATH of ``pack validate`` and ``pack publish`` is read with a limit, and only when it is a
regular file: a device, a FIFO or a huge file is an error, never a hang or a MemoryError
(spec/interfaces.md §4: exit 2 for usage or I/O errors)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from packs.models import Pack
from tests.commands import json_command as run

ROOT = Path(__file__).resolve().parents[2]
EXPECTED = "PATH must be a pack.yaml file, a directory containing pack.yaml, or a .zip bundle"
HUGE = 100 * 2**30  # sparse: no disk space, but far more than memory


def sparse(path: Path, head: bytes) -> Path:
    with path.open("wb") as handle:
        handle.write(head)
        handle.truncate(HUGE)
    return path


def test_validate_a_character_device_is_an_io_error_that_says_what_it_is():
    code, doc = run("pack", "validate", "/dev/zero", "--json")
    assert code == 2
    assert doc == {
        "error": {
            "code": "io_error",
            "message": f"/dev/zero is not a regular file (a character device); {EXPECTED}",
            "field": "path",
        }
    }


@pytest.mark.django_db
def test_publish_a_character_device_is_an_io_error(personas):
    code, doc = run("pack", "publish", "/dev/zero", "--workspace", "acme", "--json")
    assert (code, doc["error"]["code"], doc["error"]["field"]) == (2, "io_error", "path")
    assert "not a regular file" in doc["error"]["message"]
    assert not Pack.objects.exists()


def test_validate_a_fifo_answers_at_once_instead_of_waiting_for_a_writer(tmp_path):
    fifo = tmp_path / "pack.yaml"
    os.mkfifo(fifo)
    done = subprocess.run(
        [sys.executable, "manage.py", "pack", "validate", str(fifo), "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 2, done.stderr
    assert done.stdout.count("\n") > 0 and '"code": "io_error"' in done.stdout
    assert f"{fifo} is not a regular file (a named pipe)" in done.stdout


def test_a_huge_yaml_file_gets_the_validators_size_error_after_reading_only_the_limit(tmp_path):
    code, doc = run("pack", "validate", str(sparse(tmp_path / "pack.yaml", b"pack: {}\n")), "--json")
    assert code == 1
    assert [(e["field"], e["message"]) for e in doc["errors"]] == [("bundle", "must be at most 5 MiB")]


def test_a_huge_zip_file_is_an_exit_2_error_naming_the_limit(tmp_path):
    code, doc = run("pack", "validate", str(sparse(tmp_path / "pack.zip", b"PK\x03\x04")), "--json")
    assert code == 2
    assert doc == {
        "error": {
            "code": "payload_too_large",
            "message": f"{tmp_path / 'pack.zip'} is larger than 60 MiB; a bundle must be at most 60 MiB",
            "field": "path",
        }
    }


def test_a_zip_just_under_the_limit_is_read_whole(tmp_path):
    path = tmp_path / "pack.zip"
    with path.open("wb") as handle:
        handle.write(b"PK\x03\x04")
        handle.truncate(6 * 2**20)  # over the YAML limit, under the bundle limit: an archive error
    code, doc = run("pack", "validate", str(path), "--json")
    assert code == 1
    assert [(e["field"], e["message"]) for e in doc["errors"]] == [("bundle", "must be a valid zip archive")]


def test_grade_reads_results_only_from_a_regular_file_of_at_most_64_mib(tmp_path):
    pack = "examples/packs/mental-math/pack.yaml"
    code, doc = run("grade", pack, "--results", "/dev/zero", "--json")
    assert code == 2
    assert doc["error"]["code"] == "io_error"
    assert doc["error"]["message"].startswith("/dev/zero is not a regular file (a character device)")
    huge = sparse(tmp_path / "results.jsonl", b'{"case_key": "a", "final_output": "1"}\n')
    code, doc = run("grade", pack, "--results", str(huge), "--json")
    assert code == 2
    assert doc["error"]["code"] == "payload_too_large"
    assert "limited to 64 MiB" in doc["error"]["message"]
