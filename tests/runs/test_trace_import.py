"""Trace import: JSONL and OTLP JSON results; an upload with a bad line stores nothing and lists
every bad line, a good one is graded and stored whole."""

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


def test_an_upload_with_a_bad_line_stores_nothing_and_lists_every_bad_line(personas):
    run = _trace_run(personas)
    lane = RunLane.objects.get(run=run)
    assert dispatch_lane(lane.pk).claimed == 0  # trace lanes wait for results
    good = [
        json.dumps({"case_key": "c0", "final_output": "answer-0"}),
        json.dumps({"case_key": "c1", "deployment": "ci", "final_output": "wrong"}),
    ]
    data = "\n".join(
        [
            good[0],
            "{not json",
            json.dumps({"case_key": "nope", "final_output": "x"}),
            good[1],
            json.dumps({"case_key": "c0", "final_output": "again"}),
            json.dumps({"case_key": "c2", "deployment": "other", "final_output": "x"}),
            json.dumps({"case_key": "c2", "repetition": 2, "final_output": "x"}),
        ]
    ).encode()
    outcome = run_import_results(run=run, data=data)
    assert outcome.accepted == 0
    assert [b["line"] for b in outcome.bad_lines] == [2, 3, 5, 6, 7]
    body = outcome.error_body()["error"]
    assert body["code"] == "invalid_results"
    assert body["message"].startswith("5 bad result lines; nothing was stored")
    assert "not in the input set" in outcome.bad_lines[1]["message"]
    assert "duplicate" in outcome.bad_lines[2]["message"]
    assert outcome.bad_lines[3]["field"] == "deployment"
    assert outcome.bad_lines[4]["field"] == "repetition"
    run.refresh_from_db()
    lane.refresh_from_db()
    assert (run.status, lane.status, lane.pending, run.items_open) == ("queued", "queued", 3, 3)
    assert not RunItem.objects.filter(run=run).exclude(state="pending").exists()
    # the corrected file goes in whole
    fixed = run_import_results(run=run, data="\n".join(good).encode())
    assert (fixed.accepted, fixed.bad_lines) == (2, [])
    run.refresh_from_db()
    assert run.status == "running"
    assert dict(RunItem.objects.filter(run=run).exclude(status="").values_list("case_key", "status")) == {
        "c0": "PASSED",
        "c1": "FAILED",
    }
    # a line for a case that has its result refuses the upload it is in, good lines included
    again = run_import_results(
        run=run,
        data=(json.dumps({"case_key": "c2", "final_output": "answer-2"}) + "\n" + good[0]).encode(),
    )
    assert again.accepted == 0 and [b["line"] for b in again.bad_lines] == [2]
    assert "already has a result" in again.bad_lines[0]["message"]
    assert RunItem.objects.get(run=run, case_key="c2").state == "pending"
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
    assert outcome.accepted == 0
    assert [b["line"] for b in outcome.bad_lines] == [2]
    assert outcome.bad_lines[0]["message"].startswith("trace t2: no final output")
    assert not RunItem.objects.filter(run=run).exclude(status="").exists()
    spans = document["resourceSpans"][0]["scopeSpans"][0]["spans"]
    spans.pop()  # without the trace that has no answer
    outcome = run_import_results(run=run, data=json.dumps(document).encode())
    assert (outcome.accepted, outcome.bad_lines) == (1, [])
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


def test_an_uploaded_result_is_the_items_one_attempt(personas):
    """A trace-imported case said ``attempts: 0`` beside the grade's ``case.attempt`` 1, and the
    latency its line reported was not the item's: the upload is now its one ok attempt."""
    from runs.models import Attempt

    run = _trace_run(personas, cases=1)
    line = {"case_key": "c0", "final_output": "answer-0", "metrics": {"latency_ms": 1234.5}}
    assert run_import_results(run=run, data=json.dumps(line).encode()).accepted == 1
    item = RunItem.objects.get(run=run)
    assert (item.attempt_count, item.last_category, item.latency_ms) == (1, "ok", 1234.5)
    attempt = Attempt.objects.get(item=item)
    assert (attempt.number, attempt.category, attempt.latency_ms) == (1, "ok", 1234.5)
    assert item.grade["case"]["attempt"] == 1


