"""Trace import as a user meets it: OTLP JSON Lines (one ExportTraceServiceRequest per line, as
the OpenTelemetry Collector's file exporter writes them), error messages that say what to set
for an OTLP trace, and a line sent again that says what to do."""

from __future__ import annotations

import gzip
import json

import pytest

from runs.models import RunItem
from runs.services import trace_import
from runs.services.deployments import deployment_create
from runs.services.runs import RunError
from runs.services.trace_import import run_import_results
from tests.runs.runfactory import create_run, publish

pytestmark = pytest.mark.django_db


def _trace_run(personas, cases=3):
    version = publish(personas.workspace, cases=cases)
    dep = deployment_create(workspace=personas.workspace, name="ci", kind="trace_import").deployment
    return create_run(personas.workspace, version, [dep])


def _attr(key, value):
    kind = "intValue" if isinstance(value, int) else "stringValue"
    return {"key": key, "value": {kind: value}}


def _span(trace, span, parent="", name="invoke_agent", attrs=(), start="1"):
    return {
        "traceId": trace,
        "spanId": span,
        "parentSpanId": parent,
        "name": name,
        "startTimeUnixNano": start,
        "attributes": list(attrs),
    }


def _request(*spans, resource=()):
    """One ExportTraceServiceRequest, on one line."""
    return json.dumps(
        {
            "resourceSpans": [
                {"resource": {"attributes": list(resource)}, "scopeSpans": [{"spans": list(spans)}]}
            ]
        }
    )


T1, T2 = "a" * 32, "b" * 32


def test_otlp_json_lines_are_read_as_one_otlp_document(personas):
    """The collector's file exporter writes a request per line, a trace's spans spread over
    lines as they were batched: each line was read as a response line ('case_key is required;
    final_output is required' for every one)."""
    run = _trace_run(personas, cases=2)
    tool = _span(
        T1,
        "s2",
        parent="s1",
        name="execute_tool lookup",
        attrs=[_attr("gen_ai.operation.name", "execute_tool"), _attr("gen_ai.tool.name", "lookup")],
        start="2",
    )
    data = (
        "\n".join(
            [
                _request(
                    _span(T1, "s1", attrs=[_attr("agentclash.final_output", "answer-0")]),
                    resource=[_attr("agentclash.case_key", "c0")],
                ),
                "",
                _request(tool, resource=[_attr("agentclash.case_key", "c0")]),
                _request(
                    _span(
                        T2,
                        "s3",
                        attrs=[_attr("agentclash.case_key", "c1"), _attr("agentclash.final_output", "x")],
                    )
                ),
            ]
        ).encode()
        + b"\r\n"
    )
    outcome = run_import_results(run=run, data=data)
    assert (outcome.accepted, outcome.bad_lines) == (2, [])
    items = {i.case_key: i for i in RunItem.objects.filter(run=run)}
    assert [c["name"] for c in items["c0"].evidence["response"]["tool_calls"]] == ["lookup"]
    assert (items["c0"].status, items["c1"].status) == ("PASSED", "FAILED")


def test_otlp_json_lines_with_a_line_that_is_not_otlp_is_refused_naming_the_line(personas):
    run = _trace_run(personas, cases=2)
    good = _request(
        _span(T1, "s1", attrs=[_attr("agentclash.case_key", "c0"), _attr("agentclash.final_output", "a")])
    )
    for bad, problem in (
        ('{"resourceSpans": [', "not JSON"),
        (json.dumps({"case_key": "c1", "final_output": "x"}), "not an OTLP JSON document"),
        (json.dumps({"resourceSpans": {"x": 1}}), "resourceSpans must be a list"),
    ):
        with pytest.raises(RunError) as caught:
            run_import_results(run=run, data=f"{good}\n{bad}\n".encode())
        assert caught.value.code == "parse_error"
        assert caught.value.message.startswith("line 2: "), caught.value.message
        assert problem in caught.value.message, caught.value.message
    assert not RunItem.objects.filter(run=run).exclude(state="pending").exists()


