"""Text and structure validators (grading.md §3.2) and normalized_match (§3.4)."""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Callable
from typing import Any

import jsonschema
from jsonschema.exceptions import ValidationError
from jsonschema_specifications import REGISTRY as META_SCHEMAS
from referencing.exceptions import Unresolvable

from ..configs.models import DEFAULT_PIPELINE
from ..refs import Resolved
from ..types import Status, canonical_json
from .common import (
    NOT_FOUND,
    Env,
    PatternError,
    PlainVerdict,
    PreparedGrader,
    VResult,
    binary,
    cfg,
    compile_pattern,
    compile_re2,
    deep_equal,
    failed,
    flags_prefix,
    fmt_num,
    head,
    is_number,
    json_depth,
    json_path_get,
    pack_error,
    parse_json_path,
    parse_json_text,
    plain_verdict,
    prepared,
    quote,
    search_span,
    short_json,
    too_deep,
    value_as_json,
)

_PASSED, _FAILED = Status.PASSED, Status.FAILED

# ---------------------------------------------------------------------------
# exact_match / contains / regex_match / boolean_assert
# ---------------------------------------------------------------------------


def first_difference(a: str, b: str) -> int:
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    lo, hi = 0, n  # binary search on equal prefixes: C-speed slices
    while lo < hi:
        mid = (lo + hi) // 2
        if a[lo : mid + 1] == b[lo : mid + 1]:
            lo = mid + 1
        else:
            hi = mid
    return lo


def _difference(a: str, e: str, lengths: bool = True) -> str:
    i = first_difference(a, e)
    lo = max(0, i - 20)
    text = f"first difference at offset {i}: actual {quote(a[lo : i + 20], 40)} vs expected {quote(e[lo : i + 20], 40)}"
    return text + f" (lengths {len(a)} and {len(e)})" if lengths else text


def _exact_text(a: str) -> str:
    return f"exact match ({len(a)} code points)"


@prepared("exact_match")
def exact_match(config: Any) -> PreparedGrader:
    def grade(actual: Resolved, expected: Resolved | None, env: Env) -> PlainVerdict:
        a = actual.text
        e = expected.text if expected is not None else ""
        if a == e:
            return _PASSED, 1.0, (_exact_text, a)
        return _FAILED, 0.0, (_difference, a, e)

    return grade


def _found_text(e: str, i: int, where: str) -> str:
    return f"found {quote(e, 120)} at offset {i} of the {where}"


def _not_found_text(e: str, a: str) -> str:
    return f"{quote(e, 120)} not found in {len(a)} code points; head: {head(a, 200)}"


@prepared("contains")
def contains(config: Any) -> PreparedGrader:
    folded = bool(cfg(config, "case_insensitive", False))
    where = "case-folded text" if folded else "actual"

    def grade(actual: Resolved, expected: Resolved | None, env: Env) -> PlainVerdict:
        a = actual.text
        e = expected.text if expected is not None else ""
        if folded:
            a, e = a.casefold(), e.casefold()
        i = a.find(e)
        if i >= 0:
            return _PASSED, 1.0, (_found_text, e, i, where)
        return _FAILED, 0.0, (_not_found_text, e, a)

    return grade


@prepared("regex_match")
def regex_match(config: Any) -> PreparedGrader:
    flags = cfg(config, "flags", "")
    prefix = flags_prefix(flags) if flags else ""

    last: list[tuple[str | None, Any]] = [(None, None)]  # the pattern compiled last, its RE2 object

    def grade(actual: Resolved, expected: Resolved | None, env: Env) -> VResult | PlainVerdict:
        pattern = expected.text if expected is not None else ""
        seen, rx = last[0]
        if pattern != seen:
            rx, problem = compile_pattern(pattern, prefix)
            if problem is not None:
                return problem
            last[0] = (pattern, rx)
        text = actual.text
        span = search_span(rx, text)
        if span is None:
            return _FAILED, 0.0, (_no_match_text, pattern, text)
        return _PASSED, 1.0, (_match_text, span, text)

    return grade


