"""The JUnit export as CI parsers read it: totals that match the testcases (also while
workers record results during the download), the de-facto schema's attributes, evidence
for errors, the run's state as properties; and the page route's downloads."""

from __future__ import annotations

import csv
import io
import json
import threading
import xml.etree.ElementTree as ET
from collections import Counter

import pytest
from django.db import connection, transaction
from django.db.models import F
from django.test import override_settings

from runs.exports import FORMATS, export_stream
from runs.models import RunItem, RunLane
from tests.runs.test_exports_agree import _two_lane_run
from tests.runs.test_exports_hostile import BASE, _upload

pytestmark = pytest.mark.django_db(transaction=True)
KINDS = ("failure", "error", "skipped")


def _kinds(suite):
    return Counter(
        next((child.tag for child in case if child.tag in KINDS), "passed") for case in suite.iter("testcase")
    )


def _assert_totals_match(root):
    """Every suite's and the file's tests/failures/errors/skipped are its testcases'."""
    for node in [root, *root.findall("testsuite")]:
        kinds = _kinds(node)
        assert int(node.get("tests")) == kinds.total(), node.get("name")
        for kind, attr in (("failure", "failures"), ("error", "errors"), ("skipped", "skipped")):
            assert int(node.get(attr)) == kinds[kind], (node.get("name"), attr)
        assert float(node.get("time")) >= 0


def _record_in_another_connection(item_id):
    """What a worker does meanwhile: one item FAILED and its lane's counters, in one
    transaction on a connection of its own."""

    def work():
        try:
            with transaction.atomic():
                item = RunItem.objects.get(pk=item_id)
                RunItem.objects.filter(pk=item_id).update(status="FAILED", state="done", score=0.0)
                RunLane.objects.filter(pk=item.lane_id).update(
                    failed=F("failed") + 1, pending=F("pending") - 1
                )
        finally:
            connection.close()

    thread = threading.Thread(target=work)
    thread.start()
    thread.join(timeout=30)
    assert not thread.is_alive()


def test_junit_totals_match_the_testcases_when_a_result_is_recorded_during_the_download(personas):
    run = _two_lane_run(personas)
    _upload(personas, run, [{"deployment": "ci", "case_key": "c0", "final_output": "answer-0"}])
    pending = RunItem.objects.get(run=run, lane__deployment_name="ci", case_key="c1")
    stream = export_stream(run, "junit")
    head = [next(stream) for _ in range(3)]  # the declaration, <testsuites>, the first suite
    _record_in_another_connection(pending.pk)
    root = ET.fromstring("".join(head + list(stream)))
    _assert_totals_match(root)
    ci = root.find("testsuite")
    assert ci.get("name") == "ci"
    # the snapshot the download started from: c1 still pending there
    assert [c.get("name") for c in ci.iter("testcase") if c.find("skipped") is not None] == ["c1", "c2"]
    # the next download sees the new result
    again = ET.fromstring("".join(export_stream(run, "junit")))
    _assert_totals_match(again)
    assert _kinds(again.find("testsuite")) == {"passed": 1, "failure": 1, "skipped": 1}


@override_settings(PUBLIC_BASE_URL="http://testserver")
def test_junit_has_schema_attributes_run_properties_and_evidence_for_errors(personas):
    run = _two_lane_run(personas, repetitions=2)
    _upload(
        personas,
        run,
        [
            {"deployment": "ci", "case_key": "c0", "repetition": 1, "final_output": "answer-0"},
            {"deployment": "ci", "case_key": "c0", "repetition": 2, "final_output": "nope"},
            {"deployment": "ci", "case_key": "c1", "repetition": 1, "final_output": "answer-1"},
        ],
    )
    run.refresh_from_db()
    errored = RunItem.objects.get(run=run, lane__deployment_name="ci", case_key="c1", repetition=1)
    grade = dict(errored.grade, status="ERROR", reason_code="timeout")
    grade["expectations"] = [
        dict(e, status="ERROR", evidence="validator ran past its 5 s limit on 𝔘nicode ]]> text")
        for e in grade["expectations"]
    ]
    RunItem.objects.filter(pk=errored.pk).update(status="ERROR", reason_code="timeout", grade=grade)
    RunItem.objects.filter(run=run, lane__deployment_name="ci", case_key="c1", repetition=2).update(
        latency_ms=1500
    )

    failed = RunItem.objects.get(run=run, lane__deployment_name="ci", case_key="c0", repetition=2)
    long = dict(failed.grade)
    long["expectations"] = [dict(e, evidence="x" * 3000) for e in long["expectations"]]
    RunItem.objects.filter(pk=failed.pk).update(grade=long)

    root = ET.fromstring("".join(export_stream(run, "junit")))
    _assert_totals_match(root)
    assert (root.get("tests"), root.get("failures"), root.get("errors"), root.get("skipped")) == (
        "12",
        "1",
        "1",
        "9",
    )
    ci, nightly = root.findall("testsuite")
    assert [c.get("name") for c in ci.iter("testcase")] == ["c0", "c0 #2", "c1", "c1 #2", "c2", "c2 #2"]
    assert {c.get("classname") for c in root.iter("testcase")} == {"echo"}
    assert float(ci.get("time")) >= 1.5 and float(nightly.get("time")) == 0.0
    for suite in (ci, nightly):
        props = {p.get("name"): p.get("value") for p in suite.find("properties")}
        assert props == {
            "run_id": str(run.pk),
            "run_status": run.status,
            "scoring_revision": str(run.scoring_revision),
            "url": f"http://testserver/runs/{run.pk}/",
        }
    testcases = {c.get("name"): c for c in ci.iter("testcase")}
    assert [child.tag for child in testcases["c0"]] == []  # a pass: nothing to add
    assert [child.tag for child in testcases["c0 #2"]] == ["failure", "system-out"]
    c1 = RunItem.objects.get(run=run, lane__deployment_name="ci", case_key="c1", repetition=1)
    assert (
        testcases["c1"].find("system-out").text
        == f"case page: http://testserver/runs/{run.pk}/cases/{c1.pk}/"
    )
    # long evidence is cut, and says so
    assert testcases["c0 #2"].find("failure").text.endswith("\n  evidence: " + "x" * 1996 + " […]")
    error = testcases["c1"].find("error")
    assert (error.get("type"), error.get("message")) == ("ERROR", "timeout")
    assert error.text == "answer: ERROR: " + grade["expectations"][0]["text"] + (
        "\n  evidence: validator ran past its 5 s limit on 𝔘nicode ]]> text"
    )


