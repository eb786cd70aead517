"""Publish checks of one validator declaration (pack-format §7.1, grading.md §3-§4, §9).

They run on the cleaned raw data (after ``check_model``), so types and single-field value
rules are already reported; these are the rules that combine fields. Every check is
defensive: a value of the wrong type, or one under a path ``check_model`` already
rejected (``bad_paths``), is skipped, so nothing cascades and nothing raises.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import re2

from grading.engine import jsontext
from grading.engine.configs.fields import regex_fields
from grading.engine.configs.models import NORMALIZATION_STEPS, TRAJECTORY_MATCH_TYPES
from grading.engine.modelcheck import Anchor, Issue, Path, path_is_under
from grading.engine.re2hint import with_hint
from grading.engine.refsyntax import JsonPathSyntaxError, RefKind, parse_json_path, try_parse_reference


class _Missing:
    """Absent, of the wrong type, or already rejected: falsy, so ``value or []`` works."""

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()

_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False

UNSUPPORTED_REFERENCE = "must be a supported evidence reference"
INVALID_RE2 = "must be a valid RE2 pattern"
JSON_PATH_COMPARATORS = ("exists", "equals", "contains", "greater_than", "less_than")
BAD_JSON_PATH = "must be a supported JSON path ($, .name, ['name'], [N])"
BAD_JSON_PATH_EXPECTATION = "must be a JSON path ($...) or a {path, comparator, value} object"


@functools.lru_cache(maxsize=2048)
def _re2_facts(pattern: str) -> tuple[str | None, bool]:
    """(RE2's error text with a hint, or None; whether the pattern matches the empty string),
    from one compile through google-re2's pattern class, as the engine compiles
    (``validators.common.compile_re2``: ``re2.compile`` rebuilds its options each call and
    keeps an LRU of its own). A 10,000-case pack with a pattern per case compiled each
    pattern twice, through ``re2.compile``."""
    try:
        compiled = re2._Regexp(pattern, _RE2_OPTIONS)
    except re2.error as exc:
        raw = exc.args[0] if exc.args else exc
        return with_hint(
            pattern, raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
        ), False
    except Exception as exc:  # the binding raises other types on odd input (lone surrogates)
        return str(exc), False
    return None, compiled.search("") is not None


def re2_error(pattern: str) -> str | None:
    """RE2's error text when ``pattern`` does not compile (with a hint for lookaround,
    backreferences, possessive quantifiers and atomic groups), else None."""
    return _re2_facts(pattern)[0]


def re2_matches_empty(pattern: str) -> bool:
    """True when the pattern compiles and finds a match in the empty string."""
    return _re2_facts(pattern)[1]


def json_path_problem(path: str) -> str | None:
    """The parser's reason when ``path`` is outside the JSON path subset, else None."""
    try:
        parse_json_path(path)
    except JsonPathSyntaxError as exc:
        return str(exc)
    return None


def check_json_path_expectation(text: str) -> list[tuple[str, str | None]]:
    """Problems of a json_path_match expectation (``$.path`` or ``{path, comparator, value}``),
    as (message, detail) pairs. The pack parser reuses it for case values."""
    text = text.strip()
    if text.startswith("$"):
        reason = json_path_problem(text)
        return [(BAD_JSON_PATH, reason)] if reason else []
    try:
        value = jsontext.loads(text)
    except ValueError as exc:
        return [(BAD_JSON_PATH_EXPECTATION, str(exc))]
    if not isinstance(value, dict) or not isinstance(value.get("path"), str) or not value["path"].strip():
        return [(BAD_JSON_PATH_EXPECTATION, None)]
    problems: list[tuple[str, str | None]] = []
    reason = json_path_problem(value["path"])
    if reason:
        problems.append((BAD_JSON_PATH, reason))
    comparator = value.get("comparator")
    if comparator is not None and (
        not isinstance(comparator, str) or comparator.strip() not in JSON_PATH_COMPARATORS
    ):
        problems.append(("comparator must be one of " + ", ".join(JSON_PATH_COMPARATORS), None))
    return problems


