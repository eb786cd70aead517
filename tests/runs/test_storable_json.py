"""What the result writer sends to the database: JSON without NUL characters."""

from __future__ import annotations

import json

import orjson
from hypothesis import given
from hypothesis import strategies as st

from runs.recording import storable, storable_json

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=4)
    ),
    max_leaves=12,
)


def _replaced(value):
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd")
    if isinstance(value, list):
        return [_replaced(v) for v in value]
    if isinstance(value, dict):
        return {_replaced(k): _replaced(v) for k, v in value.items()}
    return value


@given(json_values)
def test_storable_json_is_the_value_with_nul_replaced(value):
    encoded = storable_json(value)
    assert b"\\u0000" not in encoded.replace(b"\\\\", b"")
    assert json.loads(encoded) == _replaced(value)
    assert storable(value) == _replaced(value)


def test_values_without_nul_are_encoded_once_and_returned_as_they_are():
    value = {"text": "no NUL here", "n": [1, 2]}
    assert storable_json(value) == orjson.dumps(value)
    assert storable(value) is value
    literal = {"text": "a backslash and u0000: \\u0000 is not a NUL"}
    assert storable_json(literal) == orjson.dumps(literal)
    assert storable(literal) == literal
    assert storable({"a": "x\x00y"}) == {"a": "x\ufffdy"}