def _no_match_text(pattern: str, text: str) -> str:
    return f"no match for {quote(pattern, 200)} in {len(text)} code points; head: {head(text, 200)}"


def _match_text(span: tuple[int, int], text: str) -> str:
    s, t = span
    return f"match at {s}-{t}: {quote(text[s:t], 200)}"


_TRUE = frozenset({"true", "1", "yes"})
_FALSE = frozenset({"false", "0", "no"})


def read_bool(text: str) -> bool | None:
    t = text.strip().lower()
    if t in _TRUE:
        return True
    if t in _FALSE:
        return False
    return None


def boolean_assert(actual: Resolved, expected: Resolved | None, config: Any, env: Env) -> VResult:
    e = read_bool(expected.text if expected is not None else "")
    if e is None:
        return pack_error(
            f"expected {quote(expected.text if expected else '', 80)} is not a boolean",
            "unparseable_expected",
        )
    a = read_bool(actual.text)
    if a is None:
        return failed(f"actual {quote(actual.text, 80)} is not a boolean (expected {str(e).lower()})")
    return binary(a == e, f"actual reads {str(a).lower()}, expected {str(e).lower()}")


# ---------------------------------------------------------------------------
# json_schema
# ---------------------------------------------------------------------------

_FENCE = re.compile(r"```[^\n`]*\n(.*?)```", re.DOTALL)
_SCHEMA_CACHE: dict[str, Any] = {}

# Where a schema's $ref may lead: inside the schema, or to the draft meta-schemas jsonschema
# bundles. Nothing is ever fetched (this registry's retrieve refuses): without it jsonschema
# requested any URL a pack's $ref named, from the grading worker (a cloud metadata address,
# an internal service, one that never answers) and graded on the reply.
SCHEMA_REFS = META_SCHEMAS


def unresolvable_ref(exc: Unresolvable) -> str:
    """The message of a $ref the schema does not hold (grading.md §2: the pack's error)."""
    ref = getattr(exc, "ref", None) or str(exc)
    return f"the schema's $ref {quote(str(ref), 200)} is not inside the schema; remote references are not fetched"


def extract_fence(text: str) -> str:
    m = _FENCE.search(text)
    return m.group(1) if m else text


# A schema's regular expressions (pattern, patternProperties, and additionalProperties beside
# them) run on RE2 like every other pattern (§3.1); jsonschema's own keywords use Python's re,
# which backtracks ("^(a+)+$" against 40 a's and a "!" held a grading worker for hours, the
# 5 s limit being read after the check) and reads Python's syntax (a lookbehind passed,
# ECMA's \p{L} was "not a regex"). The "regex" format of the meta-schema compiles with RE2 too.


def _re2(pattern: str) -> Any:
    try:
        return compile_re2(pattern)
    except PatternError as exc:  # check_schema refused it already; a schema built otherwise
        raise jsonschema.SchemaError(f"pattern {pattern!r} is not a valid RE2 pattern: {exc}") from None


def _re2_pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Any:
    if validator.is_type(instance, "string") and search_span(_re2(pattern), instance) is None:
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _re2_pattern_properties(validator: Any, pattern_properties: Any, instance: Any, schema: Any) -> Any:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in pattern_properties.items():
        rx = _re2(pattern)
        for k, v in instance.items():
            if search_span(rx, k) is not None:
                yield from validator.descend(v, subschema, path=k, schema_path=pattern)


def _re2_additional_properties(validator: Any, additional: Any, instance: Any, schema: Any) -> Any:
    """jsonschema's additionalProperties, its patternProperties test on RE2."""
    if not validator.is_type(instance, "object"):
        return
    properties = schema.get("properties", {})
    patterns = [_re2(p) for p in schema.get("patternProperties", {})]
    extras = {
        k
        for k in instance
        if k not in properties and not any(search_span(rx, k) is not None for rx in patterns)
    }
    if validator.is_type(additional, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], additional, path=extra)
    elif not additional and extras:
        if "patternProperties" in schema:
            verb = "does" if len(extras) == 1 else "do"
            joined = ", ".join(repr(each) for each in sorted(extras))
            shown = ", ".join(repr(each) for each in sorted(schema["patternProperties"]))
            yield ValidationError(f"{joined} {verb} not match any of the regexes: {shown}")
        else:
            listed = ", ".join(repr(each) for each in sorted(extras, key=str))
            verb = "was" if len(extras) == 1 else "were"
            yield ValidationError(f"Additional properties are not allowed ({listed} {verb} unexpected)")


