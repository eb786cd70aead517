"""Shared pieces of the validators: the result record, config access, quoting, RE2 and
JSON helpers (grading.md §2, §3.1)."""

from __future__ import annotations

import contextlib
import json
import math
import re
import sys
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson
import re2

from ..re2hint import with_hint
from ..refs import text_of
from ..refsyntax import JsonPathSyntaxError
from ..refsyntax import parse_json_path as _parse_json_path
from ..types import (
    MAX_EVIDENCE,
    CaseDef,
    Evidence,
    EvidenceText,
    GradeContext,
    OutcomeClass,
    Status,
    canonical_json,
    meets,
    render_evidence,
)

VALIDATOR_TIME_LIMIT = 5.0

DEFAULT_CLASS = {
    Status.PASSED: OutcomeClass.PASS,
    Status.FAILED: OutcomeClass.FAIL,
    Status.NOT_EVALUATED: OutcomeClass.PACK_ERROR,
    Status.UNAVAILABLE: OutcomeClass.UNAVAILABLE,
    Status.ERROR: OutcomeClass.EVALUATOR_ERROR,
}


class ValidatorTimeout(Exception):
    """Raised by long loops that check the deadline (grading.md §2: 5 s per validator)."""


class VResult:
    """What a grade function returns. ``evidence`` may be given as a function rendering the
    text; it is rendered on first read (``raw_evidence`` hands it on unrendered)."""

    __slots__ = (
        "status",
        "score",
        "raw_evidence",
        "reason_code",
        "outcome_class",
        "details",
        "per_invocation_scores",
    )

    def __init__(
        self,
        status: Status,
        score: float | None,
        evidence: EvidenceText,
        reason_code: str | None = None,
        outcome_class: OutcomeClass | None = None,
        details: dict[str, Any] | None = None,
        per_invocation_scores: list[float | None] | None = None,
    ) -> None:
        self.status = status
        self.score = score
        self.raw_evidence = evidence
        self.reason_code = reason_code
        self.outcome_class = outcome_class
        self.details: dict[str, Any] = {} if details is None else details
        self.per_invocation_scores = per_invocation_scores

    @property
    def evidence(self) -> str:
        ev = self.raw_evidence
        if not isinstance(ev, str):
            ev = self.raw_evidence = render_evidence(ev, self.status)
        return ev

    @evidence.setter
    def evidence(self, value: EvidenceText) -> None:
        self.raw_evidence = value

    def klass(self) -> OutcomeClass:
        return self.outcome_class or DEFAULT_CLASS[self.status]

    def __repr__(self) -> str:
        return (
            f"VResult({self.status!r}, {self.score!r}, {self.evidence!r}, {self.reason_code!r},"
            f" {self.outcome_class!r}, {self.details!r}, {self.per_invocation_scores!r})"
        )


_PASSED, _FAILED = Status.PASSED, Status.FAILED


def passed(evidence: EvidenceText, score: float = 1.0, **kw: Any) -> VResult:
    return VResult(Status.PASSED, score, evidence, **kw)


def failed(evidence: EvidenceText, score: float = 0.0, **kw: Any) -> VResult:
    return VResult(Status.FAILED, score, evidence, **kw)


def binary(ok: bool, evidence: EvidenceText, **kw: Any) -> VResult:
    if kw:
        return VResult(_PASSED if ok else _FAILED, 1.0 if ok else 0.0, evidence, **kw)
    return VResult(_PASSED if ok else _FAILED, 1.0 if ok else 0.0, evidence)


# A prepared grader's plain verdict: ``(status, score, evidence)``, PASSED (1.0) or FAILED (0.0)
# with no reason code, outcome class, details or per-invocation scores. The compiled plan
# builds the expectation from it without a ``VResult`` in between; a grader called directly
# (``Preparable.__call__``) returns it as a ``VResult``.
PlainVerdict = tuple[Status, float, EvidenceText]


def plain_verdict(ok: bool, evidence: EvidenceText) -> PlainVerdict:
    """``binary`` for prepared graders: a plain verdict."""
    return (_PASSED, 1.0, evidence) if ok else (_FAILED, 0.0, evidence)


def graded(score: float, threshold: float, evidence: str, **kw: Any) -> VResult:
    score = min(1.0, max(0.0, score))
    return VResult(Status.PASSED if meets(score, threshold) else Status.FAILED, score, evidence, **kw)


def pack_error(evidence: str, reason: str = "invalid_config", **kw: Any) -> VResult:
    return VResult(Status.NOT_EVALUATED, None, evidence, reason, OutcomeClass.PACK_ERROR, **kw)


def not_applicable(evidence: str, reason: str, **kw: Any) -> VResult:
    return VResult(Status.NOT_EVALUATED, None, evidence, reason, OutcomeClass.UNAVAILABLE, **kw)