@dataclass
class Checker:
    """Collects issues and knows which paths ``check_model`` already rejected."""

    bad_paths: frozenset[Path] = frozenset()
    issues: list[Issue] = field(default_factory=list)

    def bad(self, path: Path) -> bool:
        return path_is_under(path, self.bad_paths)

    def error(self, path: Path, message: str, *, detail: str | None = None, anchor: Anchor = "value") -> None:
        self.issues.append(Issue(path, message, detail=detail, anchor=anchor))

    def get(self, mapping: Any, key: str, path: Path, kind: type | tuple[type, ...] = object) -> Any:
        """``mapping[key]`` when present, not None, of ``kind`` and not rejected; else MISSING."""
        if not isinstance(mapping, Mapping) or self.bad(path + (key,)):
            return MISSING
        value = mapping.get(key)
        if value is None or not isinstance(value, kind) or (isinstance(value, bool) and kind in (int, float)):
            return MISSING
        return value

    def text(self, mapping: Any, key: str, path: Path) -> str | None:
        """A trimmed non-blank string, else None."""
        value = self.get(mapping, key, path, str)
        return value.strip() or None if value is not MISSING else None

    def number(self, mapping: Any, key: str, path: Path) -> float | None:
        value = self.get(mapping, key, path, (int, float))
        return None if value is MISSING else value

    def present(self, mapping: Any, key: str) -> bool:
        return isinstance(mapping, Mapping) and mapping.get(key) is not None

    def anchor_for(self, mapping: Any, key: str) -> Anchor:
        """Where a problem with ``mapping[key]`` is placed: its value, or the mapping when
        the key is absent, null or a blank string (absent too, pack-format §2.1)."""
        value = mapping.get(key) if isinstance(mapping, Mapping) else None
        if value is None or (isinstance(value, str) and not value.strip()):
            return "parent"
        return "value"

    def regex(self, path: Path, pattern: str, prefix: str = "") -> None:
        reason = re2_error(prefix + pattern)
        if reason is not None:
            self.error(path, INVALID_RE2, detail=reason)

    def reference(self, path: Path, text: str) -> Any:
        """Parse a reference; report it when unsupported (``tool_calls`` is only a target)."""
        ref = try_parse_reference(text)
        if ref is None or ref.kind is RefKind.TOOL_CALLS:
            self.error(path, UNSUPPORTED_REFERENCE)
            return None
        return ref


ConfigCheck = Callable[[Checker, Mapping[str, Any], Any, Path], None]


def _literal(checker: Checker, validator: Mapping[str, Any], path: Path) -> str | None:
    """The text of a ``literal:`` expected_from, when it is one and was not rejected."""
    text = checker.text(validator, "expected_from", path)
    ref = try_parse_reference(text) if text else None
    return ref.literal if ref is not None and ref.kind is RefKind.LITERAL else None


# --- per type ------------------------------------------------------------------


def check_regex_match(checker: Checker, validator: Mapping[str, Any], config: Any, path: Path) -> None:
    pattern = _literal(checker, validator, path)
    if pattern is None:
        return
    flags = checker.get(config, "flags", path + ("config",), str)
    prefix = (
        f"(?{''.join(sorted(set(flags)))})"
        if flags is not MISSING and flags and set(flags) <= set("ims")
        else ""
    )
    checker.regex(path + ("expected_from",), pattern, prefix)


def check_file_content_match(checker: Checker, validator: Mapping[str, Any], config: Any, path: Path) -> None:
    if checker.get(config, "match_mode", path + ("config",), str) != "regex":
        return
    pattern = _literal(checker, validator, path)
    if pattern is not None:
        checker.regex(path + ("expected_from",), pattern)


def check_json_path_match(checker: Checker, validator: Mapping[str, Any], config: Any, path: Path) -> None:
    text = _literal(checker, validator, path)
    if text is None:
        return
    for message, detail in check_json_path_expectation(text):
        checker.error(path + ("expected_from",), message, detail=detail)


def check_numeric_match(checker: Checker, validator: Mapping[str, Any], config: Any, path: Path) -> None:
    cp = path + ("config",)
    legacy = [key for key in ("tolerance", "tolerance_mode") if checker.present(config, key)]
    current = [key for key in ("absolute_tolerance", "relative_tolerance") if checker.present(config, key)]
    if legacy and current:
        checker.error(cp + (legacy[0],), "cannot be combined with absolute_tolerance or relative_tolerance")


