"""OTLP traces as GenAI instrumentations write them: the agent's answer and token usage on its
inference (``chat``) spans, not on the root span; the root span's duration is the case's
latency. Pure conversion, no database."""

from __future__ import annotations

import json

from runs.services.trace_import import otlp_to_lines

T = "0af7651916cd43dd8448eb211c80319c"


def _attr(key, value):
    if isinstance(value, int):
        return {"key": key, "value": {"intValue": str(value)}}
    return {"key": key, "value": {"stringValue": value}}


def _span(span_id, parent="", name="invoke_agent", start=1, end=None, attrs=()):
    span = {
        "traceId": T,
        "spanId": span_id,
        "parentSpanId": parent,
        "name": name,
        "startTimeUnixNano": str(start),
        "attributes": list(attrs),
    }
    if end is not None:
        span["endTimeUnixNano"] = str(end)
    return span


def _document(*spans):
    resource = {"attributes": [_attr("agentclash.case_key", "c0")]}
    return {"resourceSpans": [{"resource": resource, "scopeSpans": [{"spans": list(spans)}]}]}


def _said(text):
    return json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": text}]}])


def _chat(span_id, start, text, input_tokens, output_tokens, model="gpt-x"):
    return _span(
        span_id,
        parent="r",
        name=f"chat {model}",
        start=start,
        end=start + 10,
        attrs=[
            _attr("gen_ai.operation.name", "chat"),
            _attr("gen_ai.response.model", model),
            _attr("gen_ai.output.messages", _said(text)),
            _attr("gen_ai.usage.input_tokens", input_tokens),
            _attr("gen_ai.usage.output_tokens", output_tokens),
        ],
    )


def test_the_answer_and_usage_of_inference_spans_are_the_traces():
    """A trace whose answer is on its last ``chat`` span was refused ('no final output') and
    its tokens, on the chat spans, were never counted."""
    document = _document(
        _span("r", start=1_000_000_000, end=3_500_000_000),
        _chat("a", 1_100_000_000, "let me look", 100, 20),
        _chat("b", 2_000_000_000, "answer-0", 150, 30, model="gpt-y"),
    )
    ((line, label),) = otlp_to_lines(document)
    assert line is not None, label
    assert line["final_output"] == "answer-0"
    assert line["metrics"] == {
        "input_tokens": 250,
        "output_tokens": 50,
        "model": "gpt-y",
        "latency_ms": 2500.0,
    }


def test_what_the_root_span_says_wins():
    document = _document(
        _span(
            "r",
            start=1,
            attrs=[
                _attr("agentclash.final_output", "root answer"),
                _attr("gen_ai.usage.input_tokens", 7),
                _attr("gen_ai.request.model", "root-model"),
            ],
        ),
        _chat("b", 2, "child answer", 150, 30),
    )
    ((line, _),) = otlp_to_lines(document)
    assert line["final_output"] == "root answer"
    assert line["metrics"] == {"input_tokens": 7, "model": "root-model"}  # no end time: no latency


def test_a_span_without_a_usable_duration_gives_no_latency():
    for start, end in ((5, 3), (0, 10), (10, 0)):
        document = _document(_span("r", start=start, end=end, attrs=[_attr("agentclash.final_output", "x")]))
        ((line, _),) = otlp_to_lines(document)
        assert "metrics" not in line, (start, end, line)


def test_a_boolean_usage_is_not_a_token_count():
    document = _document(
        _span(
            "r",
            attrs=[
                _attr("agentclash.final_output", "x"),
                {"key": "gen_ai.usage.input_tokens", "value": {"boolValue": True}},
            ],
        )
    )
    ((line, _),) = otlp_to_lines(document)
    assert "metrics" not in line
