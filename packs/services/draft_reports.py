"""The editor's validation report of a draft, stored per content and validator.

The editor shows a view of ``validate_bundle``'s report of the draft's bytes (counts, the
first issues, the side panel's outline). Each save used to validate the whole bundle, and
opening the editor validated it again: ~4-5 s each at 10,000 cases. The view is now stored
(``DraftReport``, one per draft) under a key naming exactly what it is of:

- the validator: a digest of the source of ``packs.bundle``, ``grading.engine``, the outline
  code and this module, and the versions of the libraries they parse and check with (a
  deployment that changes any of them computes every report again);
- the draft's text and, for each file, its path and the sha256 of the artifact's bytes
  (artifacts are content-addressed; a file whose artifact is gone counts as absent, as
  ``draft_bundle`` leaves it out).

A view is used only when its key is the draft's current key, so it is always what a full
``validate_bundle`` of the draft's bytes gives; publishing validates in full regardless.

A view not stored yet is computed by one request at a time per (draft, key), under a
PostgreSQL advisory lock of its transaction (on SQLite, a lock of the process): concurrent
loads wait for it and answer what it stored (``draft_report``). Any member who can read the
draft (a viewer too) may cause the one validation: it is what the editor shows them.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib
import importlib.metadata
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from django.db import IntegrityError, OperationalError, connection, transaction

from packs.models import Artifact, Draft, DraftReport
from packs.services import yaml_edit

# The editor lists this many issues (errors first); the counts above the list are whole. A
# 10,000-case pack with a warning per case made every autosave answer 5.7 MB of list items.
REPORT_ITEMS_SHOWN = 200
# The side panel lists this many cases of each input set (the count is whole).
OUTLINE_CASES_SHOWN = 200

# Whatever validate_bundle and the view below run: their source (modules and packages, every
# .py file below a package), and these libraries.
_VALIDATOR_SOURCES = ("packs.bundle", "grading.engine", "packs.services.yaml_edit", __name__)
_VALIDATOR_LIBRARIES = ("PyYAML", "pydantic", "pydantic-core", "google-re2", "ruamel.yaml", "orjson")


@functools.cache
def validator_fingerprint() -> str:
    """A digest of the validator's source files and library versions (once per process)."""
    digest = hashlib.sha256()
    for name in _VALIDATOR_SOURCES:
        path = Path(importlib.import_module(name).__file__ or "")
        if path.name == "__init__.py":
            files = sorted(path.parent.rglob("*.py"))
            root = path.parent.parent
        else:
            files, root = [path], path.parent
        for file in files:
            digest.update(str(file.relative_to(root)).encode() + b"\0" + file.read_bytes() + b"\0")
    for library in _VALIDATOR_LIBRARIES:
        try:
            version = importlib.metadata.version(library)
        except importlib.metadata.PackageNotFoundError:
            version = "-"
        digest.update(f"{library}=={version}\0".encode())
    return digest.hexdigest()


def report_key(draft: Draft) -> str:
    """What the draft's report is of: the validator, the text, and each file's bytes."""
    shas = {
        str(public_id): sha256
        for public_id, sha256 in Artifact.objects.filter(
            workspace_id=draft.workspace_id, public_id__in=list(draft.files.values())
        ).values_list("public_id", "sha256")
    }
    files = [[path, shas.get(artifact_id)] for path, artifact_id in sorted(draft.files.items())]
    digest = hashlib.sha256(validator_fingerprint().encode() + b"\0")
    digest.update(json.dumps(files, ensure_ascii=False).encode() + b"\0")
    digest.update(draft.bundle_text.encode("utf-8", "surrogatepass"))
    return digest.hexdigest()


def report_view(report: Any, text: str) -> dict[str, Any]:
    """The editor's view of a ``BundleReport`` of ``text``: what the page shows of it.

    ``valid``, ``error_count``, ``warning_count``, ``items`` (the first
    ``REPORT_ITEMS_SHOWN`` issues, errors first, each ``to_dict()`` plus ``kind``),
    ``items_total``, and ``outline`` (None when the text did not parse into a mapping)."""
    body = report.to_body()
    items = [{**e, "kind": "error"} for e in body["errors"]] + [
        {**w, "kind": "warning"} for w in body["warnings"]
    ]
    return {
        "valid": body["valid"],
        "error_count": len(body["errors"]),
        "warning_count": len(body["warnings"]),
        "items": items[:REPORT_ITEMS_SHOWN],
        "items_total": len(items),
        "outline": _outline(report, body, text),
    }


def _outline(report: Any, body: dict[str, Any], text: str) -> dict[str, Any] | None:
    # Only text the bundle parser read without a container-level error (syntax, aliases,
    # size: reported with field "bundle") has one; it is read from the report's parse.
    if report.document is None or any(e["field"] == "bundle" for e in body["errors"]):
        return None
    try:
        outline = yaml_edit.outline(text, document=report.document)
    except yaml_edit.YamlEditError:
        return None
    return {
        "challenges": outline["challenges"],
        "input_sets": [
            {
                "key": s["key"],
                "name": s["name"],
                "case_count": len(s["cases"]),
                "more_cases": max(0, len(s["cases"]) - OUTLINE_CASES_SHOWN),
                "cases": [
                    {"case_key": c["case_key"], "challenge_key": c["challenge_key"]}
                    for c in s["cases"][:OUTLINE_CASES_SHOWN]
                ],
            }
            for s in outline["input_sets"]
        ],
    }