_RE2_KEYWORDS = {
    "pattern": _re2_pattern,
    "patternProperties": _re2_pattern_properties,
    "additionalProperties": _re2_additional_properties,
}
DRAFT7 = jsonschema.validators.extend(jsonschema.Draft7Validator, _RE2_KEYWORDS)
DRAFT2020 = jsonschema.validators.extend(jsonschema.Draft202012Validator, _RE2_KEYWORDS)
RE2_FORMATS = jsonschema.FormatChecker()


@RE2_FORMATS.checks("regex", raises=PatternError)
def _is_re2(instance: object) -> bool:
    if isinstance(instance, str):
        compile_re2(instance)
    return True


def check_schema(cls: Any, schema: Any) -> None:
    """``cls.check_schema`` with the meta-schema's "regex" format read as RE2."""
    try:
        cls.check_schema(schema, format_checker=RE2_FORMATS)
    except jsonschema.SchemaError as exc:
        if isinstance(exc.cause, PatternError):
            where = "/".join(str(p) for p in exc.absolute_path) or "(root)"
            raise jsonschema.SchemaError(
                f"{where}: {exc.instance!r} is not a valid RE2 pattern: {exc.cause}"
            ) from None
        raise


def schema_validator(schema: Any) -> Any:
    """A compiled jsonschema validator (cached by canonical text). Raises SchemaError/TypeError."""
    key = json.dumps(schema, sort_keys=True) if not isinstance(schema, str) else schema
    v = _SCHEMA_CACHE.get(key)
    if v is not None:
        return v
    if not isinstance(schema, (dict, bool)):
        raise jsonschema.SchemaError("a JSON Schema must be an object or a boolean")
    dialect = schema.get("$schema", "") if isinstance(schema, dict) else ""
    cls = DRAFT7 if "draft-07" in str(dialect) else DRAFT2020
    check_schema(cls, schema)
    v = cls(schema, registry=SCHEMA_REFS)
    if len(_SCHEMA_CACHE) > 512:
        _SCHEMA_CACHE.clear()
    _SCHEMA_CACHE[key] = v
    return v


def _pointer(path: Any) -> str:
    parts = [str(p).replace("~", "~0").replace("/", "~1") for p in path]
    return "/" + "/".join(parts) if parts else "(root)"


def schema_errors(validator: Any, instance: Any, limit: int = 10) -> list[str]:
    errs = sorted(validator.iter_errors(instance), key=lambda e: (list(map(str, e.absolute_path)), e.message))
    return [f"{_pointer(e.absolute_path)}: {e.message[:200]}" for e in errs[:limit]] + (
        [f"... {len(errs) - limit} more"] if len(errs) > limit else []
    )


def load_schema(expected: Resolved | None) -> tuple[Any, VResult | None]:
    if expected is None:
        return None, pack_error("no schema given", "missing_expected")
    schema, bad = value_as_json(expected.value, expected.text)
    if bad is not None:
        return None, pack_error(f"expected schema is not JSON at offset {bad}", "unparseable_expected")
    try:
        return schema_validator(schema), None
    except (jsonschema.SchemaError, TypeError, ValueError) as exc:
        return None, pack_error(
            f"expected is not a valid JSON Schema: {str(exc).splitlines()[0][:300]}", "invalid_schema"
        )


def validate_json_text(text: str, validator: Any, what: str = "actual") -> VResult:
    instance, bad = parse_json_text(text)
    if bad is not None:
        return failed(f"{what} is not JSON at offset {bad}; head: {head(text, 120)}")
    return schema_verdict(validator, instance, what)


