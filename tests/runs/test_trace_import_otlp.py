"""The OTLP JSON walker of trace import: a document of any shape converts, or raises
``OtlpError`` naming the place (never TypeError, AttributeError or ValueError: those answered
the upload with a 500). Pure functions, no database."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runs.services.trace_import import MAX_VALUE_DEPTH, OtlpError, otlp_to_lines
from tests.fuzzing import fuzz_settings

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False),
    st.text(max_size=12),
    st.sampled_from(["", "abc", "12", "-3", "NaN", "Infinity", "execute_tool x", "STATUS_CODE_ERROR"]),
)
json_values = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3)
    ),
    max_leaves=12,
)


def _maybe(shape):
    """The right shape most of the time (19 in 20), any JSON value otherwise: the walker is
    reached at every level, with a wrong type at some of them."""
    return st.sampled_from([True] * 19 + [False]).flatmap(lambda right: shape if right else json_values)


def _object(fields, required=()):
    return st.fixed_dictionaries(
        {k: _maybe(v) for k, v in fields.items() if k in required},
        optional={k: _maybe(v) for k, v in fields.items() if k not in required},
    )


any_value = st.deferred(
    lambda: _object(
        {
            "stringValue": st.text(max_size=20)
            | st.just(json.dumps([{"role": "assistant", "content": "answer-0"}])),
            "boolValue": st.booleans(),
            "intValue": st.integers() | st.text(alphabet="-0123456789x", max_size=5),
            "doubleValue": st.floats() | st.sampled_from(["NaN", "-Infinity", "1.5", "x"]),
            "bytesValue": st.text(max_size=5),
            "arrayValue": _object({"values": st.lists(any_value, max_size=3)}),
            "kvlistValue": _object({"values": st.lists(key_value, max_size=3)}),
        }
    )
)
key_value = st.deferred(
    lambda: _object(
        {
            "key": st.sampled_from(
                [
                    *["agentclash.final_output", "gen_ai.output.messages"] * 4,
                    "agentclash.case_key",
                    "agentclash.repetition",
                    "gen_ai.operation.name",
                    "gen_ai.tool.name",
                    "gen_ai.tool.call.arguments",
                    "gen_ai.tool.call.result",
                    "gen_ai.tool.call.id",
                    "gen_ai.input.messages",
                    "gen_ai.output.messages",
                    "gen_ai.usage.input_tokens",
                    "gen_ai.response.model",
                ]
            )
            | st.text(max_size=5),
            "value": any_value,
        },
        required=("key", "value"),
    )
)
attributes = st.lists(key_value, min_size=1, max_size=4)
span = _object(
    {
        "traceId": st.sampled_from(["t1", "t2", ""]),
        "spanId": st.text(max_size=3),
        "parentSpanId": st.sampled_from(["", "root"]),
        "name": st.sampled_from(["invoke_agent", "execute_tool lookup", ""]),
        "startTimeUnixNano": st.integers(min_value=0) | st.integers(0, 2**64).map(str) | st.just(""),
        "attributes": attributes,
        "status": _object({"code": st.sampled_from([0, 1, 2, "STATUS_CODE_ERROR"])}),
    },
    required=("traceId", "attributes"),
)
document = _object(
    {
        "resourceSpans": st.lists(
            _object(
                {
                    "resource": _object({"attributes": attributes}),
                    "scopeSpans": st.lists(
                        _object({"spans": st.lists(span, min_size=1, max_size=3)}, required=("spans",)),
                        min_size=1,
                        max_size=2,
                    ),
                },
                required=("scopeSpans",),
            ),
            min_size=1,
            max_size=2,
        )
    },
    required=("resourceSpans",),
)


@fuzz_settings(200)
@given(doc=st.one_of(document, st.dictionaries(st.just("resourceSpans"), json_values, min_size=1)))
def test_any_document_converts_or_raises_otlp_error_naming_the_place(doc):
    try:
        lines = otlp_to_lines(doc)
    except OtlpError as exc:
        assert exc.path.startswith("resourceSpans") and exc.problem
        assert str(exc) == f"{exc.path}: {exc.problem}"
        return
    for line, label in lines:
        assert label.startswith("trace ")
        if line is not None:
            assert "final_output" in line
            json.dumps(line)  # what the import does with it next


def _doc(resource_spans):
    return {"resourceSpans": resource_spans}


def _attr(key, value):
    return {"key": key, "value": value}


OK_SPAN = {"traceId": "t", "attributes": [_attr("agentclash.final_output", {"stringValue": "x"})]}


@pytest.mark.parametrize(
    "doc,path,problem",
    [
        ({"resourceSpans": 5}, "resourceSpans", "must be a list, got a number"),
        (_doc([{"scopeSpans": "abc"}]), "resourceSpans[0].scopeSpans", "must be a list, got a string"),
        (_doc([{"resource": "x", "scopeSpans": []}]), "resourceSpans[0].resource", "must be an object"),
        (_doc([None]), "resourceSpans[0]", "must be an object, got null"),
        (_doc([{"scopeSpans": [[]]}]), "resourceSpans[0].scopeSpans[0]", "must be an object, got a list"),
        (
            _doc([{"scopeSpans": [{"spans": [7]}]}]),
            "resourceSpans[0].scopeSpans[0].spans[0]",
            "must be an object",
        ),
        (
            _doc([{"scopeSpans": [{"spans": [{"attributes": 5}]}]}]),
            "resourceSpans[0].scopeSpans[0].spans[0].attributes",
            "must be a list, got a number",
        ),
        (
            _doc([{"scopeSpans": [{"spans": [{**OK_SPAN, "startTimeUnixNano": "abc"}]}]}]),
            "resourceSpans[0].scopeSpans[0].spans[0].startTimeUnixNano",
            'must be an integer or a string of digits, got "abc"',
        ),
        (
            _doc([{"scopeSpans": [{"spans": [{"attributes": [_attr("k", {"arrayValue": "x"})]}]}]}]),
            "resourceSpans[0].scopeSpans[0].spans[0].attributes[0].value.arrayValue",
            "must be an object, got a string",
        ),
        (
            _doc([{"resource": {"attributes": [{"key": 3}]}}]),
            "resourceSpans[0].resource.attributes[0].key",
            "must be a string, got a number",
        ),
        (
            _doc([{"scopeSpans": [{"spans": [{"traceId": {"a": 1}}]}]}]),
            "resourceSpans[0].scopeSpans[0].spans[0].traceId",
            "must be a string, got an object",
        ),
        (
            _doc([{"scopeSpans": [{"spans": [{"status": {"code": [2]}}]}]}]),
            "resourceSpans[0].scopeSpans[0].spans[0].status.code",
            "must be a number or a status name, got a list",
        ),
        (
            _doc([{"scopeSpans": [{"spans": [{"attributes": [_attr("k", {"intValue": "1.5"})]}]}]}]),
            "resourceSpans[0].scopeSpans[0].spans[0].attributes[0].value.intValue",
            'must be an integer or a string of digits, got "1.5"',
        ),
        (
            _doc([{"scopeSpans": [{"spans": [{"attributes": [_attr("k", {"boolValue": "yes"})]}]}]}]),
            "resourceSpans[0].scopeSpans[0].spans[0].attributes[0].value.boolValue",
            "must be true or false, got a string",
        ),
    ],
)
def test_a_wrong_shape_is_an_otlp_error_naming_where(doc, path, problem):
    with pytest.raises(OtlpError) as caught:
        otlp_to_lines(doc)
    assert caught.value.path == path
    assert caught.value.problem.startswith(problem), caught.value.problem


def test_nulls_are_defaults_and_64_bit_integers_may_be_strings():
    """Protobuf JSON: a null field is its default; int64 values are usually strings."""
    doc = _doc(
        [
            {
                "resource": None,
                "scopeSpans": [
                    {"spans": None},
                    {
                        "spans": [
                            {
                                "traceId": "t",
                                "parentSpanId": None,
                                "startTimeUnixNano": "1700000000000000000",
                                "status": None,
                                "attributes": [
                                    _attr("agentclash.case_key", {"stringValue": "c0"}),
                                    _attr("agentclash.repetition", {"intValue": "2"}),
                                    _attr("agentclash.final_output", {"stringValue": "x"}),
                                    _attr("gen_ai.usage.input_tokens", {"intValue": 7}),
                                    _attr("empty", None),
                                    _attr(
                                        "nested",
                                        {"kvlistValue": {"values": [_attr("a", {"doubleValue": "NaN"})]}},
                                    ),
                                ],
                            }
                        ]
                    },
                ],
            }
        ]
    )
    [(line, label)] = otlp_to_lines(doc)
    assert label == "trace t"
    assert line == {"case_key": "c0", "repetition": 2, "final_output": "x", "metrics": {"input_tokens": 7}}


def test_attribute_values_nested_too_deeply_are_refused():
    value: dict = {"stringValue": "leaf"}
    for _ in range(MAX_VALUE_DEPTH + 1):
        value = {"arrayValue": {"values": [value]}}
    doc = _doc([{"scopeSpans": [{"spans": [{"attributes": [_attr("deep", value)]}]}]}])
    with pytest.raises(OtlpError, match="nested more than"):
        otlp_to_lines(doc)
