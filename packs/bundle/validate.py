"""``validate_bundle``: one pass over a pack bundle, every issue with its position (pack-format §2-§10).

Order of work: zip checks (any archive error ends processing), the YAML loader (a syntax
error ends processing), the model check (types, required keys, unknown keys), the semantic
rules of the document, the evaluation spec's rules (grading registry), the per-case rules
and lints. Issues are then placed (line/column from the YAML), sorted by (line, column,
field, message), and under ``strict`` every warning becomes an error keeping its rule.
"""

from __future__ import annotations

import logging
import math
from typing import Any

from grading.engine import registry
from grading.engine.modelcheck import Issue, Path, check_model
from grading.engine.spec import EvaluationSpec

from . import archive
from .casechecks import check_cases
from .checks import DocChecker, check_document
from .issues import BundleIssue, format_path, sort_issues
from .models import Bundle, Version
from .report import BundleReport, build_manifest, normalize_bundle
from .yamlload import YamlDocument, load_yaml

logger = logging.getLogger(__name__)

# Tests set this to surface bugs; in production an internal failure becomes a field error.
RAISE_INTERNAL_ERRORS = False

SPEC: Path = ("version", "evaluation_spec")
_ROOT_KEYS = frozenset(info.alias or name for name, info in Bundle.model_fields.items())
_VERSION_KEYS = frozenset(info.alias or name for name, info in Version.model_fields.items())
_SPEC_KEYS = frozenset(info.alias or name for name, info in EvaluationSpec.model_fields.items())
_SUGGESTING: frozenset[Path] = frozenset({(), ("version",), SPEC})
_MESSAGE_OVERRIDES: dict[tuple[Path, str], str] = {
    (("version", "tool_policy", "allowed_tool_kinds"), "must be a list"): (
        "must be an array of supported tool kind strings"
    ),
}


def _unknown_key_severity(path: Path) -> Any:
    # Upstream rejects unknown keys only under version.evaluation_spec (pack-format §3).
    return "error" if path[:2] == SPEC and len(path) > 2 else "warning"


def _suggest(mapping_path: Path, key: str, allowed: list[str]) -> str | None:
    """Rule (d) of §3: the key belongs at the root, in ``version`` or in the evaluation spec."""
    if len(mapping_path) == 2 and mapping_path[0] == "challenges" and key == "input_set_keys":
        return '"input_sets[].cases[].challenge_key"'  # a known upstream stray key (§1)
    if mapping_path not in _SUGGESTING:
        return None  # a generic word (name, key) deep inside a case is not a misplaced root key
    if key in _ROOT_KEYS and mapping_path != ():
        return f'top-level "{key}"'
    if key in _VERSION_KEYS and mapping_path != ("version",):
        return f'"version.{key}"'
    if key in _SPEC_KEYS and mapping_path != SPEC:
        return f'"version.evaluation_spec.{key}"'
    return None


def _value_at(data: Any, path: Path) -> Any:
    for part in path:
        if isinstance(data, dict) and isinstance(part, str):
            data = data.get(part)
        elif isinstance(data, list) and isinstance(part, int) and 0 <= part < len(data):
            data = data[part]
        else:
            return None
    return data


def _not_finite(value: Any) -> bool:
    return isinstance(value, float) and not math.isfinite(value)


def _placed(issue: Issue, doc: YamlDocument) -> BundleIssue:
    path = issue.path
    if issue.anchor == "key":
        line, column = doc.key_position(path)
    elif issue.anchor == "parent":
        line, column = doc.parent_position(path)
    else:
        line, column = doc.value_position(path)
    message = _MESSAGE_OVERRIDES.get((path, issue.message), issue.message)
    if message == "must be an integer" and _not_finite(_value_at(doc.data, path)):
        # .inf, .nan, 1e400, or an integer beyond the double range (pack-format §2.1)
        message = "must be a finite number"
    return BundleIssue(
        field=format_path(path) or "bundle",
        message=message,
        line=line,
        column=column,
        detail=issue.detail or "",
        rule=issue.rule,
        severity=issue.severity,
    )


def _prefixed(issues: list[Issue], prefix: Path) -> list[Issue]:
    for issue in issues:
        issue.path = prefix + tuple(issue.path)
    return issues


