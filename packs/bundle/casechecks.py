"""Rules that need the cases: per-case evaluation-spec checks and lints (pack-format §4.3, §9, §10).

- RE2 (and json_path_match syntax) of patterns that come from case data (``case.*``
  ``expected_from``): compiled per case, the error goes on the case value.
- ``{{x}}`` of a code_execution ``test_command`` must render for every case.
- Lints L1 answer_leak, L2 duplicate_case, L3 regex_matches_empty (per-case patterns),
  L5 unresolved_reference. The spec-only lints (L3 on literals, L4, L6, L7, L8) are the
  grading registry's ``lint_evaluation_spec``; L9 is the validator's (it knows the zip).

Case references are resolved here against the *cleaned* case data, with the path of the
value they reach, so an error can point at the case value. Semantics follow
``grading.engine.refs`` (the grading-time resolver): an asset's content resolves when a
file will be stored for it (a bound zip member or an ``artifact_id``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from grading.engine import jsontext
from grading.engine.configs.checks import (
    MISSING,
    check_json_path_expectation,
    re2_error,
    re2_matches_empty,
)
from grading.engine.modelcheck import Path
from grading.engine.refs import ARTIFACT_FIELDS
from grading.engine.refsyntax import EvidenceRef, RefKind, try_parse_reference
from grading.engine.registry import VALIDATOR_TYPES, evidence_references
from grading.engine.types import canonical_json

from . import archive
from .checks import (
    _INNER_SPACE,
    SPACED_NAME,
    UNRESOLVED_PLACEHOLDER,
    DocChecker,
    Normalized,
    NormCase,
    entries,
    never_a_name,
    placeholders,
    resolves,
    template_issues,
    template_scope,
)
from .issues import format_path

SPEC: Path = ("version", "evaluation_spec")
INVALID_RE2 = "must be a valid RE2 pattern"
MAX_CHAIN = 8
_PATTERN_KINDS = frozenset({RefKind.CASE_PAYLOAD, RefKind.CASE_INPUT, RefKind.CASE_EXPECTATION})
_L5_KINDS = frozenset({RefKind.CASE_PAYLOAD, RefKind.CASE_INPUT, RefKind.CASE_EXPECTATION, RefKind.ARTIFACT})
# The case members a reference reads (through inputs, expectation sources and assets): it
# is not linted for a case where one of them already failed (§3, no cascades).
_REF_READS = {
    RefKind.CASE_PAYLOAD: frozenset({"payload"}),
    RefKind.CASE_INPUT: frozenset({"inputs", "assets"}),
    RefKind.CASE_EXPECTATION: frozenset({"expectations", "inputs", "assets"}),
    RefKind.ARTIFACT: frozenset({"artifacts", "assets", "inputs", "expectations"}),
}


def as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    try:
        return canonical_json(value)
    except (TypeError, ValueError):
        return str(value)


# ---------------------------------------------------------------------------
# Resolving case references with the path of the value
# ---------------------------------------------------------------------------

OK, MISSING_REF, CONTENT = "ok", "missing", "content"


@dataclass(slots=True)
class Found:
    state: str  # ok | missing | content (an asset's file: resolves at grading, unknown now)
    value: Any = None
    path: Path = ()


def _walk(value: Any, segments: Iterable[str], path: Path) -> Found:
    for segment in segments:
        if isinstance(value, dict):
            if segment not in value:
                return Found(MISSING_REF)
            value, path = value[segment], path + (segment,)
        elif (
            isinstance(value, list) and segment.isdigit() and segment.isascii() and int(segment) < len(value)
        ):
            value, path = value[int(segment)], path + (int(segment),)
        else:
            return Found(MISSING_REF)
    return Found(OK, value, path)


@dataclass
class CaseView:
    """A case's inputs, expectations and visible assets, indexed for resolution."""

    case: NormCase
    version_assets: dict[str, bool]  # key -> a file will be stored
    inputs: dict[str, tuple[int, dict[str, Any]]] = field(default_factory=dict)
    expectations: dict[str, tuple[int, dict[str, Any]]] = field(default_factory=dict)
    assets: dict[str, bool] = field(default_factory=dict)  # visible asset key -> has file
    asset_paths: dict[str, bool] = field(default_factory=dict)  # case asset path -> has file

    @classmethod
    def build(
        cls, case: NormCase, version_assets: dict[str, bool], files: dict[str, bytes] | None
    ) -> CaseView:
        view = cls(case, version_assets)
        raw = case.data
        named: set[str] = set()
        for name, target in (("inputs", view.inputs), ("expectations", view.expectations)):
            for index, item in enumerate(_list(raw, name)):
                if isinstance(item, dict) and isinstance(item.get("key"), str):
                    target.setdefault(item["key"], (index, item))
                    if isinstance(item.get("artifact_key"), str):
                        named.add(item["artifact_key"])
                    source = item.get("source")
                    if isinstance(source, str) and source.startswith("artifact:"):
                        named.add(source[len("artifact:") :].strip())
        for ref in _list(raw, "artifacts"):
            if isinstance(ref, dict) and isinstance(ref.get("key"), str):
                named.add(ref["key"])
        view.assets = {k: v for k, v in version_assets.items() if k in named}
        for asset in _list(raw, "assets"):
            if isinstance(asset, dict) and isinstance(asset.get("key"), str):
                has_file = asset_has_file(asset, files)
                view.assets[asset["key"]] = has_file
                if isinstance(asset.get("path"), str):
                    view.asset_paths.setdefault(asset["path"], has_file)  # the first, as the grader
        return view

    def resolve(self, ref: EvidenceRef) -> Found:
        cp = self.case.path
        if ref.kind is RefKind.CASE_PAYLOAD:
            payload = self.case.data.get("payload")
            return _walk(payload if payload is not None else {}, ref.path, cp + ("payload",))
        if ref.kind is RefKind.CASE_INPUT:
            return self._walk_found(self._input(ref.name or "", 1), ref.path)
        if ref.kind is RefKind.CASE_EXPECTATION:
            return self._walk_found(self._expectation(ref.name or ""), ref.path)
        if ref.kind is RefKind.ARTIFACT:
            # As the grader reads it: an asset key may hold dots, and only a trailing
            # key|kind|path|media_type|content is a field (``grading.engine.refs._parse``).
            segments = (ref.name or "", *ref.path)
            name, last = ".".join(segments), None
            if len(segments) > 1 and segments[-1] in ARTIFACT_FIELDS:
                name, last = ".".join(segments[:-1]), segments[-1]
            has_file = self.assets.get(name)
            if has_file is None:
                return Found(MISSING_REF)
            if last == "content":
                return Found(CONTENT) if has_file else Found(MISSING_REF)
            return Found(OK)
        return Found(OK)

    def _walk_found(self, found: Found, segments: tuple[str, ...]) -> Found:
        if found.state != OK or not segments:
            return found
        value = found.value
        if isinstance(value, str):
            # The grader walks into a text value as JSON (``refs._walk_resolved``); a value
            # reached inside it has no place of its own in the YAML: the text's is used.
            try:
                value = jsontext.loads(value)
            except ValueError:
                return Found(MISSING_REF)
            walked = _walk(value, segments, found.path)
            return Found(walked.state, walked.value, found.path)
        return _walk(value, segments, found.path)

    def _content(self, has_file: bool | None) -> Found:
        return Found(CONTENT) if has_file else Found(MISSING_REF)

    def _input(self, key: str, depth: int) -> Found:
        if depth > MAX_CHAIN or key not in self.inputs:
            return Found(MISSING_REF)
        index, item = self.inputs[key]
        if "value" in item:
            return Found(OK, item["value"], self.case.path + ("inputs", index, "value"))
        if isinstance(item.get("artifact_key"), str):
            return self._content(self.assets.get(item["artifact_key"]))
        if isinstance(item.get("path"), str):
            return self._content(self.asset_paths.get(item["path"]))
        return Found(MISSING_REF)

    def _expectation(self, key: str) -> Found:
        if key not in self.expectations:
            return Found(MISSING_REF)
        index, item = self.expectations[key]
        if "value" in item:
            return Found(OK, item["value"], self.case.path + ("expectations", index, "value"))
        source = item.get("source")
        if isinstance(source, str) and source.startswith("input:"):
            return self._input(source[len("input:") :].strip(), 2)
        if isinstance(source, str) and source.startswith("artifact:"):
            return self._content(self.version_assets.get(source[len("artifact:") :].strip()))
        if isinstance(item.get("artifact_key"), str):
            return self._content(self.assets.get(item["artifact_key"]))
        return Found(MISSING_REF)


