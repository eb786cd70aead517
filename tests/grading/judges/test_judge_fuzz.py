"""Fuzzing what a judge provider can answer: a whole body of any JSON (or bytes), and a
well-formed completion whose content is any text or JSON verdict. Every answer ends in a
verdict or a specific ERROR / UNAVAILABLE reason; nothing reaches the engine's last net
("grading crashed")."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from grading.engine.types import Status
from tests.fakes.judge_provider import content, status
from tests.fuzzing import fuzz_settings
from tests.grading.judges.helpers import assertion, grade, judge_result, make_judge, spec

text = st.text(st.characters(min_codepoint=0, max_codepoint=0x10FFFF, exclude_categories=()), max_size=12)
values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | text,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(text, children, max_size=3),
    max_leaves=8,
)
verdicts = st.fixed_dictionaries(
    {},
    optional={
        "pass": values,
        "score": values,
        "reasoning": values,
        "citations": st.one_of(
            values, st.lists(st.fixed_dictionaries({}, optional={"id": values, "quote": values}))
        ),
        "unable_to_judge": values,
        "confidence": values,
    },
)
bodies = st.one_of(
    values.map(lambda v: json.dumps(v).encode()),
    st.binary(max_size=40),
    st.fixed_dictionaries(
        {
            "choices": st.lists(
                st.fixed_dictionaries({}, optional={"message": values, "finish_reason": values})
            )
        },
        optional={"usage": values, "model": values},
    ).map(lambda v: json.dumps(v).encode()),
    st.fixed_dictionaries(
        {"content": st.lists(values, max_size=2)}, optional={"usage": values, "stop_reason": values}
    ).map(lambda v: json.dumps(v).encode()),
)
SETTINGS = fuzz_settings(30)


def _judged(grade_) -> None:
    # a crash caught by grade_case's last net leaves no judge expectation at all
    assert grade_.reason_code != "evaluator_error" or "grading crashed" not in (grade_.message or "")
    result = judge_result(grade_)
    assert result.status in (Status.PASSED, Status.FAILED, Status.ERROR, Status.UNAVAILABLE), result
    if result.status in (Status.ERROR, Status.UNAVAILABLE):
        assert result.reason_code and result.evidence, result
        assert result.reason_code != "exception", result  # the judge code crashed: not a reason


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_any_provider_body_ends_in_a_verdict_or_a_reason(fake, kind):
    judge = make_judge(fake, kind=kind)

    @SETTINGS
    @given(bodies)
    def check(body):
        fake.default = status(200, body, {"Content-Type": "application/json"})
        _judged(grade(judge, spec(assertion(samples=1))))

    check()


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_any_verdict_content_ends_in_a_verdict_or_a_reason(fake, kind):
    judge = make_judge(fake, kind=kind)

    @SETTINGS
    @given(st.one_of(verdicts.map(json.dumps), text))
    def check(answer):
        fake.default = content(answer)
        _judged(grade(judge, spec(assertion(samples=1))))

    check()
