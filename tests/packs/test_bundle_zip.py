"""Zip bundles (pack-format §2.2): every archive condition, member binding, L9."""

from __future__ import annotations

import io
import stat
import struct
import time
import tracemalloc
import zipfile

import pytest

from tests.packs.bundle_helpers import base_pack, check, dump, errors, symlink_info, warnings, zip_bytes


def pack_with_asset(path: str = "data/gold.json", **asset) -> str:
    doc = base_pack()
    doc["version"]["assets"] = [{"key": "gold", "kind": "dataset", "path": path, **asset}]
    return dump(doc)


def archive_errors(data: bytes) -> list[tuple[str, str, str]]:
    report = check(data)
    assert all(e.field == "bundle" and e.line is None and e.column is None for e in report.errors)
    return [(e.field, e.message, e.detail) for e in report.errors]


def test_a_zip_binds_assets_to_members_and_exposes_the_files():
    data = zip_bytes({"pack.yaml": pack_with_asset(), "data/gold.json": b'{"a": 1}'})
    report = check(data)
    assert report.to_body() == {"valid": True, "errors": [], "warnings": []}
    assert report.is_zip
    assert report.files == {"data/gold.json": b'{"a": 1}'}
    (asset,) = report.grade_context(report.case_defs("default")[0]).version_assets.values()
    assert asset.has_file and asset.size == 8


@pytest.mark.parametrize("path", ["./data/gold.json", "././data/gold.json"])
def test_a_leading_dot_slash_is_ignored(path):
    data = zip_bytes({"pack.yaml": pack_with_asset(path), "data/gold.json": b"{}"})
    assert check(data).to_body() == {"valid": True, "errors": [], "warnings": []}


def test_binding_is_case_sensitive_and_exact():
    data = zip_bytes({"pack.yaml": pack_with_asset("data/Gold.json"), "data/gold.json": b"{}"})
    report = check(data)
    assert errors(report) == [("version.assets[0].path", "must name a file in the bundle")]
    assert warnings(report) == [("bundle", "is not used by any asset")]
    assert report.warnings[0].detail == "data/gold.json"
    assert report.warnings[0].rule == "unused_bundle_file"


def test_an_artifact_id_on_a_shipped_file_is_refused():
    text = pack_with_asset(artifact_id="6f1c8e4a-5b7d-4c1e-9a3f-2d8b7e6c5a41")
    report = check(zip_bytes({"pack.yaml": text, "data/gold.json": b"{}"}))
    assert errors(report) == [
        ("version.assets[0].artifact_id", "must not be set for a file shipped in the bundle")
    ]


def test_an_artifact_id_without_a_member_refers_to_a_workspace_artifact():
    text = pack_with_asset(artifact_id="6f1c8e4a-5b7d-4c1e-9a3f-2d8b7e6c5a41")
    report = check(zip_bytes({"pack.yaml": text}))
    assert report.valid and report.files == {}


def test_absolute_paths_never_bind():
    report = check(zip_bytes({"pack.yaml": pack_with_asset("/data/gold.json"), "data/gold.json": b"{}"}))
    assert errors(report) == []
    assert warnings(report) == [("bundle", "is not used by any asset")]


def test_case_and_challenge_assets_bind_too():
    doc = base_pack()
    doc["challenges"][0]["assets"] = [{"key": "spec", "path": "docs/spec.md"}]
    doc["input_sets"][0]["cases"][0]["assets"] = [
        {"key": "in", "path": "cases/a.txt"},
        {"key": "x", "path": "missing.txt"},
    ]
    report = check(zip_bytes({"pack.yaml": dump(doc), "docs/spec.md": "# spec", "cases/a.txt": "a"}))
    assert errors(report) == [("input_sets[0].cases[0].assets[1].path", "must name a file in the bundle")]


def test_a_yaml_bundle_does_not_bind_relative_paths():
    assert check(pack_with_asset()).to_body() == {"valid": True, "errors": [], "warnings": []}