def _list(raw: dict[str, Any], name: str) -> list[Any]:
    value = raw.get(name)
    return value if isinstance(value, list) else []


def asset_has_file(asset: dict[str, Any], files: dict[str, bytes] | None) -> bool:
    """Whether a file will be stored for this asset: an artifact id or a bound zip member."""
    if asset.get("artifact_id") is not None:
        return True
    path = asset.get("path")
    if files is None or not isinstance(path, str) or archive.is_absolute(path):
        return False
    return archive.normalize_asset_path(path) in files


# ---------------------------------------------------------------------------
# What the spec asks of every case
# ---------------------------------------------------------------------------


@dataclass
class SpecPlan:
    patterns: list[tuple[Path, EvidenceRef, str, bool]] = field(
        default_factory=list
    )  # path, ref, flags, lint
    json_paths: list[tuple[Path, EvidenceRef]] = field(default_factory=list)
    commands: list[tuple[Path, str]] = field(default_factory=list)  # test_commands with a {{...}}
    references: list[tuple[Path, EvidenceRef]] = field(default_factory=list)  # L5
    answer_keys: set[str] = field(default_factory=set)  # L1


def _plan(c: DocChecker, spec: dict[str, Any]) -> SpecPlan:
    plan = SpecPlan()
    checks_declared = bool(spec.get("post_execution_checks"))
    for index, validator, path in entries(c, spec, "validators", SPEC):
        vtype = validator.get("type")
        policy = VALIDATOR_TYPES.get(vtype) if isinstance(vtype, str) else None
        raw_config = validator.get("config")
        config: dict[str, Any] = raw_config if isinstance(raw_config, dict) else {}
        ep = path + ("expected_from",)
        expected = try_parse_reference(validator.get("expected_from")) if not c.bad(ep) else None
        if policy is not None and policy.expected_from == "ignored":
            expected = None
        if expected is not None and expected.kind in _PATTERN_KINDS:
            if vtype == "regex_match" and not c.bad(path + ("config",)):
                flags = config.get("flags")
                prefix = ""
                if isinstance(flags, str) and flags and set(flags) <= set("ims"):
                    prefix = "(?" + "".join(sorted(set(flags))) + ")"
                plan.patterns.append((ep, expected, prefix, True))
            elif vtype == "file_content_match" and config.get("match_mode") == "regex":
                plan.patterns.append((ep, expected, "", True))
            elif vtype == "json_path_match":
                plan.json_paths.append((ep, expected))
        if vtype == "code_execution" and isinstance(config.get("test_command"), str):
            tp = path + ("config", "test_command")
            if not c.bad(tp) and placeholders(config["test_command"]):
                plan.commands.append((tp, config["test_command"]))
        for name in ("target", "expected_from"):
            ref = None if c.bad(path + (name,)) else try_parse_reference(validator.get(name))
            if ref is None or (
                name == "expected_from" and policy is not None and policy.expected_from == "ignored"
            ):
                continue
            if ref.kind in _L5_KINDS or (ref.kind is RefKind.FILE and not checks_declared):
                plan.references.append((path + (name,), ref))
            if name == "expected_from" and ref.kind is RefKind.CASE_EXPECTATION and ref.name:
                plan.answer_keys.add(ref.name)
        del index
    for rel, ref in evidence_references(spec):
        if rel[:1] != ("llm_judges",) or c.bad(SPEC + rel):
            continue
        if ref.kind in _L5_KINDS or (ref.kind is RefKind.FILE and not checks_declared):
            plan.references.append((SPEC + rel, ref))
        if rel[-1] == "reference_from" and ref.kind is RefKind.CASE_EXPECTATION and ref.name:
            plan.answer_keys.add(ref.name)
    return plan


