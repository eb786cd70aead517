"""File validators and postconditions (grading.md §3.5).

The target is a ``file:<check>`` resolution: a capture (text, possibly ``absent``) or a
directory listing ``{"path", "entries": [{"path", "is_dir"}]}``.
"""

from __future__ import annotations

import re
from typing import Any

from ..configs.models import POSTCONDITION_CONDITIONS
from ..evidence import normalize_path
from ..refs import ABSENT, Resolved
from .common import (
    NOT_FOUND,
    Env,
    VResult,
    binary,
    cfg,
    compile_pattern,
    deep_equal,
    failed,
    json_depth,
    json_path_get,
    pack_error,
    parse_json_path,
    parse_json_text,
    quote,
    search_span,
    short_json,
    too_deep,
    value_as_json,
)
from .text import first_difference, load_schema, schema_validator, validate_json_text

_WS = re.compile(r"\s+")
MATCH_MODES = ("contains", "exact", "regex", "not_contains", "json_equal")


def _where(actual: Resolved) -> str:
    return actual.path or "(root)"


def _present(actual: Resolved) -> bool:
    if actual.state == ABSENT:
        return False
    if actual.listing:
        return bool(actual.value.get("entries"))
    return True


def file_exists(actual: Resolved, expected: Resolved | None, config: Any, env: Env) -> VResult:
    must = bool(cfg(config, "must_exist", True))
    present = _present(actual)
    state = "returned" if present else "not returned"
    return binary(present == must, f"{_where(actual)}: {state} (must_exist {str(must).lower()})")


def file_content_match(actual: Resolved, expected: Resolved | None, config: Any, env: Env) -> VResult:
    mode = str(cfg(config, "match_mode", "contains"))
    if mode not in MATCH_MODES:
        return pack_error(f"unknown match_mode {mode!r}", "invalid_config")
    text = actual.text
    exp = expected.text if expected is not None else ""
    where = _where(actual)
    if mode == "json_equal":
        e_val, bad = value_as_json(expected.value if expected else "", exp)
        if bad is not None:
            return pack_error(f"expected is not JSON at offset {bad}", "unparseable_expected")
        a_val, bad = parse_json_text(text)
        if bad is not None:
            return failed(f"{where}: not JSON at offset {bad}")
        try:
            same = deep_equal(a_val, e_val)
        except RecursionError:
            depths = f"{json_depth(a_val)} and {json_depth(e_val)}"
            return too_deep(f"{where}: JSON and expected nested {depths} levels deep, too deep to compare")
        return binary(same, f"{where}: JSON {short_json(a_val)} vs expected {short_json(e_val)}")
    if mode == "regex":
        rx, problem = compile_pattern(exp)
        if problem is not None:
            return problem
        span = search_span(rx, text)
        if span is None:
            return binary(False, f"{where}: no match for {quote(exp, 200)} in {len(text)} code points")
        s, e = span
        return binary(True, f"{where}: match at {s}-{e}: {quote(text[s:e], 200)}")
    if cfg(config, "ignore_whitespace", False):
        text, exp = _WS.sub(" ", text), _WS.sub(" ", exp)
    if mode == "exact":
        if text == exp:
            return binary(True, f"{where}: content equals expected ({len(text)} code points)")
        i = first_difference(text, exp)
        return binary(
            False,
            f"{where}: first difference at offset {i}: {quote(text[max(0, i - 20) : i + 20], 40)} vs {quote(exp[max(0, i - 20) : i + 20], 40)}",
        )
    i = text.find(exp)
    if mode == "contains":
        if i >= 0:
            return binary(True, f"{where}: found {quote(exp, 120)} at offset {i}")
        return binary(False, f"{where}: {quote(exp, 120)} not found in {len(text)} code points")
    if i >= 0:
        return binary(False, f"{where}: forbidden {quote(exp, 120)} found at offset {i}")
    return binary(True, f"{where}: {quote(exp, 120)} does not occur ({len(text)} code points)")


def file_json_schema(actual: Resolved, expected: Resolved | None, config: Any, env: Env) -> VResult:
    schema = cfg(config, "schema")
    if schema is None:
        return pack_error("file_json_schema needs config.schema", "invalid_config")
    if isinstance(schema, str):
        validator, problem = load_schema(Resolved(value=schema))
        if problem is not None:
            return problem
    else:
        try:
            validator = schema_validator(schema)
        except Exception as exc:
            return pack_error(
                f"config.schema is not a valid JSON Schema: {str(exc).splitlines()[0][:300]}",
                "invalid_schema",
            )
    return validate_json_text(actual.text, validator, _where(actual))


