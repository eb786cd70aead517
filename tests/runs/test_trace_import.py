"""Trace import: JSONL and OTLP JSON results, bad lines reported per line, good lines graded."""

from __future__ import annotations

import json

import pytest

from runs.dispatch import dispatch_lane
from runs.models import RunItem, RunLane
from runs.services.deployments import deployment_create
from runs.services.trace_import import run_import_results
from tests.runs.runfactory import create_run, publish

pytestmark = pytest.mark.django_db


def _trace_run(personas, cases=3):
    version = publish(personas.workspace, cases=cases)
    dep = deployment_create(workspace=personas.workspace, name="ci", kind="trace_import").deployment
    return create_run(personas.workspace, version, [dep])


def test_jsonl_good_lines_graded_bad_lines_reported(personas):
    run = _trace_run(personas)
    lane = RunLane.objects.get(run=run)
    assert dispatch_lane(lane.pk).claimed == 0  # trace lanes wait for results
    data = "\n".join(
        [
            json.dumps({"case_key": "c0", "final_output": "answer-0"}),
            "{not json",
            json.dumps({"case_key": "nope", "final_output": "x"}),
            json.dumps({"case_key": "c1", "deployment": "ci", "final_output": "wrong"}),
            json.dumps({"case_key": "c0", "final_output": "again"}),
            json.dumps({"case_key": "c2", "deployment": "other", "final_output": "x"}),
        ]
    ).encode()
    outcome = run_import_results(run=run, data=data)
    assert outcome.accepted == 2
    assert [b["line"] for b in outcome.bad_lines] == [2, 3, 5, 6]
    body = outcome.error_body()["error"]
    assert body["code"] == "invalid_results" and body["message"] == "4 bad result lines"
    assert "not in the input set" in outcome.bad_lines[1]["message"]
    assert "duplicate" in outcome.bad_lines[2]["message"]
    run.refresh_from_db()
    assert run.status == "running"
    assert dict(RunItem.objects.filter(run=run).exclude(status="").values_list("case_key", "status")) == {
        "c0": "PASSED",
        "c1": "FAILED",
    }
    again = run_import_results(run=run, data=json.dumps({"case_key": "c0", "final_output": "x"}).encode())
    assert again.accepted == 0 and "already has a result" in again.bad_lines[0]["message"]
    last = run_import_results(
        run=run, data=json.dumps({"case_key": "c2", "final_output": "answer-2"}).encode()
    )
    assert last.accepted == 1 and not last.bad_lines
    run.refresh_from_db()
    assert run.status == "completed"
    assert run.stats["lanes"][0]["counts"]["PASSED"] == 2


def _attr(key, value):
    kind = "intValue" if isinstance(value, int) else "stringValue"
    return {"key": key, "value": {kind: value}}


def test_otlp_traces_are_matched_by_routing_attributes(personas):
    run = _trace_run(personas, cases=2)
    document = {
        "resourceSpans": [
            {
                "resource": {"attributes": [_attr("agentclash.deployment", "ci")]},
                "scopeSpans": [
                    {
                        "spans": [
                            {
                                "traceId": "t1",
                                "spanId": "root",
                                "name": "invoke_agent",
                                "attributes": [
                                    _attr("agentclash.case_key", "c1"),
                                    _attr("agentclash.repetition", 1),
                                    _attr(
                                        "gen_ai.output.messages",
                                        json.dumps([{"role": "assistant", "content": "it is answer-1"}]),
                                    ),
                                    _attr("gen_ai.usage.input_tokens", 12),
                                ],
                            },
                            {
                                "traceId": "t1",
                                "spanId": "tool",
                                "parentSpanId": "root",
                                "name": "execute_tool lookup",
                                "startTimeUnixNano": "1",
                                "attributes": [
                                    _attr("gen_ai.operation.name", "execute_tool"),
                                    _attr("gen_ai.tool.name", "lookup"),
                                    _attr("gen_ai.tool.call.arguments", '{"q": 1}'),
                                ],
                            },
                            {"traceId": "t2", "spanId": "x", "name": "invoke_agent", "attributes": []},
                        ]
                    }
                ],
            }
        ]
    }
    outcome = run_import_results(run=run, data=json.dumps(document).encode())
    assert outcome.accepted == 1
    assert len(outcome.bad_lines) == 1 and "no final output" in outcome.bad_lines[0]["message"]
    item = RunItem.objects.get(run=run, case_key="c1")
    assert item.status == "PASSED" and item.input_tokens == 12
    assert item.evidence["response"]["tool_calls"][0]["name"] == "lookup"


def test_uploaded_text_postgresql_cannot_store_as_sent_is_stored_cleaned(personas):
    run = _trace_run(personas, cases=2)
    data = "\n".join(
        [
            '{"case_key": "c0", "final_output": "answer-0\\u0000", "n": 123456789012345678901234567890}',
            '{"case_key": "c1", "final_output": "answer-1\\ud800"}',
        ]
    ).encode()
    outcome = run_import_results(run=run, data=data)
    assert (outcome.accepted, outcome.bad_lines) == (2, [])
    items = {i.case_key: i for i in RunItem.objects.filter(run=run)}
    assert items["c0"].evidence["response"]["final_output"] == "answer-0\ufffd"
    assert items["c1"].evidence["response"]["final_output"] == "answer-1\ufffd"
    assert [items[k].status for k in ("c0", "c1")] == ["PASSED", "PASSED"]


def test_an_upload_nested_too_deeply_is_a_bad_line_not_an_error(personas):
    run = _trace_run(personas, cases=2)
    deep = '{"case_key": "c0", "final_output": ' + "[" * 5000 + "]" * 5000 + "}"
    otlp = '{"resourceSpans": ' + "[" * 5000 + "]" * 5000 + "}"
    for data in (deep, otlp):
        outcome = run_import_results(run=run, data=data.encode())
        assert outcome.accepted == 0 and len(outcome.bad_lines) == 1, outcome.bad_lines
    ok_line = json.dumps({"case_key": "c1", "final_output": "answer-1"}).encode()
    assert run_import_results(run=run, data=ok_line).accepted == 1