def unavailable(evidence: str, reason: str = "channel_unavailable", **kw: Any) -> VResult:
    return VResult(Status.UNAVAILABLE, None, evidence, reason, OutcomeClass.UNAVAILABLE, **kw)


def error(
    evidence: str, reason: str = "exception", klass: OutcomeClass = OutcomeClass.EVALUATOR_ERROR, **kw: Any
) -> VResult:
    return VResult(Status.ERROR, None, evidence, reason, klass, **kw)


# A grade function bound to one validator's config: ``(actual, expected, env) -> VResult`` or
# a ``PlainVerdict``. A grader whose result adds evidence refs (tool_call_assertion,
# code_execution: see ``_VPlan.extra_refs``) returns a ``VResult``.
PreparedGrader = Callable[[Any, Any, "Env"], "VResult | PlainVerdict"]


class Preparable:
    """A grade function ``(actual, expected, config, env)`` whose config work (defaults,
    flags, tolerances) is done once by ``prepare(config)``; the compiled plan of a spec keeps
    the prepared function, and a direct call prepares and runs it in one go."""

    __slots__ = ("prepare", "__name__")

    def __init__(self, prepare: Callable[[Any], PreparedGrader], name: str) -> None:
        self.prepare = prepare
        self.__name__ = name

    def __call__(self, actual: Any, expected: Any, config: Any, env: Env) -> VResult:
        try:
            r = self.prepare(config)(actual, expected, env)
        except InputOverLimits as exc:
            return over_limits(exc)
        return VResult(*r) if type(r) is tuple else r  # a plain verdict as a VResult

    def __repr__(self) -> str:
        return f"<grade function {self.__name__}>"


def prepared(name: str) -> Callable[[Callable[[Any], PreparedGrader]], Preparable]:
    """Decorator of a ``prepare(config)`` function: the result is the type's grade function."""

    def wrap(prepare: Callable[[Any], PreparedGrader]) -> Preparable:
        return Preparable(prepare, name)

    return wrap


@dataclass(slots=True)
class Env:
    """What a grade function may read besides the two resolved sides and its config."""

    evidence: Evidence
    case: CaseDef
    context: GradeContext
    key: str = ""
    records: dict[str, str] = field(default_factory=dict)
    deadline: float = math.inf
    checks: Mapping[str, Any] = field(default_factory=dict)
    final: Any = None  # the case's shared final_output resolution

    def check_time(self) -> None:
        if time.perf_counter() > self.deadline:
            raise ValidatorTimeout


# ---------------------------------------------------------------------------
# Text helpers
# ---------------------------------------------------------------------------


def clip(text: str, limit: int = MAX_EVIDENCE) -> str:
    if len(text) <= limit:
        return text
    return text[: limit - 1] + "…"


_ESCAPES = {i: f"\\u{i:04x}" for i in range(32)} | {
    ord("\\"): "\\\\",
    ord('"'): '\\"',
    ord("\n"): "\\n",
    ord("\r"): "\\r",
    ord("\t"): "\\t",
}


def quote(text: str, limit: int = 80) -> str:
    """A JSON-quoted excerpt (control characters escaped), cut with an ellipsis."""
    if len(text) > limit:
        return '"' + text[:limit].translate(_ESCAPES) + '…"'
    if text.isalnum() or text.isprintable() and '"' not in text and "\\" not in text:
        return '"' + text + '"'
    return '"' + text.translate(_ESCAPES) + '"'


def head(text: str, n: int = 200) -> str:
    return quote(text, n)


def fmt_num(x: Any) -> str:
    if isinstance(x, float):
        if math.isfinite(x) and x.is_integer() and abs(x) < 1e16:
            return str(int(x))
        return repr(x)
    return str(x)