def test_every_bad_uploaded_line_names_its_field(personas):
    """The reader's bad lines (case, final_output, protocol shape) came back without the
    ``field`` the API documents; only the import's own checks (deployment, repetition) had it."""
    run = _trace_run(personas)
    data = "\n".join(
        [
            json.dumps({"case_key": "c0", "final_output": "answer-0"}),
            json.dumps({"case_key": "nope", "final_output": "x"}),
            json.dumps({"case_key": "c1"}),
            json.dumps({"case_key": "c0", "final_output": "again"}),
            json.dumps({"case_key": "c2", "final_output": "x", "tool_calls": "nope"}),
            json.dumps({"case_key": "c2", "deployment": "other", "final_output": "x"}),
            "[1]",
        ]
    ).encode()
    outcome = run_import_results(run=run, data=data)
    assert [(b["line"], b.get("field")) for b in outcome.bad_lines] == [
        (2, "case_key"),
        (3, "final_output"),
        (4, "case_key"),
        (5, "tool_calls"),
        (6, "deployment"),
        (7, None),
    ]
    assert run_import_results(run=run, data=data.split(b"\n")[0]).accepted == 1
    again = run_import_results(run=run, data=data.split(b"\n")[0])
    assert [(b["line"], b.get("field")) for b in again.bad_lines] == [(1, "case_key")]


@pytest.mark.django_db(transaction=True)
def test_two_concurrent_uploads_of_overlapping_lines_grade_each_case_once(personas, monkeypatch):
    """Both uploads pass their checks and grade their lines before either writes (a barrier
    after the grading); the lane lock and the pending-only UPDATE let one in, the other is
    refused whole with the shared line, and no case is graded or counted twice."""
    import threading

    from django.db import connection

    from runs.models import Run
    from runs.services import trace_import

    run = _trace_run(personas)
    barrier = threading.Barrier(2, timeout=60)
    grade = trace_import._grade

    def grade_then_wait(router, source, spool):
        grade(router, source, spool)
        barrier.wait()

    monkeypatch.setattr(trace_import, "_grade", grade_then_wait)
    uploads = {
        "a": [{"case_key": "c0", "final_output": "answer-0"}, {"case_key": "c1", "final_output": "answer-1"}],
        "b": [{"case_key": "c2", "final_output": "answer-2"}, {"case_key": "c1", "final_output": "wrong"}],
    }
    outcomes = {}

    def upload(name):
        try:
            data = "\n".join(json.dumps(line) for line in uploads[name]).encode()
            outcomes[name] = run_import_results(run=Run.objects.get(pk=run.pk), data=data)
        finally:
            connection.close()

    threads = [threading.Thread(target=upload, args=(name,)) for name in uploads]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    accepted = sorted(name for name, o in outcomes.items() if o.accepted)
    assert len(accepted) == 1 and len(outcomes) == 2
    loser = outcomes["b" if accepted == ["a"] else "a"]
    assert loser.accepted == 0
    assert [(b["line"], b["message"]) for b in loser.bad_lines] == [
        (2, trace_import.ALREADY_DONE)  # c1 is the second line of either upload
    ]
    lane = RunLane.objects.get(run=run)
    run.refresh_from_db()
    graded = RunItem.objects.filter(run=run).exclude(status="")
    assert graded.count() == 2
    assert (lane.pending, run.items_open, lane.passed + lane.failed) == (1, 1, 2)
    assert sorted(graded.values_list("attempt_count", flat=True)) == [1, 1]


def test_an_upload_indexes_the_cases_once_not_once_per_line(personas, monkeypatch):
    """Each line was read by a fresh ``read_results`` over every case of the set, so an upload
    of N lines to an N-case run cost N² (3,000 lines: 35 s of the 57 s upload in the reader)."""
    from grading.engine import reader

    run = _trace_run(personas, cases=40)
    folded = []
    real = reader._folded
    monkeypatch.setattr(reader, "_folded", lambda key: folded.append(key) or real(key))
    data = "\n".join(json.dumps({"case_key": f"c{i}", "final_output": f"answer-{i}"}) for i in range(30))
    assert run_import_results(run=run, data=data.encode()).accepted == 30
    assert len(folded) <= 40  # each case's key once, for the index