def test_a_run_without_cases_exports_empty_files(personas):
    run = _two_lane_run(personas)
    RunItem.objects.filter(run=run).delete()
    RunLane.objects.filter(run=run).update(pending=0, counters={})
    root = ET.fromstring("".join(export_stream(run, "junit")))
    assert [s.get("tests") for s in root.findall("testsuite")] == ["0", "0"]
    assert root.get("tests") == "0" and not list(root.iter("testcase"))
    assert "".join(export_stream(run, "csv")).splitlines() == [
        "deployment,challenge_key,case_key,repetition,status,score,outcome_class,reason_code,attempts,"
        "latency_ms,input_tokens,output_tokens,cost_usd"
    ]
    assert "".join(export_stream(run, "jsonl")) == "" == "".join(export_stream(run, "grading"))


def test_the_page_downloads_every_format_to_members_only_and_its_csv_opens_in_excel(personas, client):
    run = _two_lane_run(personas)
    _upload(personas, run, [{"deployment": "ci", "case_key": "c0", "final_output": "dé answer-0"}])
    RunLane.objects.filter(run=run, deployment_name="ci").update(deployment_name='dép, "q"')
    client.force_login(personas.outsider)
    for fmt in FORMATS:
        assert client.get(f"/runs/{run.pk}/export/{fmt}/").status_code == 404, fmt
    client.force_login(personas.viewer)
    assert client.get(f"/runs/{run.pk}/export/xlsx/").status_code == 404
    types = {"csv": "text/csv; charset=utf-8", "jsonl": "application/x-ndjson", "junit": "application/xml"}
    names = {"csv": "csv", "jsonl": "jsonl", "junit": "xml", "grading": "grading.jsonl"}
    api = personas.api(personas.viewer)
    for fmt in FORMATS:
        page = client.get(f"/runs/{run.pk}/export/{fmt}/")
        by_api = api.get(f"{BASE}/{run.pk}/export?format={fmt}")
        for response in (page, by_api):
            assert response.status_code == 200 and response.streaming, fmt
            assert response["Content-Type"] == types.get(fmt, "application/x-ndjson")
            assert response["Content-Disposition"] == f'attachment; filename="run-{run.pk}.{names[fmt]}"'
        body, api_body = b"".join(page.streaming_content), b"".join(by_api.streaming_content)
        if fmt == "csv":
            # Excel reads a CSV without a byte order mark in the legacy code page
            assert body == b"\xef\xbb\xbf" + api_body and not api_body.startswith(b"\xef\xbb\xbf")
            rows = list(csv.reader(io.StringIO(body.decode("utf-8-sig"), newline="")))
            assert rows[1][:3] == ['dép, "q"', "echo", "c0"] and len(rows) == 7
        else:
            assert body == api_body
    lines = b"".join(api.get(f"{BASE}/{run.pk}/export?format=jsonl").streaming_content).decode().splitlines()
    assert [json.loads(line)["status"] for line in lines] == ["PASSED", "pending", "pending"] + [
        "pending"
    ] * 3


@pytest.mark.parametrize("status", ["completed", "running"])
def test_a_seeded_runs_junit_totals_match_its_testcases_and_run_status(personas, status):
    from runs.seeding import seed_run

    done = 1.0 if status == "completed" else 0.5
    run = seed_run(
        workspace=personas.workspace,
        items=120,
        lanes=3,
        infra_error_rate=0.2,
        status=status,
        done_fraction=done,
    )
    root = ET.fromstring("".join(export_stream(run, "junit")))
    _assert_totals_match(root)
    assert int(root.get("tests")) == RunItem.objects.filter(run=run).count() == 120
    kinds = _kinds(root)
    assert kinds["error"] and kinds["failure"] and kinds["passed"]
    assert bool(kinds["skipped"]) == (status == "running")
    statuses = {p.get("value") for p in root.iter("property") if p.get("name") == "run_status"}
    assert statuses == {status}