def test_an_otlp_trace_without_its_routing_attribute_is_told_which_attribute_to_set(personas):
    """'trace ...: case_key is required' named a JSONL field an OTLP exporter has no way to
    set: the message says which attribute, and where."""
    run = _trace_run(personas, cases=2)
    data = _request(
        _span(T1, "s1", attrs=[_attr("agentclash.final_output", "a")]),
        _span(
            T2,
            "s2",
            attrs=[
                _attr("agentclash.case_key", "c0"),
                _attr("agentclash.repetition", "1"),
                _attr("agentclash.final_output", "a"),
            ],
        ),
    ).encode()
    outcome = run_import_results(run=run, data=data)
    assert [(b["line"], b["field"]) for b in outcome.bad_lines] == [(1, "case_key"), (2, "repetition")]
    for bad, attribute in zip(
        outcome.bad_lines, ("agentclash.case_key", "agentclash.repetition"), strict=True
    ):
        assert f"set the {attribute} attribute on the resource or the root span" in bad["message"], bad


def test_a_line_whose_case_already_has_a_result_says_to_leave_it_out(personas):
    """A file sent again (a retry after a timeout) answered every line 'already has a result'
    under 'fix every listed line': the line says what the fix is."""
    run = _trace_run(personas, cases=2)
    line = json.dumps({"case_key": "c0", "final_output": "answer-0"}).encode()
    assert run_import_results(run=run, data=line).accepted == 1
    again = run_import_results(
        run=run, data=line + b"\n" + json.dumps({"case_key": "c1", "final_output": "x"}).encode()
    )
    assert again.accepted == 0 and [b["line"] for b in again.bad_lines] == [1]
    assert "already has a result" in again.bad_lines[0]["message"]
    assert "leave this line out" in again.bad_lines[0]["message"], again.bad_lines


def test_an_otlp_trace_for_an_unknown_case_is_not_told_to_set_the_attribute(personas):
    run = _trace_run(personas, cases=2)
    data = _request(
        _span(T1, "s1", attrs=[_attr("agentclash.case_key", "zz"), _attr("agentclash.final_output", "a")])
    )
    (bad,) = run_import_results(run=run, data=data.encode()).bad_lines
    assert bad["message"] == f"trace {T1}: case 'zz' is not in the input set"


BASE = "/api/v1/workspaces/acme/runs"


def _post(personas, run, body, **headers):
    api = personas.api(personas.editor)
    api.raise_request_exception = False
    return api.generic(
        "POST", f"{BASE}/{run.pk}/results", body, content_type="application/x-ndjson", **headers
    )


def test_an_upload_over_the_limit_is_told_the_limit_and_what_to_do(personas, monkeypatch):
    """The 413 said 'results are limited to 64 MB per upload' and no more: the fix is to split
    the file, every part being all or nothing on its own."""
    from runs.api import runs as run_api

    run = _trace_run(personas)
    body = "\n".join(json.dumps({"case_key": f"c{i}", "final_output": f"answer-{i}"}) for i in range(3))
    for where in (run_api, trace_import):
        monkeypatch.setattr(where, "MAX_RESULTS_BYTES", len(body) - 1)
        response = _post(personas, run, body)
        assert response.status_code == 413
        message = response.json()["error"]["message"]
        assert message.startswith("results are limited to 64 MB per upload"), message
        assert "split the file into several uploads" in message, message
        monkeypatch.undo()
    assert not RunItem.objects.filter(run=run).exclude(state="pending").exists()


@pytest.mark.parametrize("encoding", ["br", "deflate", "zstd", "gzip, br"])
def test_a_body_in_an_encoding_not_read_is_a_415_naming_the_encodings_read(personas, encoding):
    """A body compressed otherwise than gzip was read as text: every line a bad line 'not
    UTF-8 text' (or 'not JSON'), the header that says why never named."""
    run = _trace_run(personas)
    response = _post(personas, run, b"\x28\xb5\x2f\xfd compressed", HTTP_CONTENT_ENCODING=encoding)
    assert response.status_code == 415, response.content
    error = response.json()["error"]
    assert error["code"] == "unsupported_content_encoding"
    assert error["field"] == "Content-Encoding"
    assert f"Content-Encoding {encoding!r} is not read: send the body as it is, or gzip" in error["message"]