def render(text: str, scope: dict[str, Any]) -> str:
    """``{{name}}`` rendered from the scope (unresolved placeholders stay verbatim)."""
    from .checks import _PLACEHOLDER

    def sub(match: Any) -> str:
        name = match.group(1).strip()
        if _INNER_SPACE.search(name):
            return match.group(0)  # as the grader renders it: never a name with whitespace
        if name in scope:
            return as_text(scope[name])
        found = _walk(scope, name.split("."), ())
        return as_text(found.value) if found.state == OK else match.group(0)

    return _PLACEHOLDER.sub(sub, text) if "{{" in text else text


def _leaves(value: Any, out: list[str]) -> None:
    if isinstance(value, dict):
        for item in value.values():
            _leaves(item, out)
    elif isinstance(value, list):
        for item in value:
            _leaves(item, out)
    elif value is not None:
        out.append(as_text(value))


def check_cases(
    c: DocChecker, data: dict[str, Any], norm: Normalized, *, files: dict[str, bytes] | None
) -> None:
    raw_version = data.get("version")
    version: dict[str, Any] = raw_version if isinstance(raw_version, dict) else {}
    spec = version.get("evaluation_spec")
    spec = spec if isinstance(spec, dict) and not c.bad(SPEC) else {}
    plan = _plan(c, spec)
    version_assets = {
        asset["key"]: asset_has_file(asset, files)
        for _, asset, _path in entries(c, version, "assets", ("version",))
        if isinstance(asset.get("key"), str)
    }
    challenges: dict[str, tuple[Path, str]] = {}
    for _, challenge, path in entries(c, data, "challenges", ()):
        key, text = challenge.get("key"), challenge.get("instructions")
        if isinstance(key, str) and isinstance(text, str) and not c.bad(path + ("instructions",)):
            challenges.setdefault(key, (path + ("instructions",), text))
    for cases in norm.sets.values():
        seen: dict[str, NormCase] = {}
        for case in cases:
            view = CaseView.build(case, version_assets, files)
            if not case.template_ok:
                # Its payload or inputs failed: what renders or compares them would only
                # repeat that error (§3). The rules reading other members still run.
                _case_spec_rules(c, case, view, None, plan)
                continue
            scope = template_scope(case.data)
            _case_spec_rules(c, case, view, scope, plan)
            instructions = challenges.get(case.challenge_key or "")
            rendered = _lint_instructions(c, case, scope, instructions)
            _lint_answer_leak(c, case, view, scope, rendered, plan)
            signature = _signature(case)
            if signature is None:
                continue
            if signature in seen:
                c.warn(case.path, f"duplicates {seen[signature].label}", "duplicate_case")
            else:
                seen[signature] = case