def is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def deep_equal(a: Any, b: Any) -> bool:
    """Deep JSON equality, numbers compared numerically (9 equals 9.0), bools apart."""
    t = type(a)
    if t is type(b) and (t is str or t is int):
        return a == b  # type: ignore[no-any-return]
    if is_number(a) and is_number(b):
        return a == b
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(deep_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(deep_equal(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def json_depth(value: Any) -> int:
    """How deeply ``value`` nests arrays and objects (a scalar is 0), level by level: it
    measures documents too deep for the recursive helpers."""
    depth, level = 0, [value]
    while True:
        containers = [v for v in level if isinstance(v, (dict, list))]
        if not containers:
            return depth
        depth += 1
        level = [c for v in containers for c in (v.values() if isinstance(v, dict) else v)]


class InputOverLimits(Exception):
    """Input a check cannot read within its limits (a JSON text nested deeper than the parser
    recurses, an integer of more digits than Python converts): grading.md §2's input over
    limits, ERROR / evaluator_error ``input_too_large`` (``over_limits``), never "not JSON"."""


def over_limits(exc: InputOverLimits) -> VResult:
    return error(f"ERROR: input over limits: {exc}", "input_too_large")


def too_deep(evidence: str) -> VResult:
    """ERROR / evaluator_error ``input_too_large`` (grading.md §2, input over limits) for a
    check that went past the interpreter's recursion limit on a deeply nested document."""
    limit = sys.getrecursionlimit()
    return error(f"input over limits: {evidence} (recursion limit {limit})", "input_too_large")


_LONG_DIGITS = re2.compile(r"[0-9]{19}")


def parse_json_text(text: str) -> tuple[Any, int | None]:
    """(value, None) or (None, error offset in code points).

    orjson parses first (about 5x faster on agent-sized documents); whatever it refuses
    (1e400, lone surrogates, NaN, bad JSON) is parsed again by ``json``, which
    gives the result or the error offset. orjson reads integers beyond 64 bits as floats, so
    a text with a run of 19 digits goes to ``json`` directly: integers stay exact. NaN,
    Infinity and -Infinity are not JSON: the offset of the first one is the error."""
    if len(text) < 19 or not _has_long_digit_run(text):
        try:
            return orjson.loads(text), None
        except orjson.JSONDecodeError:
            pass
    try:
        return json.loads(text, parse_constant=_refuse_constant), None
    except json.JSONDecodeError as exc:
        return None, exc.pos
    except _NonFinite:
        return None, _constant_offset(text)
    except RecursionError:
        raise InputOverLimits(
            f"the JSON text is nested more deeply than the parser reads (about"
            f" {sys.getrecursionlimit()} levels)"
        ) from None
    except ValueError:  # an integer beyond sys.get_int_max_str_digits()
        raise InputOverLimits(
            f"the JSON text holds an integer of more than {sys.get_int_max_str_digits()} digits"
        ) from None


def _has_long_digit_run(text: str) -> bool:
    """Whether ``text`` holds 19 ASCII digits in a row. Most JSON texts do not hold 19 digits
    at all, which counting them (``bytes.translate``, C speed) tells without the search."""
    data = text.encode("utf-8", "surrogatepass")  # a lone surrogate is no digit either
    if len(data) - len(data.translate(None, b"0123456789")) < 19:
        return False
    return search_span(_LONG_DIGITS, text) is not None


class _NonFinite(ValueError):
    pass


def _refuse_constant(name: str) -> Any:
    """``json`` reads NaN, Infinity and -Infinity, which JSON does not have (RFC 8259): an
    agent answering ``NaN`` passed a ``{"type": "number"}`` schema. Refused like any other
    text that is not JSON (grading.md §2: agent output that cannot be parsed is FAILED)."""
    raise _NonFinite(name)


# Strings are skipped whole, so "NaN" inside one is text, not the token.
_CONSTANT_TOKEN = re.compile(r'"(?:[^"\\]++|\\.)*+"|(NaN|-?Infinity)', re.S)


def _constant_offset(text: str) -> int:
    for m in _CONSTANT_TOKEN.finditer(text):
        if m.group(1) is not None:
            return m.start(1)
    return 0


def value_as_json(value: Any, text: str) -> tuple[Any, int | None]:
    """A resolved value as JSON: non-strings are already JSON; strings are parsed."""
    if not isinstance(value, str):
        return value, None
    return parse_json_text(text)


_UNSET = object()


def cfg(config: Any, name: str, default: Any = None) -> Any:
    """A config or spec field from a dict or a model object; None reads as the default."""
    if type(config) is dict:
        v = config.get(name)
        return default if v is None else v
    if config is None:
        return default
    v = getattr(config, name, _UNSET)
    if v is _UNSET:
        v = config.get(name) if isinstance(config, Mapping) else None
    return default if v is None else v


# ---------------------------------------------------------------------------
# RE2
# ---------------------------------------------------------------------------

_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False
# The most recently used compiled patterns of this process. A compiled RE2 pattern holds a
# few kB once it has searched, and patterns from case expectations differ per case: 4,096 of
# them were ~17 MiB in every worker process. (``regex_match`` also keeps the pattern it
# compiled last, so a spec literal skips this lookup on every case.)
REGEX_CACHE_SIZE = 256
_REGEX_CACHE: OrderedDict[str, Any] = OrderedDict()


class PatternError(ValueError):
    pass


def compile_re2(pattern: str) -> Any:
    """Compile (cached) an RE2 pattern; ``PatternError`` with the engine's text on failure."""
    compiled = _REGEX_CACHE.get(pattern)
    if compiled is not None:
        with contextlib.suppress(KeyError):  # another grading thread evicted it meanwhile
            _REGEX_CACHE.move_to_end(pattern)
        return compiled
    try:
        # google-re2's pattern class, not ``re2.compile``, which rebuilds an ``Options``
        # object field by field and keeps its own LRU of 128 patterns on top of this one:
        # half the time for per-case patterns. Like ``search_span`` below, this reads
        # google-re2 internals; tests/grading/test_fast_paths.py holds them to the public API.
        compiled = re2._Regexp(pattern, _RE2_OPTIONS)
    except Exception as exc:  # re2.error
        msg = exc.args[0] if exc.args else exc
        if isinstance(msg, bytes):
            msg = msg.decode("utf-8", "replace")
        raise PatternError(with_hint(pattern, str(msg))) from None
    _REGEX_CACHE[pattern] = compiled
    while len(_REGEX_CACHE) > REGEX_CACHE_SIZE:
        with contextlib.suppress(KeyError):
            _REGEX_CACHE.popitem(last=False)
    return compiled


_UNANCHORED = re2._Anchor.UNANCHORED
_SURROGATES = re.compile("[\ud800-\udfff]")


def search_span(rx: Any, text: str) -> tuple[int, int] | None:
    """The code-point span of the first match of a compiled RE2 pattern in ``text``, or None:
    ``rx.search(text).span()`` without the wrapper's generator, Match object and offset
    table. An ASCII text's byte offsets are its code-point offsets, so RE2 is asked
    directly; any other text goes through ``search``, which converts the offsets."""
    if text.isascii():
        s, e = rx._regexp.Match(_UNANCHORED, text.encode(), 0, len(text))[0]
        return None if s < 0 else (s, e)
    try:
        m = rx.search(text)
    except UnicodeEncodeError:
        # A lone UTF-16 surrogate (``json`` reads "\ud800" from an agent's reply) has no UTF-8
        # form, so RE2 cannot take the text: each one is searched as U+FFFD, as the stored
        # evidence holds it (runs.storable). One code point for one: the offsets stand.
        m = rx.search(_SURROGATES.sub("\ufffd", text))
    return None if m is None else m.span()


def compile_pattern(
    pattern: str, prefix: str = "", field: str = "expected_from"
) -> tuple[Any, VResult | None]:
    """``(compiled, None)``, or ``(None, the invalid_pattern pack error naming the pattern)``.
    ``field`` says where the validator took the pattern from (``details.pattern_field``); the
    grade loop adds the validator's key and its ``expected_from`` reference to the text."""
    try:
        return compile_re2(prefix + pattern), None
    except PatternError as exc:
        return None, pack_error(
            f"pattern {quote(pattern, 200)} is not a valid RE2 pattern: {exc}",
            "invalid_pattern",
            details={"pattern_field": field},
        )


def flags_prefix(flags: str) -> str:
    chosen = "".join(f for f in "ims" if f in (flags or ""))
    return f"(?{chosen})" if chosen else ""


# ---------------------------------------------------------------------------
# Restricted JSON path ($, .name, ['name'], [N])
# ---------------------------------------------------------------------------

_PATH_CACHE: dict[str, tuple[Any, ...]] = {}


def parse_json_path(path: str) -> tuple[Any, ...]:
    """Segments (str keys, int indexes) of the JSON path subset, by the grammar the publish
    checks use (``refsyntax.parse_json_path``), cached. Raises ValueError naming the path."""
    cached = _PATH_CACHE.get(path)
    if cached is not None:
        return cached
    try:
        result = _parse_json_path(path)
    except JsonPathSyntaxError as exc:
        raise JsonPathSyntaxError(f"path {path!r}: {exc}") from None
    if len(_PATH_CACHE) < 4096:
        _PATH_CACHE[path] = result
    return result


_NOT_FOUND = object()


def json_path_get(value: Any, segs: tuple[Any, ...]) -> Any:
    """The value at the path, or ``NOT_FOUND``."""
    for s in segs:
        if isinstance(s, int):
            if isinstance(value, list) and s < len(value):
                value = value[s]
            else:
                return _NOT_FOUND
        elif isinstance(value, dict) and s in value:
            value = value[s]
        else:
            return _NOT_FOUND
    return value


NOT_FOUND = _NOT_FOUND


def short_json(value: Any, limit: int = 120) -> str:
    if isinstance(value, str):
        return quote(value, limit)
    if value is None or isinstance(value, (bool, int, float)):
        return text_of(value)
    try:
        text = value if isinstance(value, str) else canonical_json(value)
    except (TypeError, ValueError):
        text = repr(value)
    except RecursionError:
        # JSON text from an agent parses about 1,000 levels deep (a returned file, say), and
        # rendering it for the evidence crashed a check that had already decided
        return "(nested too deeply to show)"
    return quote(text, limit) if isinstance(value, str) else clip(text, limit)