def raw_named_zip(name: str, *, flag_bits: int = 0) -> bytes:
    """A zip with pack.yaml and one member named exactly ``name`` (bytes patched in, so
    zipfile's own name handling on write cannot change it)."""
    placeholder = "Q" * len(name.encode())
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("pack.yaml", dump(base_pack()))
        archive.writestr(zipfile.ZipInfo(placeholder), "x")
    data = bytearray(buffer.getvalue().replace(placeholder.encode(), name.encode()))
    if flag_bits:
        local = bytes(data).find(b"PK\x03\x04", 4)
        struct.pack_into("<H", data, local + 6, flag_bits)
        central = bytes(data).rfind(b"PK\x01\x02")
        struct.pack_into("<H", data, central + 8, flag_bits)
    return bytes(data)


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("/etc/passwd", "must not contain absolute paths"),
        ("\\windows\\x", "must not contain absolute paths"),
        ("C:/x.txt", "must not contain absolute paths"),
        ("c:x.txt", "must not contain absolute paths"),
        ("../notes.txt", "must not contain paths that leave the archive root"),
        ("data/../../x", "must not contain paths that leave the archive root"),
        ("data\\x.txt", "must not contain paths that leave the archive root"),
        ("data/x\x00.txt", "must not contain paths that leave the archive root"),
    ],
)
def test_unsafe_member_names(name, message):
    assert archive_errors(raw_named_zip(name)) == [("bundle", message, name)]


def test_a_zip_slip_written_by_zipfile():
    data = zip_bytes({"pack.yaml": dump(base_pack()), "../../evil.sh": "rm -rf /"})
    assert archive_errors(data) == [
        ("bundle", "must not contain paths that leave the archive root", "../../evil.sh")
    ]


def test_symlinks_and_other_special_entries_are_refused():
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("pack.yaml", dump(base_pack()))
        archive.writestr(symlink_info("data/link"), "/etc/passwd")
        fifo = zipfile.ZipInfo("data/fifo")
        fifo.create_system = 3
        fifo.external_attr = (stat.S_IFIFO | 0o644) << 16
        archive.writestr(fifo, "")
        directory = zipfile.ZipInfo("data/")
        directory.external_attr = (stat.S_IFDIR | 0o755) << 16
        archive.writestr(directory, "")
    assert archive_errors(buffer.getvalue()) == [
        ("bundle", "must not contain symbolic links", "data/link"),
        ("bundle", "must not contain symbolic links", "data/fifo"),
    ]


def test_a_zip_bomb_is_stopped_while_inflating():
    bomb = zip_bytes({"pack.yaml": dump(base_pack()), "big.bin": b"\0" * (51 * 1024 * 1024)})
    assert len(bomb) < 200_000
    tracemalloc.start()
    started = time.monotonic()
    try:
        result = archive_errors(bomb)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result == [("bundle", "must unpack to at most 50 MiB", "big.bin")]
    assert time.monotonic() - started < 5
    assert peak < 120 * 1024 * 1024


def test_many_small_members_count_together_toward_the_limit():
    members = {"pack.yaml": dump(base_pack())}
    members.update({f"part{i}.bin": b"\0" * (6 * 1024 * 1024) for i in range(9)})
    (error,) = archive_errors(zip_bytes(members))
    assert error[1] == "must unpack to at most 50 MiB"


def test_header_sizes_are_not_trusted():
    """A central directory that claims 10 bytes for a member inflating to 60 MiB."""
    data = bytearray(zip_bytes({"pack.yaml": dump(base_pack()), "big.bin": b"\0" * (60 * 1024 * 1024)}))
    archive = zipfile.ZipFile(io.BytesIO(bytes(data)))
    info = archive.getinfo("big.bin")
    # Patch the uncompressed size in the local header and the central directory.
    local = info.header_offset
    struct.pack_into("<I", data, local + 22, 10)
    position = 0
    while True:
        position = bytes(data).find(b"PK\x01\x02", position)
        if position < 0:
            break
        name_length = struct.unpack_from("<H", data, position + 28)[0]
        if bytes(data[position + 46 : position + 46 + name_length]) == b"big.bin":
            struct.pack_into("<I", data, position + 24, 10)
        position += 4
    started = time.monotonic()
    (error,) = archive_errors(bytes(data))
    assert time.monotonic() - started < 5
    assert error[1] in ("must be a valid zip archive", "must unpack to at most 50 MiB")
    assert error[2] == "big.bin"


def test_an_encrypted_entry_is_refused():
    data = raw_named_zip("secret.txt", flag_bits=0x1)
    assert archive_errors(data) == [("bundle", "must be a valid zip archive", "secret.txt")]


