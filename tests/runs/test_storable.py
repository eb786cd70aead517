"""What the result writer sends to the database: JSON PostgreSQL can store, whatever an agent
answered (NUL characters, lone surrogates, integers beyond 64 bits, NaN and infinities)."""

from __future__ import annotations

import json
import math
import threading
from datetime import UTC, datetime

import orjson
import pytest
from django.db import connection
from hypothesis import given
from hypothesis import strategies as st

from runs.storable import storable, storable_json
from tests.fuzzing import fuzz_settings

# Every code point, surrogates and NUL included (the default alphabet leaves surrogates out).
any_text = st.text(st.characters(min_codepoint=0, max_codepoint=0x10FFFF, exclude_categories=()), max_size=8)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | any_text,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(any_text, children, max_size=4),
    max_leaves=12,
)


def _expected(value):
    if isinstance(value, str):
        return "".join("\ufffd" if c == "\x00" or 0xD800 <= ord(c) <= 0xDFFF else c for c in value)
    if isinstance(value, list):
        return [_expected(v) for v in value]
    if isinstance(value, dict):
        return {_expected(k): _expected(v) for k, v in value.items()}
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _same(a, b, *, numbers_by_value=False):
    """Equal, with types; ``numbers_by_value``: 1e+16 == 10000000000000000 (jsonb writes
    numbers in its own way)."""
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(
            _same(x, y, numbers_by_value=numbers_by_value) for x, y in zip(a, b, strict=True)
        )
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k], numbers_by_value=numbers_by_value) for k in a)
    numbers = (int, float)
    if numbers_by_value and isinstance(a, numbers) and isinstance(b, numbers) and not isinstance(a, bool):
        exact = isinstance(a, int) and isinstance(b, int)
        return (a == b if exact else float(a) == float(b)) and not isinstance(b, bool)
    return a == b and type(a) is type(b)


@fuzz_settings(100)
@given(json_values)
def test_storable_json_is_the_value_with_what_postgresql_refuses_replaced(value):
    encoded = storable_json(value)
    decoded = json.loads(encoded)
    assert _same(decoded, _expected(value))
    assert _same(storable(value), _expected(value))


@pytest.mark.django_db
@fuzz_settings(60)
@given(json_values)
def test_postgresql_stores_every_storable_value(value):
    with connection.cursor() as cursor:
        cursor.execute("SELECT (%s::jsonb)::text", [storable_json(value).decode()])
        assert _same(json.loads(cursor.fetchone()[0]), _expected(value), numbers_by_value=True)


def test_values_that_need_nothing_are_encoded_once_and_returned_as_they_are():
    value = {"text": "nothing to replace", "n": [1, 2.5, None]}
    assert storable_json(value) == orjson.dumps(value)
    assert storable(value) == value
    literal = {"text": "a backslash and u0000: \\u0000 is not a NUL"}
    assert storable_json(literal) == orjson.dumps(literal)
    assert storable(literal) == literal


def test_the_slow_path_writes_datetimes_as_orjson_does():
    naive, aware = datetime(2026, 11, 26, 8, 0, 0, 5), datetime(2026, 11, 26, 8, 0, tzinfo=UTC)
    rows = [(1, naive, aware, "x\x00"), (2, None, None, 2**70)]
    assert json.loads(storable_json(rows, option=orjson.OPT_NAIVE_UTC)) == [
        [1, "2026-11-26T08:00:00.000005+00:00", "2026-11-26T08:00:00+00:00", "x\ufffd"],
        [2, None, None, 2**70],
    ]
    clean = [(1, naive, aware, "x")]
    assert json.loads(storable_json(clean, option=orjson.OPT_NAIVE_UTC)) == json.loads(
        orjson.dumps(clean, option=orjson.OPT_NAIVE_UTC)
    )


def test_values_as_deep_as_json_reads_on_a_fresh_thread_are_stored_cut():
    """The dispatcher reads a reply on its loop thread and writes it on its writer thread,
    both with shallow stacks, where json reads nearly 1,000 levels: the writer must not hit
    the recursion limit where the reader did not."""
    from runs.storable import MAX_DEPTH, TOO_DEEP

    seen: dict[str, object] = {}

    def work() -> None:
        try:
            deepest = 0
            for depth in range(850, 1100, 10):
                try:
                    value = json.loads("[" * depth + "]" * depth)
                except RecursionError:
                    break
                stored = json.loads(storable_json({"evidence": {"response": value}}))
                inner, levels = stored["evidence"]["response"], 0
                while isinstance(inner, list):
                    inner, levels = inner[0] if inner else None, levels + 1
                assert (inner, levels) == (TOO_DEEP, MAX_DEPTH - 2)
                deepest = depth
            seen["deepest"] = deepest
        except BaseException as exc:  # reported on the test's thread
            seen["error"] = exc

    thread = threading.Thread(target=work)
    thread.start()
    thread.join(timeout=60)
    assert "error" not in seen, seen.get("error")
    assert seen["deepest"] >= 900
