"""Zip bundles (spec/pack-format.md §2.2).

Every archive check runs before the YAML is looked at, and any archive error ends
processing. Errors have field ``bundle``, the member name in ``detail`` and no position.
Unpacked sizes are counted from the bytes actually inflated, never from header sizes.
"""

from __future__ import annotations

import io
import os
import re
import stat
import struct
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from .issues import BundleIssue

MAX_MEMBERS = 1000
# Entries of any kind (directories do not count toward MAX_MEMBERS): zipfile builds an object
# per central-directory entry before any check, so the entries are counted from their headers first.
MAX_ENTRIES = 10 * MAX_MEMBERS
MAX_UNPACKED_BYTES = 50 * 1024 * 1024
MAX_PACK_YAML_BYTES = 5 * 1024 * 1024
# The transport limit of pack-format §3 (the API answers 413 above it): the largest zip
# bundle a path may hold. A YAML bundle's limit is pack.yaml's (§2.1).
MAX_BUNDLE_BYTES = 60 * 1024 * 1024
PACK_YAML = "pack.yaml"
_CHUNK = 64 * 1024
_DRIVE = re.compile(r"[A-Za-z]:")

ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")
_CENTRAL_HEADER = b"PK\x01\x02"

INVALID = "must be a valid zip archive"
ABSOLUTE = "must not contain absolute paths"
LEAVES_ROOT = "must not contain paths that leave the archive root"
SYMLINK = "must not contain symbolic links"
TOO_MANY = "must contain at most 1000 files"
TOO_BIG = "must unpack to at most 50 MiB"
DUPLICATE = "must not contain duplicate paths"
NO_PACK_YAML = "must contain pack.yaml at the archive root"
PACK_YAML_TOO_BIG = "must be at most 5 MiB"


def is_zip(data: bytes) -> bool:
    return data.startswith(ZIP_MAGIC)


def normalize_member(name: str) -> str:
    """The normalized form of a member name: no empty or ``.`` segments."""
    return "/".join(part for part in name.split("/") if part not in ("", "."))


def normalize_asset_path(path: str) -> str:
    """An asset path as it binds to a member: exact and case-sensitive, leading ``./`` ignored."""
    while path.startswith("./"):
        path = path[2:]
    return path


def is_absolute(path: str) -> bool:
    return path.startswith(("/", "\\")) or bool(_DRIVE.match(path))


@dataclass
class ZipBundle:
    pack_yaml: bytes
    files: dict[str, bytes] = field(default_factory=dict)  # normalized member name -> bytes


def _issue(message: str, detail: str) -> BundleIssue:
    return BundleIssue(field="bundle", message=message, line=None, column=None, detail=detail)


def _is_directory(info: zipfile.ZipInfo) -> bool:
    mode = info.external_attr >> 16
    return info.filename.endswith("/") or (info.create_system == 3 and stat.S_ISDIR(mode))


def _is_special(info: zipfile.ZipInfo) -> bool:
    """A symlink or other non-regular entry, by the Unix file type in ``external_attr``."""
    mode = info.external_attr >> 16
    file_type = stat.S_IFMT(mode)
    return file_type != 0 and not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def _parents(name: str) -> list[str]:
    """The directories a normalized member name lies in: ``a/b/c`` -> ``["", "a", "a/b"]``."""
    parts = name.split("/")
    return ["/".join(parts[:end]) for end in range(len(parts))]