@pytest.mark.parametrize("method", [zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA])
def test_compression_methods_other_than_stored_and_deflate_are_refused(method):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("pack.yaml", dump(base_pack()))
        archive.writestr("data.txt", "x", compress_type=method)
    assert archive_errors(buffer.getvalue()) == [("bundle", "must be a valid zip archive", "data.txt")]


def test_stored_members_are_fine():
    data = zip_bytes(
        {"pack.yaml": pack_with_asset(), "data/gold.json": b"{}"}, compression=zipfile.ZIP_STORED
    )
    assert check(data).valid


def test_more_than_1000_files_are_refused_but_directories_do_not_count():
    members = {"pack.yaml": dump(base_pack())}
    members.update({f"f/{i}.txt": "" for i in range(999)})
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, content in members.items():
            archive.writestr(name, content)
        for i in range(20):
            archive.writestr(zipfile.ZipInfo(f"dir{i}/"), "")
    report = check(buffer.getvalue())
    assert errors(report) == []  # exactly 1000 files; unused members are only warnings
    members["one-more.txt"] = ""
    assert archive_errors(zip_bytes(members)) == [("bundle", "must contain at most 1000 files", "1001 files")]


@pytest.mark.parametrize("second", ["./data/x.txt", "data//x.txt", "data/./x.txt"])
def test_duplicate_normalized_names_are_refused(second):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("pack.yaml", dump(base_pack()))
        archive.writestr("data/x.txt", "a")
        archive.writestr(zipfile.ZipInfo(second), "b")
    assert archive_errors(buffer.getvalue()) == [("bundle", "must not contain duplicate paths", second)]


@pytest.mark.parametrize(
    ("names", "file"),
    [
        (["data", "data/x.txt"], "data"),  # a file where another member needs a directory
        (["data/x.txt", "data"], "data"),  # in either order
        (["data/x.txt/y.txt", "data/x.txt"], "data/x.txt"),
        (["a/b/c.txt", "./a/b"], "./a/b"),
        ([""], ""),  # a file at the archive root's own path
        (["."], "."),
    ],
)
def test_a_file_at_the_path_of_a_directory_is_a_duplicate_path(names, file):
    # No file system can unpack both: the runner could not place the assets (§2.2).
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("pack.yaml", dump(base_pack()))
        for name in names:
            info = zipfile.ZipInfo("x")
            info.filename = info.orig_filename = name  # zipfile refuses an empty name otherwise
            archive.writestr(info, "a")
    assert archive_errors(buffer.getvalue()) == [("bundle", "must not contain duplicate paths", file)]


@pytest.mark.filterwarnings("ignore:Duplicate name")
def test_an_exact_duplicate_name_is_refused():
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("pack.yaml", dump(base_pack()))
        archive.writestr("pack.yaml", "again")
    assert archive_errors(buffer.getvalue()) == [("bundle", "must not contain duplicate paths", "pack.yaml")]


@pytest.mark.parametrize("members", [{"data/x.txt": "x"}, {"sub/pack.yaml": "pack: {}"}, {}])
def test_pack_yaml_must_be_at_the_root(members):
    data = zip_bytes({"README.md": "hi", **members})
    assert archive_errors(data) == [("bundle", "must contain pack.yaml at the archive root", "")]


def test_pack_yaml_over_5_mib_is_refused():
    text = dump(base_pack()) + "#" + "x" * (5 * 1024 * 1024) + "\n"
    assert archive_errors(zip_bytes({"pack.yaml": text})) == [
        ("bundle", "must be at most 5 MiB", "pack.yaml")
    ]


@pytest.mark.parametrize(
    "data",
    [
        b"PK\x03\x04" + b"\x00" * 30,
        b"PK\x03\x04garbage",
        zip_bytes({"pack.yaml": "x"})[:-30],
        b"PK\x05\x06" + b"\x00" * 18,
    ],
)
def test_unreadable_archives_are_refused(data):
    report = check(data)
    assert not report.valid
    assert report.errors[0].field == "bundle"
    assert report.errors[0].message in (
        "must be a valid zip archive",
        "must contain pack.yaml at the archive root",
    )


def test_a_zip_file_name_with_other_bytes_is_refused():
    report = check(dump(base_pack()), filename="pack.zip")
    assert errors(report) == [("bundle", "must be a valid zip archive")]