def _as_list(v: Any) -> list[str]:
    if v is None:
        return []
    if isinstance(v, str):
        return [v]
    return [str(x) for x in v]


def directory_structure(actual: Resolved, expected: Resolved | None, config: Any, env: Env) -> VResult:
    if not actual.listing:
        return pack_error("directory_structure needs a directory_listing check", "invalid_config")
    entries = actual.value.get("entries", [])
    files = {e["path"] for e in entries if not e["is_dir"]}
    dirs = {e["path"] for e in entries if e["is_dir"]}

    def norm(p: str) -> str:  # as returned paths are read (§1.1): `./a`, `a//b`, `a\\b`
        return normalize_path(p, "").strip("/")

    missing_files = [p for p in _as_list(cfg(config, "required_files")) if norm(p) not in files]
    missing_dirs = [p for p in _as_list(cfg(config, "required_directories")) if norm(p) not in dirs]
    forbidden = [p for p in _as_list(cfg(config, "forbidden_files")) if norm(p) in files or norm(p) in dirs]
    problems = (
        [f"missing file {p}" for p in missing_files]
        + [f"missing directory {p}" for p in missing_dirs]
        + [f"forbidden {p} present" for p in forbidden]
    )
    if problems:
        return binary(False, f"{_where(actual)}: " + "; ".join(problems), details={"offenders": problems})
    return binary(
        True,
        f"{_where(actual)}: {len(files)} files, {len(dirs)} directories; all required present, none forbidden",
    )


POSTCONDITIONS = POSTCONDITION_CONDITIONS


def postcondition(actual: Resolved, expected: Resolved | None, config: Any, env: Env) -> VResult:
    cond = cfg(config, "condition")
    if cond not in POSTCONDITIONS:
        return pack_error(f"unknown condition {cond!r}", "invalid_config")
    present = _present(actual)
    where = _where(actual)
    if cond == "exists":
        return binary(present, f"{where}: {'returned' if present else 'not returned'}")
    if cond == "not_exists":
        return binary(not present, f"{where}: {'returned' if present else 'not returned'}")
    if not present:
        return failed(f"file not returned: {where}")
    value = cfg(config, "value")
    text = actual.text
    if cond in ("contains", "not_contains", "regex_match") and not isinstance(value, str):
        return pack_error(f"condition {cond} needs a string value", "invalid_config")
    if cond == "contains":
        i = text.find(value)
        return binary(
            i >= 0, f"{where}: {quote(value, 120)} " + (f"found at offset {i}" if i >= 0 else "not found")
        )
    if cond == "not_contains":
        i = text.find(value)
        return binary(
            i < 0, f"{where}: {quote(value, 120)} " + (f"found at offset {i}" if i >= 0 else "does not occur")
        )
    if cond == "regex_match":
        rx, problem = compile_pattern(value, field="config.value")
        if problem is not None:
            return problem
        span = search_span(rx, text)
        return binary(
            span is not None,
            f"{where}: "
            + (
                f"match at {span[0]}-{span[1]}: {quote(text[span[0] : span[1]], 120)}"
                if span is not None
                else f"no match for {quote(value, 120)}"
            ),
        )
    if cond == "equals":
        if isinstance(value, str):
            return binary(
                text == value,
                f"{where}: content {'equals' if text == value else 'differs from'} {quote(value, 120)}",
            )
        doc, bad = parse_json_text(text)
        if bad is not None:
            return failed(f"{where}: not JSON at offset {bad}")
        return binary(deep_equal(doc, value), f"{where}: JSON {short_json(doc)} vs {short_json(value)}")
    path = cfg(config, "json_path")
    if not isinstance(path, str):
        return pack_error("json_path_match needs config.json_path", "invalid_config")
    try:
        segs = parse_json_path(path)
    except ValueError as exc:
        return pack_error(str(exc), "invalid_path")
    doc, bad = parse_json_text(text)
    if bad is not None:
        return failed(f"{where}: not JSON at offset {bad}")
    found = json_path_get(doc, segs)
    if found is NOT_FOUND:
        return failed(f"{where}: path {path} does not resolve")
    return binary(
        deep_equal(found, value), f"{where}: {path} is {short_json(found)}, expected {short_json(value)}"
    )
