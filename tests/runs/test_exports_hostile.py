"""Run exports with hostile content: control characters, CDATA ends, CSV metacharacters,
line separators, very long evidence, non-ASCII names."""

from __future__ import annotations

import csv
import io
import json
import xml.etree.ElementTree as ET

import pytest

from runs.models import Attempt, RunItem, RunLane
from runs.services.deployments import deployment_create
from tests.runs.runfactory import create_run, publish

pytestmark = pytest.mark.django_db(transaction=True)
BASE = "/api/v1/workspaces/acme/runs"

# Everything XML 1.0 refuses that PostgreSQL stores (NUL and lone surrogates are U+FFFD
# before they reach a column: runs.storable), with the characters CSV, JSONL and CDATA
# readers trip on.
CONTROLS = "".join(chr(c) for c in range(1, 32) if c not in (9, 10, 13)) + "\ufffe\uffff"
HOSTILE = f'ünï "q", ]]> <&> \r\n\r\u2028\u2029 {CONTROLS} tab\t日本'


def _upload(personas, run, lines):
    body = "\n".join(json.dumps(line) for line in lines)
    response = personas.api(personas.editor).generic(
        "POST", f"{BASE}/{run.pk}/results", body, content_type="application/x-ndjson"
    )
    assert response.status_code == 200, response.content


def _get(personas, run, fmt, user=None):
    response = personas.api(user or personas.viewer).get(f"{BASE}/{run.pk}/export?format={fmt}")
    assert response.status_code == 200 and response.streaming
    return b"".join(response.streaming_content)


def _xml_safe(text):
    return "".join("\ufffd" if c in CONTROLS else c for c in text)


def _hostile_run(personas):
    version = publish(personas.workspace, cases=3)
    dep = deployment_create(workspace=personas.workspace, name="ci", kind="trace_import").deployment
    run = create_run(personas.workspace, version, [dep])
    _upload(
        personas,
        run,
        [
            {"case_key": "c0", "final_output": "answer-0"},
            {"case_key": "c1", "final_output": "\x00\x1b[31m" + HOSTILE + "x" * 200_000},
        ],
    )
    items = {i.case_key: i for i in RunItem.objects.filter(run=run)}
    failed = items["c1"]
    grade = dict(failed.grade)
    grade["expectations"] = [
        dict(e, key=e["key"] + HOSTILE, evidence={"seen": HOSTILE, HOSTILE: [HOSTILE]}, text=HOSTILE)
        for e in grade["expectations"]
    ]
    RunItem.objects.filter(pk=failed.pk).update(
        grade=grade, case_key="c1" + HOSTILE, challenge_key="échо" + HOSTILE, reason_code="r" + HOSTILE
    )
    RunLane.objects.filter(run=run).update(deployment_name="dép" + HOSTILE)
    # c2 has no grade: an infra error whose last attempt's message is hostile.
    c2 = items["c2"]
    RunItem.objects.filter(pk=c2.pk).update(state="done", last_category="infra_error", attempt_count=1)
    Attempt.objects.create(item=c2, number=1, category="infra_error", error_code="e" + HOSTILE, error=HOSTILE)
    return run


def test_every_export_keeps_hostile_content_and_the_junit_file_stays_well_formed(personas):
    run = _hostile_run(personas)
    deployment = "dép" + HOSTILE

    rows = [json.loads(line) for line in _get(personas, run, "jsonl").decode().split("\n") if line]
    assert [(r["deployment"], r["case_key"], r["status"]) for r in rows] == [
        (deployment, "c0", "PASSED"),
        (deployment, "c1" + HOSTILE, "FAILED"),
        (deployment, "c2", "infra_error"),
    ]
    assert rows[1]["challenge_key"] == "échо" + HOSTILE and rows[1]["reason_code"] == "r" + HOSTILE
    # splitlines() splits at U+2028/2029 too: a reader using it still sees three records
    assert len(_get(personas, run, "jsonl").decode().splitlines()) == 3

    text = _get(personas, run, "csv").decode()
    table = list(csv.reader(io.StringIO(text, newline="")))
    assert [row[:3] for row in table[1:]] == [
        [deployment, "echo", "c0"],
        [deployment, "échо" + HOSTILE, "c1" + HOSTILE],
        [deployment, "echo", "c2"],
    ]

    grading = [json.loads(line) for line in _get(personas, run, "grading").decode().split("\n") if line]
    assert [g["status"] for g in grading] == ["PASSED", "FAILED"]
    assert grading[1]["expectations"][0]["evidence"]["seen"] == HOSTILE
    assert len(_get(personas, run, "grading").decode().splitlines()) == 2

    junit = ET.fromstring(_get(personas, run, "junit"))  # raises when not well-formed
    suite = junit.find("testsuite")
    assert suite.get("name") == _xml_safe(deployment)
    passed, failed, errored = suite.findall("testcase")
    assert (failed.get("classname"), failed.get("name")) == (
        _xml_safe("échо" + HOSTILE),
        _xml_safe("c1" + HOSTILE),
    )
    failure = failed.find("failure")
    assert failure.get("message") == "failed: " + _xml_safe("answer" + HOSTILE)
    # the element text keeps every character but the ones XML cannot hold, CR included
    assert failure.text.startswith(_xml_safe("answer" + HOSTILE + ": FAILED: " + HOSTILE + "\n"))
    assert len(failure.text) < 5000  # long evidence is cut
    error = errored.find("error")
    assert error.get("type") == "infra_error"
    assert error.text == _xml_safe(f"e{HOSTILE}: {HOSTILE}\n1 attempt")