def _signature(case: NormCase) -> str | None:
    try:
        return canonical_json([case.challenge_key, case.data.get("payload") or {}, _inputs_of(case)])
    except (TypeError, ValueError):  # a non-finite number, already an error
        return None


def _inputs_of(case: NormCase) -> Any:
    inputs = case.data.get("inputs")
    return inputs if isinstance(inputs, list) else []


def _case_spec_rules(
    c: DocChecker, case: NormCase, view: CaseView, scope: dict[str, Any] | None, plan: SpecPlan
) -> None:
    """``scope`` is None when the case's template context already failed."""
    for path, ref, prefix, lint in plan.patterns:
        found = view.resolve(ref)
        if found.state != OK or c.bad(found.path):
            continue
        pattern = prefix + as_text(found.value)
        reason = re2_error(pattern)
        if reason is not None:
            c.err(found.path, INVALID_RE2, detail=reason)
        elif lint and re2_matches_empty(pattern):
            c.warn(found.path, "matches the empty string, so it accepts any output", "regex_matches_empty")
        del path
    for _path, ref in plan.json_paths:
        found = view.resolve(ref)
        if found.state != OK or c.bad(found.path):
            continue
        for message, detail in check_json_path_expectation(as_text(found.value)):
            c.err(found.path, message, detail=detail)
    for path, command in plan.commands:
        if scope is None:
            continue
        unresolved, spaced = template_issues(command, scope)
        for name in unresolved:
            c.err(path, UNRESOLVED_PLACEHOLDER % name, detail=case.label)
        if spaced is not None:
            c.warn(
                path,
                f"does not resolve for {case.label}",
                "unresolved_reference",
                detail=f"{{{{{spaced}}}}}: {SPACED_NAME}",
            )
    for path, ref in plan.references:
        if case.failed and case.failed & _REF_READS.get(ref.kind, frozenset()):
            continue
        if ref.kind is RefKind.FILE or view.resolve(ref).state == MISSING_REF:
            c.warn(path, f"does not resolve for {case.label}", "unresolved_reference")


def _lint_instructions(
    c: DocChecker, case: NormCase, scope: dict[str, Any], instructions: tuple[Path, str] | None
) -> str:
    if instructions is None:
        return ""
    path, text = instructions
    unresolved = [name for name in placeholders(text) if not never_a_name(name) and not resolves(scope, name)]
    if unresolved:  # one warning per item and case (§10)
        spaced = next((name for name in unresolved if _INNER_SPACE.search(name)), None)
        detail = None if spaced is None else f"{{{{{spaced}}}}}: {SPACED_NAME}"
        c.warn(path, f"does not resolve for {case.label}", "unresolved_reference", detail=detail)
    return render(text, scope)


def _lint_answer_leak(
    c: DocChecker, case: NormCase, view: CaseView, scope: dict[str, Any], rendered: str, plan: SpecPlan
) -> None:
    if not plan.answer_keys:
        return
    haystack: str | None = None
    for key in plan.answer_keys:
        entry = view.expectations.get(key)
        if entry is None:
            continue
        index, item = entry
        if "value" not in item or item.get("source") is not None:
            continue
        answer = as_text(item["value"]).strip()
        if len(answer) < 4:  # counted as written: casefold() lengthens some ("ß" is "ss")
            continue
        answer = answer.casefold()
        if haystack is None:
            parts: list[str] = [rendered]
            _leaves(case.data.get("payload"), parts)
            for inp in _inputs_of(case):
                if isinstance(inp, dict) and "value" in inp:
                    _leaves(inp["value"], parts)
            haystack = "\n".join(parts).casefold()
        if answer in haystack:
            path = case.path + ("expectations", index, "value")
            c.warn(path, "appears verbatim in the case inputs or instructions", "answer_leak")


__all__ = ["MISSING", "CaseView", "check_cases", "format_path", "render"]