def _report(issues: list[BundleIssue], *, strict: bool, is_zip: bool = False) -> BundleReport:
    if strict:
        issues = [issue.as_error() for issue in issues]
    ordered = sort_issues(issues)
    errors = [issue for issue in ordered if not issue.is_warning]
    warnings = [issue for issue in ordered if issue.is_warning]
    return BundleReport(valid=not errors, errors=errors, warnings=warnings, is_zip=is_zip)


def validate_bundle(data: bytes | str, *, strict: bool = False, filename: str | None = None) -> BundleReport:
    """Validate a pack bundle: a YAML document or a zip archive (detected by its magic bytes).

    Never raises on any input: malformed input always becomes field errors. ``strict``
    turns every warning into an error. ``filename`` only refines the diagnosis (a ``.zip``
    name whose bytes are not a zip archive).
    """
    try:
        return _validate(data.encode("utf-8") if isinstance(data, str) else bytes(data), strict, filename)
    except Exception as exc:
        if RAISE_INTERNAL_ERRORS:
            raise
        logger.exception("pack validation failed internally")
        issue = BundleIssue(
            "bundle", "could not be validated", detail=f"internal error: {type(exc).__name__}"
        )
        return BundleReport(valid=False, errors=[issue])


def _validate(data: bytes, strict: bool, filename: str | None) -> BundleReport:
    files: dict[str, bytes] | None = None
    is_zip = archive.is_zip(data)
    if is_zip:
        bundle_zip, archive_issues = archive.read_zip(data)
        if bundle_zip is None:
            return _report(archive_issues, strict=strict, is_zip=True)
        yaml_bytes, files = bundle_zip.pack_yaml, bundle_zip.files
    elif filename is not None and filename.lower().endswith(".zip"):
        return _report([BundleIssue("bundle", archive.INVALID, detail=filename)], strict=strict)
    else:
        yaml_bytes = data
    doc, fatal = load_yaml(yaml_bytes)
    if doc is None:
        return _report(fatal, strict=strict, is_zip=is_zip)

    result = check_model(
        Bundle,
        doc.data,
        unknown_key_severity=_unknown_key_severity,
        scalar_text=doc.scalar_text,
        suggest=_suggest,
    )
    issues: list[Issue] = list(result.issues)
    bad = result.error_paths
    cleaned = result.cleaned if isinstance(result.cleaned, dict) else {}
    checker = DocChecker(bad)
    norm = check_document(checker, cleaned, files=files)

    raw_version = cleaned.get("version")
    version: dict[str, Any] = raw_version if isinstance(raw_version, dict) else {}
    spec = version.get("evaluation_spec")
    if isinstance(spec, dict) and not any(path in bad for path in (("version",), SPEC)):
        spec_bad = frozenset(p[2:] for p in bad if p[:2] == SPEC)
        mode = norm.execution_mode or "native"
        issues += _prefixed(
            registry.check_evaluation_spec(spec, execution_mode=mode, bad_paths=spec_bad), SPEC
        )
        issues += _prefixed(registry.lint_evaluation_spec(spec, bad_paths=spec_bad), SPEC)
    check_cases(checker, cleaned, norm, files=files)
    issues += checker.issues

    placed = list(doc.issues)
    placed += [_placed(issue, doc) for issue in issues]
    bound: set[str] = norm.bound_members
    for member in sorted(set(files or ()) - bound):
        placed.append(
            BundleIssue(
                "bundle",
                "is not used by any asset",
                detail=member,
                rule="unused_bundle_file",
                severity="warning",
            )
        )
    report = _report(placed, strict=strict, is_zip=is_zip)
    report.document = doc
    if report.valid:
        if result.instance is None:  # no error reported, yet the model did not validate
            raise RuntimeError("the document validated without a model instance")
        report.legacy_sets = frozenset(
            index for index, s in enumerate(result.instance.input_sets) if s.items and not s.cases
        )
        bundle = normalize_bundle(result.instance)
        report.bundle = bundle
        report.manifest = build_manifest(bundle)
        report.files = {member: content for member, content in (files or {}).items() if member in bound}
    return report
