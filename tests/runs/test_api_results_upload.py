"""``POST .../runs/{id}/results`` through the API: an OTLP document of the wrong shape is a 400
naming the place (it answered 500 with a traceback), and an upload is all or nothing (a refused
upload kept its good lines, so the corrected file was refused in turn)."""

from __future__ import annotations

import gzip
import json

import pytest

from runs.models import Run, RunItem, RunLane
from runs.services import trace_import
from runs.services.deployments import deployment_create
from tests.runs.runfactory import create_run, publish

pytestmark = pytest.mark.django_db
BASE = "/api/v1/workspaces/acme/runs"


def _trace_run(personas, cases=3, names=("ci",)):
    version = publish(personas.workspace, cases=cases)
    deps = [
        deployment_create(workspace=personas.workspace, name=n, kind="trace_import").deployment for n in names
    ]
    return create_run(personas.workspace, version, deps)


def _post(personas, run, body, user=None):
    api = personas.api(user or personas.editor)
    api.raise_request_exception = False
    text = body if isinstance(body, str) else ""
    content_type = "application/json" if text.lstrip().startswith(("{", "[")) else "application/x-ndjson"
    return api.generic("POST", f"{BASE}/{run.pk}/results", body, content_type=content_type)


def _nothing_stored(run):
    run.refresh_from_db()
    assert not RunItem.objects.filter(run=run).exclude(state="pending").exists()
    assert run.items_open == run.items_total
    for lane in RunLane.objects.filter(run=run):
        assert (lane.status, lane.pending, lane.passed + lane.failed) == (
            "queued",
            RunItem.objects.filter(lane=lane).count(),
            0,
        )
    return True


def _span(**fields):
    return {"traceId": "t1", "spanId": "s1", "name": "invoke_agent", **fields}


def _otlp(resource_spans):
    return json.dumps({"resourceSpans": resource_spans})


def _spans(*spans):
    return _otlp([{"scopeSpans": [{"spans": list(spans)}]}])


SPANS = "resourceSpans[0].scopeSpans[0].spans[0]"


@pytest.mark.parametrize(
    "body,field,problem",
    [
        ('{"resourceSpans": 5}', "resourceSpans", "must be a list, got a number"),
        (_otlp([{"scopeSpans": "abc"}]), "resourceSpans[0].scopeSpans", "must be a list, got a string"),
        (
            _otlp([{"resource": "x", "scopeSpans": []}]),
            "resourceSpans[0].resource",
            "must be an object, got a string",
        ),
        (_spans(_span(attributes=5)), f"{SPANS}.attributes", "must be a list, got a number"),
        (
            _spans(_span(startTimeUnixNano="abc")),
            f"{SPANS}.startTimeUnixNano",
            'must be an integer or a string of digits, got "abc"',
        ),
        (
            _spans(_span(attributes=[{"key": "k", "value": {"arrayValue": "x"}}])),
            f"{SPANS}.attributes[0].value.arrayValue",
            "must be an object, got a string",
        ),
    ],
)
def test_an_otlp_document_of_the_wrong_shape_is_a_400_naming_where(personas, body, field, problem):
    run = _trace_run(personas)
    response = _post(personas, run, body)
    assert response.status_code == 400, response.content[:300]
    assert response["Content-Type"] == "application/json"
    error = response.json()["error"]
    assert (error["code"], error["field"]) == ("parse_error", field)
    assert f"{field} {problem}" in error["message"]
    assert "OTLP" in error["message"]
    assert _nothing_stored(run)


def test_a_json_list_is_a_bad_results_line_not_an_error(personas):
    run = _trace_run(personas)
    response = _post(personas, run, '[{"scopeSpans":"abc"}]')
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid_results"
    assert error["lines"] == [{"line": 1, "message": "not a JSON object"}]


def test_a_refused_upload_stores_nothing_and_the_corrected_file_is_accepted(personas):
    """QA: line 1 valid and 11 bad lines answered 400 "11 bad result lines" with accepted 1,
    then the corrected file failed with "this case and repetition already has a result"."""
    run = _trace_run(personas, cases=12)
    good = [json.dumps({"case_key": f"c{i}", "final_output": f"answer-{i}"}) for i in range(12)]
    broken = [good[0]] + [json.dumps({"case_key": f"c{i}"}) for i in range(1, 12)]  # no final_output
    response = _post(personas, run, "\n".join(broken))
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid_results"
    assert error["message"].startswith("11 bad result lines; nothing was stored")
    assert "accepted" not in error
    assert [(line["line"], line["message"]) for line in error["lines"]] == [
        (n, "final_output is required") for n in range(2, 13)
    ]
    assert _nothing_stored(run)
    assert Run.objects.get(pk=run.pk).status == "queued"

    fixed = _post(personas, run, "\n".join(good))
    assert fixed.status_code == 200, fixed.content
    assert fixed.json() == {"accepted": 12, "run": {"id": str(run.pk), "status": "completed"}}
    assert RunItem.objects.filter(run=run, status="PASSED").count() == 12