def test_an_upload_reads_the_cases_it_grades_in_batches_not_one_query_each(personas):
    """Grading an uploaded line fetched its case alone (3,000 lines: 3,000 queries, 15 s of
    a 57 s upload); the dispatcher loads a claimed batch's cases in one query, and so does
    the upload now, per batch of lines."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    run = _trace_run(personas, cases=30)
    data = "\n".join(json.dumps({"case_key": f"c{i}", "final_output": f"answer-{i}"}) for i in range(30))
    with CaptureQueriesContext(connection) as queries:
        assert run_import_results(run=run, data=data.encode()).accepted == 30
    case_reads = [q["sql"] for q in queries.captured_queries if 'FROM "packs_case"' in q["sql"]]
    assert len(case_reads) <= 3, len(case_reads)


def test_an_otlp_document_with_a_bom_is_read_as_otlp(personas):
    """A UTF-8 BOM (PowerShell's Out-File, some exporters) before an OTLP JSON document made
    it read as one JSONL line: "case_key is required; final_output is required"."""
    run = _trace_run(personas, cases=1)
    span = {
        "traceId": "t1",
        "spanId": "root",
        "name": "invoke_agent",
        "attributes": [_attr("agentclash.case_key", "c0"), _attr("agentclash.final_output", "answer-0")],
    }
    document = json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}, indent=2)
    outcome = run_import_results(run=run, data=b"\xef\xbb\xbf" + document.replace("\n", "\r\n").encode())
    assert (outcome.accepted, outcome.bad_lines) == (1, [])


def test_an_upload_to_a_cancelled_run_is_refused_and_changes_nothing(personas):
    from runs.services.operations import run_cancel
    from runs.services.runs import RunError

    run = _trace_run(personas, cases=1)
    run_cancel(run=run)
    run.refresh_from_db()
    with pytest.raises(RunError) as caught:
        run_import_results(run=run, data=json.dumps({"case_key": "c0", "final_output": "answer-0"}).encode())
    assert (caught.value.code, caught.value.status_code) == ("run_not_accepting_results", 409)
    assert not RunItem.objects.filter(run=run).exclude(status="").exists()


def test_an_upload_holds_one_batch_of_lines_and_grades_at_a_time(personas, monkeypatch):
    """The graded results of the whole upload were held until its one transaction (about
    18 kB a line: 50,000 lines took 1.6 GB). Now at most one batch of lines (their reads and
    grades) is alive while a line is graded, and the batches are written one by one in the
    one transaction: the memory does not grow with the upload."""
    import gc

    from grading.engine.reader import Execution
    from runs import recording
    from runs.recording import ItemResult
    from runs.services import trace_import

    monkeypatch.setattr(trace_import, "GRADE_BATCH", 4)
    run = _trace_run(personas, cases=12)
    alive: list[tuple[int, int]] = []
    graded = trace_import._graded_upload

    def counting(ctx, key, execution):
        gc.collect()
        objects = gc.get_objects()
        alive.append(
            # type(), not isinstance(): isinstance of a dead weak proxy among the objects
            # raises ReferenceError (it asks the proxy for its __class__)
            (sum(type(o) is ItemResult for o in objects), sum(type(o) is Execution for o in objects))
        )
        return graded(ctx, key, execution)

    monkeypatch.setattr(trace_import, "_graded_upload", counting)
    written: list[int] = []
    record = recording.record_results

    def recording_batches(lane_id, results, **kwargs):
        written.append(len(results))
        return record(lane_id, results, **kwargs)

    monkeypatch.setattr(recording, "record_results", recording_batches)
    data = "\n".join(json.dumps({"case_key": f"c{i}", "final_output": f"answer-{i}"}) for i in range(12))
    assert run_import_results(run=run, data=data.encode()).accepted == 12
    assert len(alive) == 12
    assert max(results for results, _ in alive) < 4 and max(reads for _, reads in alive) <= 4, alive
    assert written == [4, 4, 4]
    assert RunItem.objects.filter(run=run, state="pending").count() == 0
