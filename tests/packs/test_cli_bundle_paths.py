"""PATH of ``pack validate``, ``pack publish`` and ``grade``: a directory without pack.yaml
is an I/O error (exit 2) that says what was expected (spec/interfaces.md §4)."""

from __future__ import annotations

from pathlib import Path

import pytest

from packs.models import Pack
from tests.commands import json_command as run

ROOT = Path(__file__).resolve().parents[2]
EXPECTED = "PATH must be a pack.yaml file, a directory containing pack.yaml, or a .zip bundle"


def test_validate_a_directory_of_packs_says_it_has_no_pack_yaml_and_names_the_packs_in_it():
    code, doc = run("pack", "validate", str(ROOT / "examples" / "packs"), "--json")
    assert code == 2
    error = doc["error"]
    assert (error["code"], error["field"]) == ("io_error", "path")
    assert error["message"] == (
        f"{ROOT / 'examples' / 'packs'} is a directory without a pack.yaml "
        "(these subdirectories are packs: demo, invoice-totals, mental-math, release-notes); " + EXPECTED
    )


def test_validate_an_empty_directory_says_what_was_expected(tmp_path):
    code, doc = run("pack", "validate", str(tmp_path), "--json")
    assert code == 2
    assert doc["error"]["message"] == f"{tmp_path} is a directory without a pack.yaml; {EXPECTED}"


def test_a_missing_file_is_still_the_plain_io_error(tmp_path):
    code, doc = run("pack", "validate", str(tmp_path / "nope.yaml"), "--json")
    assert code == 2
    assert doc["error"]["message"] == f"cannot read {tmp_path / 'nope.yaml'}: No such file or directory"


@pytest.mark.django_db
def test_publish_a_directory_without_pack_yaml_says_what_was_expected(personas, tmp_path):
    code, doc = run("pack", "publish", str(tmp_path), "--workspace", "acme", "--json")
    assert code == 2
    assert (doc["error"]["code"], doc["error"]["field"]) == ("io_error", "path")
    assert doc["error"]["message"].endswith(EXPECTED)
    assert not Pack.objects.exists()


def test_grade_a_directory_without_pack_yaml_says_what_was_expected(tmp_path):
    results = tmp_path / "results.jsonl"
    results.write_text("")
    code, doc = run("grade", str(tmp_path), "--results", str(results), "--json")
    assert code == 2
    assert doc["error"]["message"].endswith(EXPECTED)
