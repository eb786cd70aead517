"""One markdown code fence around the whole response is tolerated (grading.md §6.2), also
with CRLF line ends (some gateways and Windows-hosted servers send them): it was refused as
"a code fence that does not wrap the whole response" and the judge ERROR unparseable_output."""

from __future__ import annotations

import json

from grading.judges.protocol import loads_object
from tests.fakes.judge_provider import content
from tests.grading.judges.helpers import assertion, grade, judge_result, make_judge, spec


def test_a_crlf_fence_is_one_fence():
    assert loads_object('```json\r\n{"a": 1}\r\n```') == ({"a": 1}, None)
    assert loads_object('```\r\n{"a": 1}\r\n```\r\n') == ({"a": 1}, None)
    # still exactly one fence around the whole response
    assert loads_object('```json\r\n{"a": 1}\r\n```\r\nmore')[0] is None
    assert loads_object('```json\r\n{"a": 1}\r\n```\r\n```json\r\n{"a": 2}\r\n```')[0] is None


def test_a_judge_answering_a_crlf_fence_is_judged(fake):
    body = json.dumps({"pass": True, "citations": [{"id": "final_output"}]})
    fake.default = content(f"```json\r\n{body}\r\n```")
    r = judge_result(grade(make_judge(fake), spec(assertion(samples=1))))
    assert r.status.value == "PASSED", r.evidence