@pytest.mark.parametrize("encoding", ["gzip", "x-gzip", "identity", "GZIP", ""])
def test_the_encodings_read_are_accepted(personas, encoding):
    run = _trace_run(personas, cases=1)
    line = json.dumps({"case_key": "c0", "final_output": "answer-0"}).encode()
    body = gzip.compress(line) if "gzip" in encoding.lower() else line
    response = _post(personas, run, body, HTTP_CONTENT_ENCODING=encoding)
    assert response.status_code == 200, response.content
    assert response.json()["accepted"] == 1


def test_a_form_upload_is_a_415_saying_how_to_send_the_file(personas):
    """``curl -F file=@results.jsonl`` sent a multipart form, read as JSONL: its boundary and
    part headers were bad lines 'not JSON', the responses shifted to other line numbers."""
    from django.core.files.uploadedfile import SimpleUploadedFile

    run = _trace_run(personas, cases=1)
    line = json.dumps({"case_key": "c0", "final_output": "answer-0"}).encode()
    api = personas.api(personas.editor)
    api.raise_request_exception = False
    response = api.post(
        f"{BASE}/{run.pk}/results",
        {"file": SimpleUploadedFile("results.jsonl", line)},
        format="multipart",
    )
    assert response.status_code == 415, response.content
    error = response.json()["error"]
    assert (error["code"], error["field"]) == ("unsupported_media_type", "Content-Type")
    assert "send the file itself as the body (curl --data-binary @results.jsonl)" in error["message"]
    assert not RunItem.objects.filter(run=run).exclude(state="pending").exists()


def test_lines_run_together_say_how_they_lost_their_newlines(personas):
    """``curl -d @results.jsonl`` drops the file's newlines: the one line left was 'not JSON:
    Extra data: line 1 column 47', with no word of why."""
    run = _trace_run(personas, cases=2)
    lines = [json.dumps({"case_key": f"c{i}", "final_output": f"answer-{i}"}) for i in range(2)]
    (bad,) = run_import_results(run=run, data="".join(lines).encode()).bad_lines
    assert bad["line"] == 1 and bad["message"].startswith("not JSON: Extra data"), bad
    assert "put each response on a line of its own" in bad["message"]
    assert "curl -d drops a file's newlines: send it with --data-binary" in bad["message"]
    assert run_import_results(run=run, data="\n".join(lines).encode()).accepted == 2


def test_an_otlp_traces_duration_and_inference_usage_reach_the_case(personas):
    from tests.runs.test_trace_import_otlp_genai import _chat, _document, _span

    run = _trace_run(personas, cases=1)
    document = _document(
        _span("r", start=1_000_000_000, end=3_500_000_000), _chat("b", 2, "answer-0", 150, 30)
    )
    assert run_import_results(run=run, data=json.dumps(document).encode()).accepted == 1
    item = RunItem.objects.get(run=run)
    assert (item.status, item.latency_ms, item.input_tokens, item.output_tokens) == (
        "PASSED",
        2500.0,
        150,
        30,
    )


def test_an_upload_of_many_bad_lines_lists_the_first_thousand_and_counts_them_all(personas):
    """Every bad line was kept and listed: 1,000,000 lines of 'x' (a 2 MB body) held ~330 MB and
    answered an 84 MB error; 64 MB of them would take the worker down. The first 1,000 (by
    line) are listed, the message counts them all."""
    run = _trace_run(personas, cases=3)
    good = json.dumps({"case_key": "c0", "final_output": "answer-0"}).encode()
    data = b"x\n" * 1500 + good + b"\n" + b"[]\n" * 1500
    outcome = run_import_results(run=run, data=data)
    assert outcome.accepted == 0
    assert len(outcome.bad_lines) == 1000
    assert [b["line"] for b in outcome.bad_lines] == list(range(1, 1001))
    body = outcome.error_body()["error"]
    assert body["message"].startswith("3000 bad result lines (the first 1000 listed); nothing was stored")
    assert len(body["lines"]) == 1000
    assert not RunItem.objects.filter(run=run).exclude(state="pending").exists()