def stored_report(draft: Draft) -> dict[str, Any] | None:
    """The stored view of the draft as it is now, or None when none is stored for it."""
    return _stored_body(draft, report_key(draft))


def draft_report(draft: Draft, *, wait: float | None = None) -> dict[str, Any] | None:
    """The editor's view of the draft's report: the stored one when it is of the draft as it
    is now, else computed by a full ``validate_bundle`` and stored.

    One request at a time computes the report of a (draft, key): another request for the
    same one waits for it (up to ``wait`` seconds, ``REPORT_WAIT_SECONDS`` by default) and
    answers the report it stored, and None when it is still being computed then (the editor
    shows "validating" and asks again). Two tabs, a second click or two collaborators opening
    a draft whose report is not stored validated it once each, on the same cores."""
    key = report_key(draft)
    body = _stored_body(draft, key)
    if body is not None:
        return body
    wait = REPORT_WAIT_SECONDS if wait is None else wait
    if connection.vendor == "postgresql":
        try:
            with transaction.atomic():  # the lock is the transaction's: released at its end
                _advisory_turn(_lock_id(draft, key), wait)
                body = _stored_body(draft, key)  # stored by the request this one waited for
                return body if body is not None else _validate_and_store(draft, key)
        except _StillValidating:
            return None
    # SQLite (``make run``): no advisory locks, and a transaction held over the validation
    # would hold the database's write lock; a lock of this process (the development server
    # is one process, its requests threads).
    with _process_turn((draft.pk, key), wait) as turn:
        if not turn:
            return None
        body = _stored_body(draft, key)
        return body if body is not None else _validate_and_store(draft, key)


# A request finding the report of its (draft, key) being computed by another waits this
# long for it, then answers "still validating" (a full validation of a 10,000-case draft
# takes ~4 s here).
REPORT_WAIT_SECONDS = 10.0


class _StillValidating(Exception):
    """Another request computes this report and did not finish within the wait."""


def _stored_body(draft: Draft, key: str) -> dict[str, Any] | None:
    return DraftReport.objects.filter(draft=draft, key=key).values_list("body", flat=True).first()


def _lock_id(draft: Draft, key: str) -> int:
    """The advisory lock of a (draft, key): 64 bits of a digest of both (a collision only
    makes two validations wait for each other)."""
    digest = hashlib.sha256(f"draft-report\0{draft.pk}\0{key}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def _advisory_turn(lock_id: int, wait: float) -> None:
    """Take the transaction-level advisory lock ``lock_id``, waiting at most ``wait`` seconds
    (:class:`_StillValidating` then); the transaction's lock timeout is as it was after."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('lock_timeout')")
        (before,) = cursor.fetchone()
        cursor.execute("SELECT set_config('lock_timeout', %s, true)", [f"{max(1, round(wait * 1000))}ms"])
        try:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [lock_id])
        except OperationalError as exc:
            if getattr(exc.__cause__, "sqlstate", None) != "55P03":  # lock_not_available
                raise
            raise _StillValidating from None  # leaving the atomic block rolls it back
        cursor.execute("SELECT set_config('lock_timeout', %s, true)", [before])


_process_locks: dict[tuple[Any, str], list[Any]] = {}  # (draft pk, key) -> [lock, users]
_process_locks_guard = threading.Lock()


@contextlib.contextmanager
def _process_turn(ident: tuple[Any, str], wait: float) -> Iterator[bool]:
    """Whether this thread got the process's lock of ``ident`` within ``wait`` seconds; the
    table keeps only the locks in use."""
    with _process_locks_guard:
        entry = _process_locks.setdefault(ident, [threading.Lock(), 0])
        entry[1] += 1
    try:
        got = entry[0].acquire(timeout=wait)
        try:
            yield got
        finally:
            if got:
                entry[0].release()
    finally:
        with _process_locks_guard:
            entry[1] -= 1
            if not entry[1]:
                del _process_locks[ident]


def _validate_and_store(draft: Draft, key: str) -> dict[str, Any]:
    from packs.services.drafts import draft_validate

    body = report_view(draft_validate(draft=draft), draft.bundle_text)
    row = DraftReport(draft=draft, key=key, revision=draft.revision, body=body)
    try:
        with transaction.atomic():
            DraftReport.objects.bulk_create(
                [row],
                update_conflicts=True,
                unique_fields=["draft"],
                update_fields=["key", "revision", "body", "created_at"],
            )
    except IntegrityError:  # the draft was deleted (published) meanwhile: nothing to keep
        pass
    return body