def schema_verdict(validator: Any, instance: Any, what: str = "actual") -> VResult:
    try:
        errors = schema_errors(validator, instance)
    except Unresolvable as exc:
        return pack_error(unresolvable_ref(exc), "invalid_schema")
    except RecursionError:  # a recursive $ref follows the document down
        return too_deep(f"{what} nested {json_depth(instance)} levels deep, too deep to validate")
    if not errors:
        return binary(True, f"{what} is JSON and validates against the schema")
    return binary(False, "\n".join(errors))


def json_schema(actual: Resolved, expected: Resolved | None, config: Any, env: Env) -> VResult:
    validator, problem = load_schema(expected)
    if problem is not None:
        return problem
    if not isinstance(actual.value, str) and not cfg(config, "extract_markdown_fence", False):
        return schema_verdict(validator, actual.value)
    text = actual.text
    if cfg(config, "extract_markdown_fence", False):
        text = extract_fence(text)
    return validate_json_text(text, validator)


# ---------------------------------------------------------------------------
# json_path_match
# ---------------------------------------------------------------------------

COMPARATORS = ("exists", "equals", "contains", "greater_than", "less_than")


def json_path_spec(expected: Resolved | None) -> tuple[str, str, Any, VResult | None]:
    """(path, comparator, value) from the expected side, or a pack error."""
    if expected is None:
        return "", "", None, pack_error("no expected path given", "missing_expected")
    value = expected.value
    if isinstance(value, str):
        t = value.strip()
        if t.startswith("$"):
            return t, "exists", None, None
        value, bad = parse_json_text(t)
        if bad is not None:
            return (
                "",
                "",
                None,
                pack_error(f"expected is neither a $ path nor JSON (offset {bad})", "unparseable_expected"),
            )
    if not isinstance(value, dict) or not isinstance(value.get("path"), str):
        return (
            "",
            "",
            None,
            pack_error("expected must be {path, comparator, value} or a $ path", "invalid_expected"),
        )
    has_value = "value" in value
    comparator = value.get("comparator") or ("equals" if has_value else "exists")
    if comparator not in COMPARATORS:
        return "", "", None, pack_error(f"unknown comparator {comparator!r}", "invalid_expected")
    if comparator != "exists" and not has_value:
        return "", "", None, pack_error(f"comparator {comparator} needs a value", "invalid_expected")
    return value["path"], comparator, value.get("value"), None


def compare_json_path(doc: Any, path: str, comparator: str, value: Any) -> VResult | PlainVerdict:
    try:
        segs = parse_json_path(path)
    except ValueError as exc:
        return pack_error(str(exc), "invalid_path")
    found = json_path_get(doc, segs)
    if comparator == "exists":
        if found is NOT_FOUND:
            return plain_verdict(False, f"path {path}, comparator exists: path does not resolve")
        return plain_verdict(True, (_resolves_text, path, found))
    if found is NOT_FOUND:
        return plain_verdict(False, (_unresolved_text, path, comparator, value))
    shown = (_shown_text, path, comparator, found, value)  # rendered on first read
    if comparator == "equals":
        return plain_verdict(deep_equal(found, value), shown)
    if comparator == "contains":
        if isinstance(found, str):
            if not isinstance(value, str):
                return pack_error(
                    f"{_shown_text(path, comparator, found, value)}: contains on a string needs a string value",
                    "invalid_expected",
                )
            return plain_verdict(value in found, shown)
        if isinstance(found, list):
            return plain_verdict(any(deep_equal(x, value) for x in found), shown)
        needle = value if isinstance(value, str) else canonical_json(value)
        return plain_verdict(needle in canonical_json(found), shown)
    if not is_number(value):
        return pack_error(
            f"{_shown_text(path, comparator, found, value)}: {comparator} needs a numeric value",
            "invalid_expected",
        )
    if not is_number(found):
        return plain_verdict(False, (_not_number_text, path, comparator, found, value))
    ok = found > value if comparator == "greater_than" else found < value
    return plain_verdict(ok, (_order_text, path, comparator, found, value, ok))


def _resolves_text(path: str, found: Any) -> str:
    return f"path {path}, comparator exists: resolves to {short_json(found)}"


