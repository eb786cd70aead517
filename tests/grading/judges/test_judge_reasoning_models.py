"""OpenAI's reasoning models (o1, o3, o4 in grading.md §6.5's client table; gpt-5 too) refuse
``max_tokens`` with a 400 asking for ``max_completion_tokens``: every such judge was ERROR /
judge_request_rejected. The client asks again with ``max_completion_tokens`` (as it drops an
unsupported ``response_format``)."""

from __future__ import annotations

import json

from tests.fakes.judge_provider import status, verdict
from tests.grading.judges.helpers import assertion, grade, judge_result, make_judge, spec

UNSUPPORTED = json.dumps(
    {
        "error": {
            "message": "Unsupported parameter: 'max_tokens' is not supported with this model. "
            "Use 'max_completion_tokens' instead.",
            "type": "invalid_request_error",
            "param": "max_tokens",
            "code": "unsupported_parameter",
        }
    }
).encode()


def reasoning_model(body, path):
    if "max_tokens" in body:
        return status(400, UNSUPPORTED)(body, path)
    return verdict({"pass": True})(body, path)


def test_a_reasoning_model_is_asked_again_with_max_completion_tokens(fake):
    fake.default = reasoning_model
    r = judge_result(
        grade(make_judge(fake, max_output_tokens=700), spec(assertion(samples=1, model="o3-mini")))
    )
    assert r.status.value == "PASSED", r.evidence
    first, second = fake.requests
    assert first["max_tokens"] == 700 and "max_completion_tokens" not in first
    assert second["max_completion_tokens"] == 700 and "max_tokens" not in second
    assert r.details["samples"][0]["calls"][0]["retries"] == 0  # a reformulation, not a retry


def test_another_400_is_still_rejected_at_once(fake):
    fake.default = status(400, b'{"error": {"message": "messages: too long"}}')
    r = judge_result(grade(make_judge(fake), spec(assertion(samples=1, model="o3-mini"))))
    assert (r.status.value, r.reason_code) == ("ERROR", "judge_request_rejected") and fake.calls == 1