def test_the_listed_bad_lines_are_the_first_by_line_whatever_order_they_are_found_in(personas, monkeypatch):
    """A line found bad at its batch's end (its case already has a result) comes after bad
    lines read later in the batch: the kept ones are still the lowest numbers."""
    monkeypatch.setattr(trace_import, "MAX_LISTED", 3)
    run = _trace_run(personas, cases=3)
    assert run_import_results(
        run=run, data=json.dumps({"case_key": "c0", "final_output": "a"}).encode()
    ).accepted
    data = json.dumps({"case_key": "c0", "final_output": "again"}).encode() + b"\nx\n[]\n{\n"
    outcome = run_import_results(run=run, data=data)
    assert [b["line"] for b in outcome.bad_lines] == [1, 2, 3]
    assert outcome.error_body()["error"]["message"].startswith("4 bad result lines (the first 3 listed)")


def test_a_broken_pretty_printed_otlp_document_is_one_error_saying_where(personas):
    """An indented OTLP document cut short (or with a stray comma) was read as JSONL: each of
    its lines a bad line 'not JSON', the one place at fault never named."""
    run = _trace_run(personas, cases=1)
    document = json.loads(_request(_span(T1, "s1", attrs=[_attr("agentclash.case_key", "c0")])))
    text = json.dumps(document, indent=2)
    for broken in (text[: len(text) // 2], text.replace('"spanId"', ', "spanId"', 1)):
        with pytest.raises(RunError) as caught:
            run_import_results(run=run, data=broken.encode())
        assert caught.value.code == "parse_error"
        assert caught.value.message.startswith(
            "the body is an OTLP JSON document (it has resourceSpans) but not JSON:"
        )
        assert " line " in caught.value.message and " column " in caught.value.message
    assert not RunItem.objects.filter(run=run).exclude(state="pending").exists()


def test_a_jsonl_line_that_mentions_resource_spans_is_still_read_as_jsonl(personas):
    run = _trace_run(personas, cases=2)
    data = (
        b'{"case_key": "c0",\n'
        + json.dumps({"case_key": "c1", "final_output": 'a {"resourceSpans": []}'}).encode()
    )
    outcome = run_import_results(run=run, data=data)
    assert [b["line"] for b in outcome.bad_lines] == [1]
    assert outcome.bad_lines[0]["message"].startswith("not JSON")


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-16-be", "utf-32"])
def test_a_utf16_file_is_one_error_saying_to_send_utf8(personas, encoding):
    """Windows PowerShell's ``>`` writes UTF-16: every line of such a file was a bad line 'not
    UTF-8 text' (or 'not JSON'), nothing said what the file's encoding was."""
    run = _trace_run(personas, cases=2)
    lines = [json.dumps({"case_key": f"c{i}", "final_output": f"answer-{i}"}) for i in range(2)]
    text = "\n".join(lines)
    data = text.encode(encoding)
    if not encoding.endswith(("le", "be")):
        assert data[:2] in (b"\xff\xfe", b"\xfe\xff")
    else:
        data = ("\ufeff" + text).encode(encoding)
    with pytest.raises(RunError) as caught:
        run_import_results(run=run, data=data)
    assert caught.value.code == "parse_error"
    assert caught.value.message.startswith("the body is UTF-"), caught.value.message
    assert "send it as UTF-8" in caught.value.message
    assert run_import_results(run=run, data=text.encode()).accepted == 2


def test_an_upload_the_run_was_cancelled_under_is_told_so_not_to_leave_its_lines_out(personas, monkeypatch):
    """A cancel landing while the upload grades ends every pending item: the upload was
    refused with each line 'already has a result ...: leave this line out', as if the file
    were at fault; it is the run's 409, as for an upload after the cancel."""
    from runs.services.operations import run_cancel

    run = _trace_run(personas, cases=2)
    grade = trace_import.grade_outcomes
    cancelled = []

    def grade_while_the_run_is_cancelled(*args, **kwargs):
        if not cancelled:
            cancelled.append(run_cancel(run=run))
        return grade(*args, **kwargs)

    monkeypatch.setattr(trace_import, "grade_outcomes", grade_while_the_run_is_cancelled)
    data = "\n".join(json.dumps({"case_key": f"c{i}", "final_output": f"answer-{i}"}) for i in range(2))
    with pytest.raises(RunError) as caught:
        run_import_results(run=run, data=data.encode())
    assert (caught.value.code, caught.value.status_code) == ("run_not_accepting_results", 409)
    assert caught.value.message == "a cancelled run does not accept results"
    assert not RunItem.objects.filter(run=run, state="done").exists()