def test_archive_errors_end_processing():
    data = zip_bytes({"pack.yaml": "pack: [unclosed\n", "../x": "x"})
    assert [e.message for e in check(data).errors] == ["must not contain paths that leave the archive root"]


def test_a_yaml_error_inside_a_zip_keeps_its_position():
    report = check(zip_bytes({"pack.yaml": "pack: [unclosed\n"}))
    assert report.errors[0].message == "must be valid YAML"
    assert report.errors[0].line is not None


def test_a_central_directory_of_hundreds_of_thousands_of_entries_is_refused_before_it_is_read():
    """Directories do not count toward the 1000 files, but zipfile builds an object for every
    entry of the central directory before any check: 300,000 empty directory entries (about
    26 MB, under the transport limit) took seconds and hundreds of MB to read and were then
    accepted. An archive with more than 10 entries per allowed file is refused by counting
    the directory's headers (not the end record's count, which zipfile does not trust
    either), before zipfile reads the directory."""
    from packs.bundle import archive

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as out:
        out.writestr("pack.yaml", dump(base_pack()))
        for i in range(300_000):
            out.writestr(zipfile.ZipInfo(f"{i:x}/"), "")
    data = buffer.getvalue()
    tracemalloc.start()
    started = time.perf_counter()
    bundle, issues = archive.read_zip(data)
    elapsed = time.perf_counter() - started
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert bundle is None
    assert [(i.field, i.message, i.detail) for i in issues] == [
        ("bundle", "must be a valid zip archive", "more than 10000 entries (files and directories)")
    ]
    assert elapsed < 0.5
    assert peak < 10 * 1024 * 1024


def test_an_end_record_understating_its_entries_does_not_hide_them():
    from packs.bundle import archive

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as out:
        out.writestr("pack.yaml", dump(base_pack()))
        for i in range(archive.MAX_ENTRIES + 5):
            out.writestr(zipfile.ZipInfo(f"{i:x}/"), "")
    data = bytearray(buffer.getvalue())
    end = data.rindex(b"PK\x05\x06")
    struct.pack_into("<HH", data, end + 8, 1, 1)  # "1 entry on this disk, 1 in total"
    bundle, issues = archive.read_zip(bytes(data))
    assert bundle is None
    assert [i.detail for i in issues] == ["more than 10000 entries (files and directories)"]


def test_a_bundle_at_the_entry_limit_is_read():
    from packs.bundle import archive

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as out:
        out.writestr("pack.yaml", dump(base_pack()))
        for i in range(archive.MAX_ENTRIES - 1):
            out.writestr(zipfile.ZipInfo(f"{i:x}/"), "")
    bundle, issues = archive.read_zip(buffer.getvalue())
    assert issues == [] and bundle is not None


@pytest.mark.parametrize(
    ("written", "hint"),
    [
        ("data\\gold.json", "the bundle has data/gold.json: separate the path's parts with / (not \\)"),
        ("data/Gold.json", "the bundle has data/gold.json: names are case-sensitive"),
        ("data/gold.jsn", "did you mean data/gold.json?"),
        ("elsewhere/other.csv", ""),
    ],
)
def test_a_missing_member_names_the_file_the_author_probably_meant(written, hint):
    """The bare "must name a file in the bundle" said nothing of the file that was there: a path
    written with backslashes (on Windows) or in another case read as if the file were absent."""
    report = check(zip_bytes({"pack.yaml": pack_with_asset(written), "data/gold.json": b"{}"}))
    assert errors(report) == [("version.assets[0].path", "must name a file in the bundle")]
    assert report.errors[0].detail == hint


def test_the_hints_are_bounded_per_pack():
    doc = base_pack()
    doc["version"]["assets"] = [{"key": f"a{i}", "path": f"data/Gold{i}.json"} for i in range(60)]
    members = {f"data/gold{i}.json": b"{}" for i in range(60)}
    report = check(zip_bytes({"pack.yaml": dump(doc), **members}))
    details = [e.detail for e in report.errors]
    assert len(details) == 60
    assert details[0] == "the bundle has data/gold0.json: names are case-sensitive"
    assert sum(bool(d) for d in details) == 50 and details[50:] == [""] * 10