def _unresolved_text(path: str, comparator: str, value: Any) -> str:
    return f"path {path}, comparator {comparator}: path does not resolve; expected {short_json(value)}"


def _shown_text(path: str, comparator: str, found: Any, value: Any) -> str:
    return f"path {path}, comparator {comparator}: actual {short_json(found)}, expected {short_json(value)}"


def _not_number_text(path: str, comparator: str, found: Any, value: Any) -> str:
    return f"{_shown_text(path, comparator, found, value)}: actual is not a number"


def _order_text(path: str, comparator: str, found: Any, value: Any, ok: bool) -> str:
    op = ">" if comparator == "greater_than" else "<"
    return f"{_shown_text(path, comparator, found, value)} ({fmt_num(found)} {op} {fmt_num(value)}: {ok})"


@prepared("json_path_match")
def json_path_match(config: Any) -> PreparedGrader:
    def grade(actual: Resolved, expected: Resolved | None, env: Env) -> VResult | PlainVerdict:
        path, comparator, value, problem = json_path_spec(expected)
        if problem is not None:
            return problem
        doc = actual.value
        bad = None
        if isinstance(doc, str):  # a string is JSON text; any other value is JSON already
            doc, bad = parse_json_text(actual.text)
        if bad is not None:
            return failed(f"actual is not JSON at offset {bad}; head: {head(actual.text, 120)}")
        return compare_json_path(doc, path, comparator, value)

    return grade


# ---------------------------------------------------------------------------
# normalized_match (§3.4)
# ---------------------------------------------------------------------------

_WS = re.compile(r"\s+")
_ARTICLES = re.compile(r"\b(?:a|an|the)\b")
CURRENCY_SYMBOLS = "$€£¥₹"
_CURRENCY_CODES = re.compile(r"(?i)(?<![A-Za-z])(?:USD|EUR|GBP|JPY|INR)(?![A-Za-z])")
_FORMATTING = str.maketrans("", "", ",()[]")  # grading.md §3.4: `, ( ) [ ]`
_CURRENCY_TABLE = str.maketrans("", "", CURRENCY_SYMBOLS)


def strip_currency(text: str) -> str:
    return _CURRENCY_CODES.sub("", text.translate(_CURRENCY_TABLE))


def strip_punctuation(text: str) -> str:
    return "".join(ch for ch in text if not unicodedata.category(ch).startswith(("P", "S")))


# The functions of the steps ``configs.NORMALIZATION_STEPS`` names (same keys, same order).
NORMALIZATION_STEPS: dict[str, Callable[[str], str]] = {
    "trim": str.strip,
    "lowercase": str.casefold,
    "collapse_whitespace": lambda s: _WS.sub(" ", s),
    "strip_punctuation": strip_punctuation,
    "strip_currency": strip_currency,
    "strip_formatting": lambda s: s.translate(_FORMATTING),
    "normalize_unicode": lambda s: unicodedata.normalize("NFKC", s),
    "remove_articles": lambda s: _ARTICLES.sub(" ", s),
    "sort_words": lambda s: " ".join(sorted(s.split())),
    "sort_lines": lambda s: "\n".join(sorted(s.replace("\r\n", "\n").split("\n"))),
}


def normalized_match(actual: Resolved, expected: Resolved | None, config: Any, env: Env) -> VResult:
    pipeline = cfg(config, "pipeline") or cfg(config, "normalizations") or DEFAULT_PIPELINE
    if isinstance(pipeline, str):
        pipeline = [pipeline]
    unknown = [s for s in pipeline if s not in NORMALIZATION_STEPS]
    if unknown:
        return pack_error(f"{unknown[0]!r} is not a supported normalization step", "invalid_config")
    a = actual.text
    e = expected.text if expected is not None else ""
    for step in pipeline:
        fn = NORMALIZATION_STEPS[step]
        a, e = fn(a), fn(e)
    if a == e:
        return binary(True, f"equal after {', '.join(pipeline)}: {quote(a, 200)}")
    return binary(False, f"after {', '.join(pipeline)}, " + _difference(a, e, lengths=False))