def test_an_item_finished_by_someone_else_meanwhile_rolls_back_every_lane(personas, monkeypatch):
    """The check that every line's item is pending happens before grading (a judge may be
    called, outside any transaction); an item another upload finished in between is caught
    by the guarded write, and the lanes already written in this upload are rolled back."""
    run = _trace_run(personas, cases=2, names=("ci", "cd"))
    lines = [
        json.dumps({"case_key": f"c{i}", "deployment": dep, "final_output": f"answer-{i}"})
        for dep in ("ci", "cd")
        for i in range(2)
    ]
    taken = RunItem.objects.get(run=run, lane__deployment_name="cd", case_key="c1")
    grade = trace_import.grade_outcomes

    def grade_while_another_upload_writes(*args, **kwargs):
        RunItem.objects.filter(pk=taken.pk).update(state="done")  # as a concurrent upload would
        return grade(*args, **kwargs)

    monkeypatch.setattr(trace_import, "grade_outcomes", grade_while_another_upload_writes)
    response = _post(personas, run, "\n".join(lines))
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["lines"] == [{"line": 4, "message": trace_import.ALREADY_DONE, "field": "case_key"}]
    RunItem.objects.filter(pk=taken.pk).update(state="pending")
    assert _nothing_stored(run)
    assert Run.objects.get(pk=run.pk).status == "queued"


def test_an_upload_to_another_workspace_run_is_404(personas):
    run = _trace_run(personas)
    response = _post(personas, run, '{"resourceSpans": 5}', user=personas.outsider)
    assert response.status_code == 404
    assert _nothing_stored(run)


def test_a_bad_otlp_trace_refuses_the_document_and_is_named_by_its_trace(personas):
    run = _trace_run(personas, cases=2)

    def trace(trace_id, case_key):
        attrs = [
            {"key": "agentclash.case_key", "value": {"stringValue": case_key}},
            {"key": "agentclash.final_output", "value": {"stringValue": "answer-0"}},
        ]
        return _span(traceId=trace_id, attributes=attrs)

    response = _post(personas, run, _spans(trace("t1", "c0"), trace("t2", "zz")))
    assert response.status_code == 400
    assert response.json()["error"]["lines"] == [
        {"line": 2, "message": "trace t2: case 'zz' is not in the input set", "field": "case_key"}
    ]
    assert _nothing_stored(run)
    accepted = _post(personas, run, _spans(trace("t1", "c0")))
    assert accepted.json()["accepted"] == 1


def test_an_upload_over_the_size_limit_is_a_413_and_stores_nothing(personas, monkeypatch):
    from runs.api import runs as run_api

    run = _trace_run(personas)
    line = json.dumps({"case_key": "c0", "final_output": "answer-0"})
    monkeypatch.setattr(run_api, "MAX_RESULTS_BYTES", len(line) - 1)  # the API's parser
    response = _post(personas, run, line)
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "payload_too_large"
    assert _nothing_stored(run)
    monkeypatch.setattr(trace_import, "MAX_RESULTS_BYTES", len(line) - 1)  # the service's own check
    with pytest.raises(trace_import.RunError) as caught:
        trace_import.run_import_results(run=run, data=line.encode())
    assert (caught.value.code, caught.value.status_code) == ("payload_too_large", 413)
    assert _nothing_stored(run)


@pytest.mark.parametrize("body", ["", "\n\n  \r\n", '{"resourceSpans": []}'])
def test_an_upload_without_a_result_line_is_a_400(personas, body):
    """An empty file (a CI step that wrote nothing) was answered 200 ``accepted: 0``, so the
    job went green with no result uploaded."""
    run = _trace_run(personas)
    response = _post(personas, run, body)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "no_results"
    assert _nothing_stored(run)


def test_a_gzipped_upload_is_read_as_its_jsonl(personas):
    """A gzipped JSONL (``Content-Encoding: gzip``, or the bytes alone) was read as text:
    one bad line, "not UTF-8 text"."""
    run = _trace_run(personas)
    lines = [json.dumps({"case_key": f"c{i}", "final_output": f"answer-{i}"}) for i in range(3)]
    first = gzip.compress("\n".join(lines[:2]).encode())
    api = personas.api(personas.editor)
    response = api.generic(
        "POST",
        f"{BASE}/{run.pk}/results",
        first,
        content_type="application/x-ndjson",
        HTTP_CONTENT_ENCODING="gzip",
    )
    assert response.status_code == 200, response.content
    assert response.json()["accepted"] == 2
    response = _post(personas, run, gzip.compress(lines[2].encode()))
    assert response.status_code == 200, response.content
    run.refresh_from_db()
    assert run.status == "completed"


def test_a_broken_or_oversized_gzip_upload_is_refused_and_stores_nothing(personas, monkeypatch):
    run = _trace_run(personas)
    line = json.dumps({"case_key": "c0", "final_output": "answer-0"}).encode()
    response = _post(personas, run, gzip.compress(line)[:-12])
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "parse_error"
    monkeypatch.setattr(trace_import, "MAX_RESULTS_BYTES", 1000)
    bomb = gzip.compress(line + b"\n" * 100_000)
    assert len(bomb) < 1000
    response = _post(personas, run, bomb)
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "payload_too_large"
    assert _nothing_stored(run)
