"""Replies that carry no verdict object although the call succeeded (grading.md §6.2): a
refusal, a tool call, empty content, an answer cut at the output token limit. Each is an
invalid response (retried once, then an invalid sample), its reported usage recorded;
a judge fault never becomes an agent failure."""

from __future__ import annotations

import json

import pytest

from tests.fakes.judge_provider import verdict
from tests.grading.judges.helpers import assertion, grade, judge_result, make_judge, spec


def chat(message: dict, finish: str = "stop", usage: tuple[int, int] = (100, 20)):
    payload = {
        "id": "chatcmpl-fake",
        "model": "gpt-4o-mini",
        "choices": [{"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish}],
        "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1], "total_tokens": sum(usage)},
    }
    return lambda body, path: (200, {"Content-Type": "application/json"}, json.dumps(payload).encode())


def messages(content: list[dict], stop: str, usage: tuple[int, int] = (100, 20)):
    payload = {
        "model": "claude-haiku-4-5",
        "content": content,
        "stop_reason": stop,
        "usage": {"input_tokens": usage[0], "output_tokens": usage[1]},
    }
    return lambda body, path: (200, {"Content-Type": "application/json"}, json.dumps(payload).encode())


CUT_VERDICT = '{"pass": false, "citations": [{"id": "final_output"}]}'
OPENAI_REPLIES = {
    "refusal": (chat({"content": None, "refusal": "I can't help with that."}), "refused"),
    "tool_call": (
        chat(
            {
                "content": None,
                "tool_calls": [{"id": "t", "type": "function", "function": {"name": "x", "arguments": "{}"}}],
            },
            finish="tool_calls",
        ),
        "tool call",
    ),
    "no_content": (chat({"content": None}), "no content"),
    "cut": (chat({"content": CUT_VERDICT}, finish="length"), "output token limit"),
}


@pytest.mark.parametrize("name", list(OPENAI_REPLIES))
def test_a_reply_without_a_verdict_is_an_invalid_sample_retried_once(fake, name):
    reply, said = OPENAI_REPLIES[name]
    fake.default = reply
    g = grade(make_judge(fake), spec(assertion(samples=1)))
    r = judge_result(g)
    assert (r.status.value, r.outcome_class.value, r.reason_code) == (
        "ERROR",
        "evaluator_error",
        "unparseable_output",
    )
    assert said in r.evidence
    assert fake.calls == 2  # retried once
    sample = r.details["samples"][0]
    assert [c["outcome"] for c in sample["calls"]] == ["invalid", "invalid"]
    # the provider billed both calls: their usage is recorded and charged
    assert (g.judge_usage.calls, g.judge_usage.input_tokens, g.judge_usage.output_tokens) == (2, 200, 40)
    assert g.judge_usage.cost_usd and g.judge_usage.cost_usd > 0
    assert g.status.value == "PASSED"  # the validator's verdict stands: never an agent failure


def test_a_refusal_in_one_sample_is_retried_and_the_judge_still_decides(fake):
    fake.queue(chat({"content": None, "refusal": "no"}))  # the first call answered
    fake.default = verdict({"pass": True})
    r = judge_result(grade(make_judge(fake), spec(assertion(samples=3))))
    assert r.status.value == "PASSED", r.evidence
    outcomes = sorted(c["outcome"] for s in r.details["samples"] for c in s["calls"])
    assert outcomes == ["invalid", "ok", "ok", "ok"] and fake.calls == 4


ANTHROPIC_REPLIES = {
    "refusal": (messages([], "refusal"), "refused"),
    "cut": (
        messages(
            [{"type": "tool_use", "id": "t", "name": "record_verdict", "input": {"pass": False}}],
            "max_tokens",
        ),
        "output token limit",
    ),
}


@pytest.mark.parametrize("name", list(ANTHROPIC_REPLIES))
def test_an_anthropic_reply_without_a_verdict_is_an_invalid_sample(fake, name):
    reply, said = ANTHROPIC_REPLIES[name]
    fake.default = reply
    g = grade(make_judge(fake, kind="anthropic"), spec(assertion(samples=1, model="claude-haiku-4-5")))
    r = judge_result(g)
    assert (r.status.value, r.reason_code) == ("ERROR", "unparseable_output")
    assert said in r.evidence and fake.calls == 2
    assert g.judge_usage.input_tokens == 200


def test_content_given_as_a_list_of_parts_is_read(fake):
    # Mistral's reasoning models (and some gateways) answer content as typed parts
    parts = [
        {"type": "thinking", "thinking": [{"type": "text", "text": "let me see"}]},
        {"type": "text", "text": '{"pass": true, "citations": [{"id": "final_output"}]}'},
    ]
    fake.default = chat({"content": parts})
    r = judge_result(grade(make_judge(fake), spec(assertion(samples=1, model="mistral-medium-latest"))))
    assert r.status.value == "PASSED", r.evidence
    assert fake.calls == 1
