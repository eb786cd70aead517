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
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.metadata
import json
from pathlib import Path
from typing import Any

from django.db import IntegrityError, transaction

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
        outline = yaml_edit.outline(text, data=report.document.data)
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
    return (
        DraftReport.objects.filter(draft=draft, key=report_key(draft)).values_list("body", flat=True).first()
    )


def draft_report(draft: Draft) -> dict[str, Any]:
    """The editor's view of the draft's report: the stored one when it is of the draft as it
    is now, else computed by a full ``validate_bundle`` and stored."""
    key = report_key(draft)
    body = DraftReport.objects.filter(draft=draft, key=key).values_list("body", flat=True).first()
    if body is not None:
        return body
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