def check_normalized_match(checker: Checker, validator: Mapping[str, Any], config: Any, path: Path) -> None:
    cp = path + ("config",)
    lists = {key: checker.get(config, key, cp, list) for key in ("pipeline", "normalizations")}
    if lists["pipeline"] and lists["normalizations"]:
        checker.error(cp + ("normalizations",), "cannot be combined with pipeline")
    for key, steps in lists.items():
        for index, step in enumerate(steps or []):
            if (
                isinstance(step, str)
                and step.strip() not in NORMALIZATION_STEPS
                and not checker.bad(cp + (key, index))
            ):
                checker.error(
                    cp + (key, index), f"{json.dumps(step.strip())} is not a supported normalization step"
                )


def check_postcondition(checker: Checker, validator: Mapping[str, Any], config: Any, path: Path) -> None:
    cp = path + ("config",)
    condition = checker.text(config, "condition", cp)
    if not isinstance(config, Mapping) or condition is None:
        return
    has_value = "value" in config and not checker.bad(cp + ("value",))
    value = config.get("value")
    json_path = checker.text(config, "json_path", cp)
    if condition in ("exists", "not_exists") and has_value:
        checker.error(cp + ("value",), f"must be omitted for {condition}")
    if condition != "json_path_match" and json_path is not None:
        checker.error(cp + ("json_path",), f"must be omitted for {condition}")
    if (
        condition in ("contains", "not_contains", "regex_match", "json_path_match", "equals")
        and "value" not in config
    ):
        checker.error(cp + ("value",), "is required", anchor="parent")
    if condition in ("contains", "not_contains") and has_value and not isinstance(value, str):
        checker.error(cp + ("value",), "must be a string")
    if condition == "regex_match" and has_value:
        if isinstance(value, str):
            checker.regex(cp + ("value",), value)
        else:
            checker.error(cp + ("value",), "must be a string regex pattern")
    if condition == "json_path_match":
        if json_path is None and not checker.bad(cp + ("json_path",)):
            checker.error(cp + ("json_path",), "is required", anchor=checker.anchor_for(config, "json_path"))
        elif json_path is not None:
            reason = json_path_problem(json_path)
            if reason:
                checker.error(cp + ("json_path",), BAD_JSON_PATH, detail=reason)


def check_tool_call_assertion(
    checker: Checker, validator: Mapping[str, Any], config: Any, path: Path
) -> None:
    if not isinstance(config, Mapping) or checker.bad(path + ("config",)):
        return
    cp = path + ("config",)
    count, low, high = (checker.get(config, key, cp, int) for key in ("count", "min_count", "max_count"))
    count, low, high = (None if v is MISSING else v for v in (count, low, high))
    if count is not None and (checker.present(config, "min_count") or checker.present(config, "max_count")):
        checker.error(cp + ("count",), "cannot be combined with min_count or max_count")
    if low is not None and high is not None and low > high:
        checker.error(cp + ("min_count",), "must be less than or equal to max_count")
    must_call = checker.get(config, "must_call", cp, bool)
    if must_call is True and count == 0:
        checker.error(cp + ("must_call",), "cannot be true when count is 0")
    if must_call is True and high == 0:
        checker.error(cp + ("must_call",), "cannot be true when max_count is 0")
    if must_call is False and count is not None and count > 0:
        checker.error(cp + ("must_call",), "cannot be false when count is greater than 0")
    if must_call is False and low is not None and low > 0:
        checker.error(cp + ("must_call",), "cannot be false when min_count is greater than 0")
    ordered = checker.get(config, "ordered_tools", cp, list)
    for index, name in enumerate(ordered if ordered is not MISSING else []):
        if isinstance(name, str) and not name.strip() and not checker.bad(cp + ("ordered_tools", index)):
            checker.error(cp + ("ordered_tools", index), "must not be empty")
    has_ordered = bool(ordered) or checker.bad(cp + ("ordered_tools",))
    if checker.present(config, "order_mode") and not has_ordered:
        checker.error(cp + ("ordered_tools",), "is required when order_mode is set", anchor="parent")
    assertions = (
        checker.text(config, "tool_name", cp),
        *(config.get(key) for key in ("must_call", "count", "min_count", "max_count")),
        config.get("arguments_contain") or None,
        config.get("ordered_tools") or None,
    )
    if all(item is None for item in assertions):
        checker.error(cp, "must declare at least one tool call assertion")


