"""A pack's ``output_schema`` constrains every judge answer (grading.md §6.1-6.2), but the
prompt never showed it: a judge could not know the extra fields asked of it, so every
answer failed validation and the judge was ERROR / unparseable_output."""

from __future__ import annotations

import json

from tests.fakes.judge_provider import blocks, verdict
from tests.grading.judges.helpers import assertion, grade, judge_result, make_judge, spec

SCHEMA = {
    "type": "object",
    "properties": {"severity": {"enum": ["low", "high"]}},
    "required": ["severity"],
}


def obeying(body):
    """A judge that follows the prompt: it adds ``severity`` only when the prompt asks for it."""
    system = body["messages"][0]["content"]
    data = {"pass": True, "citations": [{"id": blocks(body)[0][0]}]}
    if '"severity"' in system:
        data["severity"] = "low"
    return data


def test_the_prompt_shows_the_packs_output_schema(fake):
    fake.default = verdict(obeying)
    r = judge_result(grade(make_judge(fake), spec(assertion(samples=1, output_schema=SCHEMA))))
    system = fake.requests[0]["messages"][0]["content"]
    assert json.dumps(SCHEMA, sort_keys=True) in system
    assert r.status.value == "PASSED", r.evidence


def test_without_an_output_schema_the_prompt_has_no_schema_line(fake):
    fake.default = verdict(obeying)
    r = judge_result(grade(make_judge(fake), spec(assertion(samples=1))))
    assert "JSON Schema" not in fake.requests[0]["messages"][0]["content"]
    assert r.status.value == "PASSED"
