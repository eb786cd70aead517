"""The typed bundle models back from a published version's stored rows (pack-format §6).

Publishing validates a bundle once and stores its normalized forms: the manifest
(``PackVersion.manifest``, ``packs.bundle.report.build_manifest``) and each case's document
(``Case.document``, ``packs.bundle.report.case_document``). These functions invert those two
forms, so a run can build one case's ``CaseDef`` / ``GradeContext`` with the bundle's own
conversion (``packs.bundle.report.case_def`` and ``BundleReport.grade_context``) without
validating the whole stored source again:

- ``manifest_bundle(members)``: the version as a case-less ``Bundle`` (pack, version,
  challenges) from the manifest members named in ``MANIFEST_MEMBERS``;
- ``stored_case(challenge_key, case_key, document)``: one stored case document as the
  bundle's ``Case``.
"""

from __future__ import annotations

from typing import Any

from .models import Bundle, Case
from .report import CASE_SCHEMA_VERSION

# The manifest members ``manifest_bundle`` reads (never ``input_sets``: its cases are read
# one at a time from their rows).
MANIFEST_MEMBERS = (
    "pack",
    "version",
    "tool_policy",
    "filesystem",
    "evaluation_spec",
    "sandbox",
    "challenges",
)


class StoredFormError(ValueError):
    """A stored form does not read back as the bundle's models (a corrupt row)."""


def manifest_bundle(members: dict[str, Any]) -> Bundle:
    """The version without input sets, from the stored manifest's ``MANIFEST_MEMBERS``
    (``build_manifest`` moved the version's tool policy, filesystem, evaluation spec and
    sandbox to the top level; they go back under ``version``)."""
    missing = [
        name for name in ("pack", "version", "evaluation_spec", "challenges") if members.get(name) is None
    ]
    if missing:
        raise StoredFormError(f"the stored manifest has no {', '.join(missing)}: republish the version")
    version = {k: v for k, v in members["version"].items() if k != "sandbox_template_id"}
    version["tool_policy"] = members.get("tool_policy") or {}
    version["filesystem"] = members.get("filesystem") or {}
    version["evaluation_spec"] = members["evaluation_spec"]
    if members.get("sandbox") is not None:
        version["sandbox"] = members["sandbox"]
    try:
        return Bundle.model_validate(
            {"pack": members["pack"], "version": version, "challenges": members["challenges"]}
        )
    except ValueError as exc:
        raise StoredFormError(f"the stored manifest does not read back: {exc}") from exc


def stored_case(challenge_key: str, case_key: str, document: Any) -> Case:
    """A stored case document (the v1 envelope, or a legacy payload-only case's payload) as
    the bundle's ``Case``; ``case_key`` is the row's effective key."""
    if isinstance(document, dict) and document.get("schema_version") == CASE_SCHEMA_VERSION:
        fields = {k: v for k, v in document.items() if k != "schema_version"}
        fields.setdefault("case_key", case_key)
    else:
        fields = {"case_key": case_key, "payload": document}
    try:
        return Case.model_validate({**fields, "challenge_key": challenge_key})
    except ValueError as exc:
        raise StoredFormError(
            f"case {challenge_key}/{case_key}: the stored document does not read back: {exc}"
        ) from exc