def _match_type(checker: Checker, config: Any, cp: Path) -> None:
    match_type = checker.get(config, "match_type", cp, str)
    if match_type is not MISSING and match_type.strip().upper() not in TRAJECTORY_MATCH_TYPES:
        checker.error(cp + ("match_type",), "must be one of ANY_ORDER, IN_ORDER, EXACT")


def _is_call(entry: Any) -> bool:
    if not isinstance(entry, Mapping) or set(entry) - {"name", "args"}:
        return False
    name = entry.get("name")
    args = entry.get("args")
    return isinstance(name, str) and bool(name.strip()) and (args is None or isinstance(args, Mapping))


def check_tool_trajectory(checker: Checker, validator: Mapping[str, Any], config: Any, path: Path) -> None:
    cp = path + ("config",)
    _match_type(checker, config, cp)
    has_expected = checker.present(config, "expected")
    if not checker.bad(path + ("expected_from",)):
        has_from = checker.text(validator, "expected_from", path) is not None
        if not has_expected and not has_from and not checker.bad(cp):
            checker.error(
                path + ("expected_from",), "is required unless config.expected is set", anchor="parent"
            )
        if has_expected and has_from:
            checker.error(path + ("expected_from",), "must be omitted when config.expected is set")
    expected = checker.get(config, "expected", cp, list)
    if expected is MISSING:
        return
    if expected and all(isinstance(item, list) for item in expected):
        calls = [
            (cp + ("expected", i, k), call) for i, item in enumerate(expected) for k, call in enumerate(item)
        ]
    elif all(isinstance(item, Mapping) for item in expected):
        calls = [(cp + ("expected", i), call) for i, call in enumerate(expected)]
    else:
        checker.error(
            cp + ("expected",), "must be a list of tool calls or a list of invocations (lists of tool calls)"
        )
        return
    for call_path, call in calls:
        if not _is_call(call):
            checker.error(call_path, "must be a tool call {name, args}")


def _is_skill_entry(entry: Any) -> bool:
    if isinstance(entry, str):
        return bool(entry.strip())
    if isinstance(entry, (int, float)):  # scalars are stringified (bool included)
        return True
    if not isinstance(entry, Mapping):
        return False
    keys = set(entry)
    if keys == {"skill"}:
        return isinstance(entry["skill"], str) and bool(entry["skill"].strip())
    if keys in ({"tool"}, {"tool", "args"}):
        args = entry.get("args")
        return (
            isinstance(entry["tool"], str)
            and bool(entry["tool"].strip())
            and (args is None or isinstance(args, Mapping))
        )
    return False


def check_skills_trajectory(checker: Checker, validator: Mapping[str, Any], config: Any, path: Path) -> None:
    cp = path + ("config",)
    _match_type(checker, config, cp)
    skills = checker.get(config, "skills", cp, list)
    if skills is MISSING:
        return
    if not skills:
        checker.error(cp + ("skills",), "must contain at least one skill")
    for index, entry in enumerate(skills):
        if not _is_skill_entry(entry) and not checker.bad(cp + ("skills", index)):
            checker.error(
                cp + ("skills", index), "must be a skill name, {skill: name} or {tool: name, args: {...}}"
            )


def check_regex_fields(checker: Checker, model: type, config: Any, path: Path) -> None:
    """Compile every config field marked ``RegexText`` (registry config fields marked as regex)."""
    cp = path + ("config",)
    for key in regex_fields(model):
        pattern = checker.get(config, key, cp, str)
        if pattern is not MISSING:
            checker.regex(cp + (key,), pattern)


CONFIG_CHECKS: dict[str, ConfigCheck] = {
    "regex_match": check_regex_match,
    "file_content_match": check_file_content_match,
    "json_path_match": check_json_path_match,
    "numeric_match": check_numeric_match,
    "normalized_match": check_normalized_match,
    "postcondition": check_postcondition,
    "tool_call_assertion": check_tool_call_assertion,
    "tool_trajectory": check_tool_trajectory,
    "skills_trajectory": check_skills_trajectory,
}
