"""The engine's fast paths give exactly what the reference calls give: ``search_span`` is
``re2.search(...).span()``, ``parse_json_text`` is ``json.loads`` (value or error offset)
without its NaN / Infinity / -Infinity extension, which JSON does not have."""

from __future__ import annotations

import json
import math

import pytest
import re2
from hypothesis import given, settings
from hypothesis import strategies as st

from grading.engine.refs import Resolved
from grading.engine.validators.common import InputOverLimits, compile_re2, parse_json_text, search_span


class _Constant(Exception):
    pass


def _refuse(name: str) -> object:
    raise _Constant(name)


def _reference_parse(text: str) -> tuple[object, int | None]:
    """``json.loads``; a NaN or Infinity token gives (None, "constant")."""
    try:
        return json.loads(text, parse_constant=_refuse), None
    except json.JSONDecodeError as exc:
        return None, exc.pos
    except _Constant:
        return None, "constant"  # type: ignore[return-value]
    except (ValueError, RecursionError):  # too deep, or an integer of too many digits
        return None, "over limits"  # type: ignore[return-value]


def _assert_same_parse(text: str) -> None:
    want = _reference_parse(text)
    if want[1] == "over limits":  # JSON all the same: input over limits, never "not JSON"
        with pytest.raises(InputOverLimits):
            parse_json_text(text)
        return
    got = parse_json_text(text)
    if want[1] == "constant":  # refused at the first token json read as a number
        assert got[0] is None and got[1] is not None
        assert text[got[1] :].startswith(("NaN", "Infinity", "-Infinity"))
        return
    assert got[1] == want[1]
    assert _same(got[0], want[0])


def _same(a: object, b: object) -> bool:
    """Equal values of equal types all the way down (1 and 1.0 differ; NaN equals NaN)."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)  # type: ignore[index]
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))  # type: ignore[arg-type]
    return a == b


TRICKY_JSON = [
    '{"a": 1, "a": 2}',  # duplicate keys: the last wins
    "-0",
    "-0.0",
    "1e400",  # json reads inf; orjson refuses
    "NaN",  # json reads these; JSON has no such tokens
    "[Infinity, -Infinity]",
    '["NaN", NaN]',
    '"\\ud800"',  # a lone surrogate escape
    "123456789012345678901234567890",  # beyond 64 bits: must stay an exact int
    "18446744073709551615",
    "-9223372036854775809",
    '{"n": 12345678901234567890123}',
    "1.0000000000000002",
    "  [1, 2]  ",
    "\ufeff1",
    '"a\x01"',  # a raw control character
    "[1, 2",
    "",
    "{}x",
    '{"k": "é ✓ 𝄞"}',
    "[" * 5000 + "]" * 5000,  # deeper than orjson's limit and json's recursion
    "1" * 5000,  # more digits than int() converts
]


@pytest.mark.parametrize("text", TRICKY_JSON, ids=range(len(TRICKY_JSON)))
def test_parse_json_text_matches_json_loads(text: str) -> None:
    _assert_same_parse(text)


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(json_values, st.booleans())
def test_parse_json_text_matches_json_loads_on_generated_documents(value: object, ascii_only: bool) -> None:
    text = json.dumps(value, ensure_ascii=ascii_only)
    _assert_same_parse(text)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=40))
def test_parse_json_text_matches_json_loads_on_arbitrary_text(text: str) -> None:
    _assert_same_parse(text)


PATTERNS = [r"\d+", r"(?i)ABC", r"^$", r"", r"(a)(b)?", r"é+", r"(?m)^x$", r"\bfoo\b", "z{2,}"]
TEXTS = ["", "abc 123", "xyz", "ééé a", "line\nx\nmore", "foo bar", "a" * 10, "café 42 ✓ 𝄞 7", "zz zzz"]


@pytest.mark.parametrize("pattern", PATTERNS)
@pytest.mark.parametrize("text", TEXTS)
def test_search_span_matches_re2_search(pattern: str, text: str) -> None:
    m = re2.compile(pattern).search(text)
    assert search_span(compile_re2(pattern), text) == (None if m is None else m.span())


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(PATTERNS), st.text(max_size=30))
def test_search_span_matches_re2_search_on_arbitrary_text(pattern: str, text: str) -> None:
    m = re2.compile(pattern).search(text)
    assert search_span(compile_re2(pattern), text) == (None if m is None else m.span())


def test_the_pattern_cache_is_a_bounded_lru(monkeypatch):
    from grading.engine.validators import common

    monkeypatch.setattr(common, "REGEX_CACHE_SIZE", 8)
    monkeypatch.setattr(common, "_REGEX_CACHE", common.OrderedDict())
    kept = compile_re2("kept")
    for n in range(20):
        compile_re2(f"case{n}")
        assert compile_re2("kept") is kept  # used all along: never evicted
    assert len(common._REGEX_CACHE) == 8
    assert "case0" not in common._REGEX_CACHE and "case19" in common._REGEX_CACHE


def test_a_literal_pattern_is_compiled_once_per_validator(monkeypatch):
    """regex_match keeps the pattern it compiled last: a spec literal does not go through
    the shared cache on every case, so per-case patterns cannot evict it."""
    from grading.engine.validators import common, text

    calls = []
    real = common.compile_pattern

    def counting(pattern, prefix=""):
        calls.append(pattern)
        return real(pattern, prefix)

    monkeypatch.setattr(text, "compile_pattern", counting)
    grade = text.regex_match.prepare({})
    for answer in ("A1 = 1", "A2 = 4", "nope"):
        grade(Resolved(answer), Resolved(r"A\d+ = \d+"), None)
    assert calls == [r"A\d+ = \d+"]
    grade(Resolved("x"), Resolved("y"), None)
    assert calls == [r"A\d+ = \d+", "y"]


def test_the_overall_line_is_remembered_by_finding_kinds():
    from grading.engine import grade
    from grading.engine.critique import overall_line
    from grading.engine.types import Suggestion

    def s(kind, n=0):
        return Suggestion(reason=f"r{n}", finding=kind, source="probe")

    for findings in (
        [],
        [s("trivially_satisfied")],
        [s("b", 1), s("a", 2), s("b", 3)],
        [s("a"), s("b"), s("b")],
    ):
        assert grade._overall_line(findings) == overall_line(findings)
        assert grade._overall_line(list(reversed(findings))) == overall_line(findings)