def _structure_issues(infos: list[zipfile.ZipInfo]) -> list[BundleIssue]:
    issues: list[BundleIssue] = []
    seen: set[str] = set()
    directories: set[str] = set()  # every directory a member lies in, the root ("") included
    regular: list[tuple[str, str]] = []  # (normalized, original) of each file not yet refused
    files = 0
    for info in infos:
        # zipfile cuts names at the first NUL; the original name keeps it.
        name = info.orig_filename
        if info.flag_bits & 0x1 or info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            issues.append(_issue(INVALID, name))
        if is_absolute(name):
            issues.append(_issue(ABSOLUTE, name))
        elif "\\" in name or "\x00" in name or ".." in name.split("/"):
            issues.append(_issue(LEAVES_ROOT, name))
        if _is_special(info):
            issues.append(_issue(SYMLINK, name))
        elif not _is_directory(info):
            files += 1
        normalized = normalize_member(name)
        directories.update(_parents(normalized))
        if normalized in seen:
            issues.append(_issue(DUPLICATE, name))
        elif not _is_directory(info) and not _is_special(info):
            regular.append((normalized, name))
        seen.add(normalized)
    # A file whose path is also a directory of the archive (``data`` beside ``data/x.json``,
    # or a name that normalizes to the root itself): no file system can unpack both.
    issues += [_issue(DUPLICATE, name) for normalized, name in regular if normalized in directories]
    if files > MAX_MEMBERS:
        issues.append(_issue(TOO_MANY, f"{files} files"))
    if PACK_YAML not in seen:
        issues.append(_issue(NO_PACK_YAML, ""))
    return issues


def _central_entries(data: bytes, limit: int) -> int | None:
    """How many entries the central directory holds, counted from their headers (up to
    ``limit`` + 1), or None when there is no readable end record (zipfile then says what is
    wrong). The end record's own count is not trusted: zipfile reads the directory by size."""
    try:
        end = zipfile._EndRecData(io.BytesIO(data))  # type: ignore[attr-defined]
    except Exception:  # hostile input: zipfile reports it below
        return None
    if not end:
        return None
    stop = end[zipfile._ECD_LOCATION]  # type: ignore[attr-defined]
    if end[zipfile._ECD_SIGNATURE] == zipfile.stringEndArchive64:  # type: ignore[attr-defined]
        stop -= zipfile.sizeEndCentDir64 + zipfile.sizeEndCentDir64Locator  # type: ignore[attr-defined]
    pos = max(0, stop - end[zipfile._ECD_SIZE])  # type: ignore[attr-defined]
    count = 0
    while count <= limit and pos + 46 <= stop and data[pos : pos + 4] == _CENTRAL_HEADER:
        name, extra, comment = struct.unpack_from("<HHH", data, pos + 28)
        pos += 46 + name + extra + comment
        count += 1
    return count


def read_zip(data: bytes) -> tuple[ZipBundle | None, list[BundleIssue]]:
    """Check and unpack a zip bundle. Returns ``(bundle, [])`` or ``(None, issues)``."""
    entries = _central_entries(data, MAX_ENTRIES)
    if entries is not None and entries > MAX_ENTRIES:
        return None, [_issue(INVALID, f"more than {MAX_ENTRIES} entries (files and directories)")]
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
        infos = archive.infolist()
    except Exception as exc:  # zipfile raises many types on hostile input (NotImplementedError, ...)
        return None, [_issue(INVALID, str(exc))]
    issues = _structure_issues(infos)
    if issues:
        return None, issues
    files: dict[str, bytes] = {}
    pack_yaml: bytes | None = None
    total = 0
    for info in infos:
        if _is_directory(info):
            continue
        name = normalize_member(info.filename)
        chunks: list[bytes] = []
        try:
            with archive.open(info) as member:
                while True:
                    chunk = member.read(_CHUNK)
                    if not chunk:
                        break
                    total += len(chunk)
                    if total > MAX_UNPACKED_BYTES:
                        return None, [_issue(TOO_BIG, info.filename)]
                    chunks.append(chunk)
        except Exception:  # a corrupt stream, a bad CRC, an unsupported feature: never trusted
            return None, [_issue(INVALID, info.filename)]
        content = b"".join(chunks)
        if name == PACK_YAML:
            pack_yaml = content
        else:
            files[name] = content
    if pack_yaml is None:  # pack.yaml exists but is a directory entry
        return None, [_issue(NO_PACK_YAML, "")]
    if len(pack_yaml) > MAX_PACK_YAML_BYTES:
        return None, [_issue(PACK_YAML_TOO_BIG, PACK_YAML)]
    return ZipBundle(pack_yaml=pack_yaml, files=files), []


_ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)


