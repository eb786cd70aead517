"""A pack directory (pack.yaml and the files its assets name) is the zip of those files: the
same content gives the same errors, whatever the other assets (README "CLI")."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from packs.bundle import validate_bundle
from packs.bundle.archive import build_zip, bundle_from_directory, is_zip
from tests.commands import json_command as run
from tests.packs.bundle_helpers import base_pack, dump

MISSING = "must name a file in the bundle"


def pack_with_assets(*paths: str) -> str:
    doc = base_pack()
    doc["version"]["assets"] = [{"key": f"a{i}", "path": path} for i, path in enumerate(paths)]
    return dump(doc)


def directory(tmp_path: Path, text: str, files: dict[str, bytes] | None = None) -> Path:
    root = tmp_path / "pack"
    root.mkdir()
    (root / "pack.yaml").write_text(text)
    for name, data in (files or {}).items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    return root


def errors_of(data: bytes) -> list[tuple]:
    body = validate_bundle(data).to_body()
    return [(e["field"], e["message"], e["line"], e["column"]) for e in body["errors"]]


def asset_error(text: str, index: int, path: str) -> tuple:
    line = next(n for n, row in enumerate(text.splitlines(), 1) if row.strip() == f"path: {path}")
    column = text.splitlines()[line - 1].index(path) + 1
    return (f"version.assets[{index}].path", MISSING, line, column)


def test_a_missing_asset_file_is_an_error_when_it_is_the_only_asset(tmp_path):
    text = pack_with_assets("missing.txt")
    root = directory(tmp_path, text)
    assert errors_of(bundle_from_directory(root)) == [asset_error(text, 0, "missing.txt")]
    code, doc = run("pack", "validate", str(root), "--json")
    assert code == 1
    assert [(e["field"], e["message"]) for e in doc["errors"]] == [("version.assets[0].path", MISSING)]


def test_a_missing_asset_file_is_the_same_error_beside_a_file_that_exists(tmp_path):
    text = pack_with_assets("data/x.txt", "missing.txt")
    root = directory(tmp_path, text, {"data/x.txt": b"x"})
    assert errors_of(bundle_from_directory(root)) == [asset_error(text, 1, "missing.txt")]


def test_a_path_through_dot_dot_is_checked_at_the_asset_as_in_a_zip_of_the_files(tmp_path):
    text = pack_with_assets("data/../data/x.txt")
    root = directory(tmp_path, text, {"data/x.txt": b"x"})
    found = errors_of(bundle_from_directory(root))
    assert found == [asset_error(text, 0, "data/../data/x.txt")]
    assert found == errors_of(build_zip({"pack.yaml": text.encode(), "data/x.txt": b"x"}))


@pytest.mark.parametrize(
    ("paths", "files"),
    [
        (["data/x.txt"], {"data/x.txt": b"x"}),
        (["./data/x.txt", "missing.txt"], {"data/x.txt": b"x"}),
        (["data//x.txt"], {"data/x.txt": b"x"}),
        (["data/./x.txt", "data/x.txt"], {"data/x.txt": b"x"}),
        (["../outside.txt"], {}),
        (["data"], {"data/x.txt": b"x"}),
        (["/etc/hostname"], {}),
    ],
)
def test_a_directory_gives_the_errors_of_the_zip_of_its_files(tmp_path, paths, files):
    text = pack_with_assets(*paths)
    root = directory(tmp_path, text, files)
    zipped = build_zip({"pack.yaml": text.encode(), **files})
    assert errors_of(bundle_from_directory(root)) == errors_of(zipped)


def test_a_symlink_inside_the_directory_is_followed(tmp_path):
    text = pack_with_assets("data/link.txt")
    root = directory(tmp_path, text, {"data/x.txt": b"x"})
    os.symlink("x.txt", root / "data" / "link.txt")
    data = bundle_from_directory(root)
    assert is_zip(data)
    report = validate_bundle(data)
    assert report.valid, report.to_body()
    assert report.files == {"data/link.txt": b"x"}


@pytest.mark.parametrize("link", ["data/secret.txt", "data"])
def test_a_symlink_leaving_the_directory_is_an_error_naming_it(tmp_path, link):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret")
    text = pack_with_assets("data/secret.txt")
    root = directory(tmp_path, text)
    (root / link).parent.mkdir(parents=True, exist_ok=True)
    os.symlink(outside / "secret.txt" if link == "data/secret.txt" else outside, root / link)
    code, doc = run("pack", "validate", str(root), "--json")
    assert code == 2
    assert (doc["error"]["code"], doc["error"]["field"]) == ("io_error", "path")
    assert doc["error"]["message"] == (
        f"{root / 'data/secret.txt'} leaves the pack directory {root} through a symbolic link; "
        "a pack directory's files must be inside it"
    )


def test_an_asset_that_is_a_fifo_is_an_io_error_not_a_hang(tmp_path):
    root = directory(tmp_path, pack_with_assets("data/pipe"))
    (root / "data").mkdir()
    os.mkfifo(root / "data" / "pipe")
    code, doc = run("pack", "validate", str(root), "--json")
    assert code == 2
    assert doc["error"]["message"].startswith(
        f"{root / 'data' / 'pipe'} is not a regular file (a named pipe)"
    )


def test_a_pack_without_asset_paths_is_still_its_plain_yaml(tmp_path):
    text = dump(base_pack())
    assert bundle_from_directory(directory(tmp_path, text)) == text.encode()