def build_zip(members: dict[str, bytes]) -> bytes:
    """A reproducible zip: fixed timestamps and modes, ``pack.yaml`` first, then sorted names."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as out:
        for name in sorted(members, key=lambda n: (n != PACK_YAML, n)):
            info = zipfile.ZipInfo(name, date_time=_ZIP_EPOCH)
            info.create_system = 3
            info.external_attr = 0o100644 << 16  # a regular file
            info.compress_type = zipfile.ZIP_DEFLATED
            out.writestr(info, members[name], compresslevel=9)
    return buffer.getvalue()


def _asset_paths(data: object) -> list[str]:
    """Every asset ``path`` of a raw pack document (version, challenge, case and item assets)."""
    found: list[str] = []

    def assets(owner: object) -> None:
        items = owner.get("assets") if isinstance(owner, dict) else None
        for asset in items if isinstance(items, list) else []:
            if isinstance(asset, dict) and isinstance(asset.get("path"), str):
                found.append(asset["path"].strip())

    def each(owner: object, key: str) -> list[object]:
        items = owner.get(key) if isinstance(owner, dict) else None
        return items if isinstance(items, list) else []

    if isinstance(data, dict):
        assets(data.get("version"))
        for challenge in each(data, "challenges"):
            assets(challenge)
        for input_set in each(data, "input_sets"):
            for case in each(input_set, "cases") + each(input_set, "items"):
                assets(case)
    return found


def member_name(path: str) -> str | None:
    """The zip member a relative asset path binds to, when a zip member can have that name
    (pack-format §2.2: exact, leading ``./`` ignored); None for a path no member can bind
    (absolute, leaving the root, or not in the normalized form of member names)."""
    if not path or is_absolute(path):
        return None
    name = normalize_asset_path(path)
    if "\\" in name or "\x00" in name or ".." in name.split("/") or normalize_member(name) != name:
        return None
    return name


class LeavesDirectory(OSError):
    """An asset path of a pack directory leads outside it through a symbolic link."""


def bundle_from_directory(directory: Path) -> bytes:
    """The bundle of a pack directory: the zip of ``pack.yaml`` and the files its relative
    asset paths name, so a directory validates exactly as that zip (other files, such as a
    README or recorded results, are not part of the bundle). ``pack.yaml`` alone when its
    assets name no relative path: nothing could bind, and the plain YAML validates as the
    zip would (and keeps the bytes, so a directory published before publishes the same).

    Each path the author wrote is looked up on its own: a path no zip member could have
    (``data/../x``, ``data//x``) or a missing file adds no member, and the validator then says
    "must name a file in the bundle" at that path. A symbolic link is followed while it stays
    inside the directory; one that leaves it raises :class:`LeavesDirectory`, and a file that
    is not regular (a FIFO, a device) :class:`NotABundle`. Files are read up to the unpacked
    limit of a zip (the validator then reports "must unpack to at most 50 MiB")."""
    from .yamlload import load_yaml

    root = directory.resolve()
    pack_yaml = read_regular_file(directory / PACK_YAML, MAX_PACK_YAML_BYTES)
    doc, _issues = load_yaml(pack_yaml)
    paths = [p for p in _asset_paths(doc.data if doc is not None else None) if p and not is_absolute(p)]
    if not paths:
        return pack_yaml
    members: dict[str, bytes] = {PACK_YAML: pack_yaml}
    budget = MAX_UNPACKED_BYTES - len(pack_yaml)
    for name in dict.fromkeys(n for n in map(member_name, paths) if n is not None):
        try:
            candidate = (root / name).resolve()
        except RuntimeError as exc:  # a symlink loop (Python 3.11 raises RuntimeError)
            raise OSError(f"{directory / name}: {exc}") from exc
        if not candidate.is_relative_to(root):
            raise LeavesDirectory(
                f"{directory / name} leaves the pack directory {directory} through a symbolic link; "
                "a pack directory's files must be inside it"
            )
        if not candidate.exists() or candidate.is_dir():
            continue
        if budget < 0:
            break  # already over the limit: the validator says so
        members[name] = read_regular_file(
            candidate,
            budget,
            display=directory / name,
            expected="an asset of a pack directory must be a file",
        )
        budget -= len(members[name])
    return build_zip(members)


EXPECTED_PATH = "PATH must be a pack.yaml file, a directory containing pack.yaml, or a .zip bundle"


class NotABundle(OSError):
    """PATH is a directory without ``pack.yaml``, or not a regular file; the message says
    what PATH must be."""


class BundleTooLarge(OSError):
    """PATH is a zip larger than the transport limit (``MAX_BUNDLE_BYTES``)."""


_FILE_KINDS = (
    (stat.S_ISFIFO, "a named pipe"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISDIR, "a directory"),
)


def _not_regular(path: Path, mode: int, expected: str) -> NotABundle:
    kind = next((name for test, name in _FILE_KINDS if test(mode)), "not a regular file")
    return NotABundle(f"{path} is not a regular file ({kind}); {expected}")


def _mib(limit: int) -> str:
    return f"{limit // (1024 * 1024)} MiB"


def read_regular_file(
    path: Path,
    limit: int,
    *,
    zip_limit: int | None = None,
    display: Path | None = None,
    expected: str = EXPECTED_PATH,
) -> bytes:
    """At most ``limit`` + 1 bytes of the regular file ``path`` (``zip_limit`` + 1 when it
    starts like a zip): more than the limit is enough for the validator's "must be at most
    5 MiB", and a bigger zip raises :class:`BundleTooLarge`. A device, a FIFO or a socket
    raises :class:`NotABundle` without being read: ``O_NONBLOCK`` keeps the open of a FIFO
    from waiting for a writer, and ``fstat`` judges the file that was opened."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise _not_regular(display or path, mode, expected)
        chunks: list[bytes] = []
        total = 0
        zipped = False
        while total <= limit:
            chunk = os.read(fd, min(1024 * 1024, limit + 1 - total))
            if not chunk:
                break
            if not chunks and zip_limit is not None and is_zip(chunk):
                limit, zipped = zip_limit, True
            chunks.append(chunk)
            total += len(chunk)
    finally:
        os.close(fd)
    if zipped and total > limit:
        raise BundleTooLarge(
            f"{display or path} is larger than {_mib(limit)}; a bundle must be at most {_mib(limit)}"
        )
    return b"".join(chunks)


def _packs_under(directory: Path, limit: int = 5) -> list[str]:
    """The names of up to ``limit`` subdirectories holding a ``pack.yaml`` (a hint)."""
    try:
        children = sorted(p for p in directory.iterdir() if p.is_dir())
    except OSError:
        return []
    return [p.name for p in children if (p / PACK_YAML).is_file()][:limit]


def read_bundle(path: Path, *, max_bytes: int = MAX_BUNDLE_BYTES) -> bytes:
    """The bytes of a bundle path: a YAML file, a zip file, or a pack directory.

    A YAML file is read up to its limit + 1 byte (the validator then says "must be at most
    5 MiB"), a zip up to ``max_bytes``. Raises ``OSError``: :class:`NotABundle` for a
    directory without ``pack.yaml`` or a path that is not a regular file,
    :class:`BundleTooLarge` for a zip over ``max_bytes``."""
    if path.is_dir():
        if not (path / PACK_YAML).is_file():
            packs = _packs_under(path)
            hint = f" (these subdirectories are packs: {', '.join(packs)})" if packs else ""
            raise NotABundle(f"{path} is a directory without a {PACK_YAML}{hint}; {EXPECTED_PATH}")
        return bundle_from_directory(path)
    return read_regular_file(path, MAX_PACK_YAML_BYTES, zip_limit=max_bytes)


def read_error_code(exc: OSError) -> str:
    """The CLI's error code for ``exc``: ``payload_too_large`` (as the API's 413), else
    ``io_error``."""
    return "payload_too_large" if isinstance(exc, BundleTooLarge) else "io_error"


def read_error_message(path: Path, exc: OSError) -> str:
    """What the CLI says when PATH cannot be read as a bundle."""
    if isinstance(exc, NotABundle | BundleTooLarge | LeavesDirectory):
        return str(exc)
    return f"cannot read {path}: {exc.strerror or exc}"
