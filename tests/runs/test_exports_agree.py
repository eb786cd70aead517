"""The four exports of a run (``run export``) agree with each other and with ``run status
--cases``: failed, rescored, cancelled runs, repetitions and two lanes."""

from __future__ import annotations

import csv
import io
import json
import xml.etree.ElementTree as ET
from collections import Counter

import pytest
from django.core.management import call_command

from runs.models import GradeRevision, Run, RunItem, RunLane
from runs.services.deployments import deployment_create
from tests.runs.runfactory import create_run, publish
from tests.runs.test_exports_hostile import _upload

pytestmark = pytest.mark.django_db(transaction=True)
KEY = ("deployment", "challenge_key", "case_key", "repetition", "status")
SKIPPED = ("NOT_EVALUATED", "UNAVAILABLE", "cancelled", "pending")


def _cli(*args):
    out = io.StringIO()
    call_command(*args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def _agree(run):
    """Every export against ``run status --cases``; returns the status document."""
    run_id = str(run.pk)
    doc = json.loads(_cli("run", "status", run_id, "--cases", "--json"))
    expected = [tuple(c[k] for k in KEY) for c in doc["cases"]]
    jsonl = [
        json.loads(line) for line in _cli("run", "export", run_id, "--format", "jsonl").split("\n") if line
    ]
    assert [tuple(r[k] for k in KEY) for r in jsonl] == expected
    assert [(r["score"], r["attempts"]) for r in jsonl] == [(c["score"], c["attempts"]) for c in doc["cases"]]
    table = list(csv.DictReader(io.StringIO(_cli("run", "export", run_id, "--format", "csv"), newline="")))
    assert [tuple(int(r[k]) if k == "repetition" else r[k] for k in KEY) for r in table] == expected
    graded = [
        c
        for c in doc["cases"]
        if c["status"] in ("PASSED", "FAILED", "NOT_EVALUATED", "UNAVAILABLE", "ERROR")
    ]
    grading = [
        json.loads(line) for line in _cli("run", "export", run_id, "--format", "grading").split("\n") if line
    ]
    assert [g["status"] for g in grading] == [c["status"] for c in graded]
    assert [g["case"]["case_key"] for g in grading] == [c["case_key"] for c in graded]
    junit = ET.fromstring(_cli("run", "export", run_id, "--format", "junit").encode())
    suites = junit.findall("testsuite")
    assert [s.get("name") for s in suites] == [lane["deployment"] for lane in doc["lanes"]]
    for suite, lane in zip(suites, doc["lanes"], strict=True):
        counts = lane["counts"]
        mine = Counter(c["status"] for c in doc["cases"] if c["deployment"] == lane["deployment"])
        assert {k: v for k, v in counts.items() if v} == dict(mine)
        cases = suite.findall("testcase")
        kinds = Counter(
            next((child.tag for child in case), "passed") for case in cases
        )  # failure / error / skipped / passed
        assert int(suite.get("tests")) == len(cases) == sum(counts.values())
        assert int(suite.get("failures")) == kinds["failure"] == counts["FAILED"]
        assert (
            int(suite.get("errors"))
            == kinds["error"]
            == counts["ERROR"] + counts["infra_error"] + counts["config_error"]
        )
        assert int(suite.get("skipped")) == kinds["skipped"] == sum(counts[k] for k in SKIPPED)
        assert kinds["passed"] == counts["PASSED"]
    return doc


def _two_lane_run(personas, *, repetitions=1):
    version = publish(personas.workspace, cases=3)
    deps = [
        deployment_create(workspace=personas.workspace, name=name, kind="trace_import").deployment
        for name in ("ci", "nightly")
    ]
    return create_run(personas.workspace, version, deps, repetitions=repetitions)


def test_a_rescored_runs_exports_hold_the_current_revision_only(personas):
    from runs.services.operations import run_rescore
    from runs.tasks import rescore_run

    run = _two_lane_run(personas)
    _upload(
        personas,
        run,
        [
            {"deployment": d, "case_key": f"c{i}", "final_output": f"answer-{i}"}
            for d in ("ci", "nightly")
            for i in range(3)
        ],
    )
    run.refresh_from_db()
    assert run.status == "completed"
    # revision 1 said FAILED for ci's c0 (as an older engine might have)
    item = RunItem.objects.get(run=run, lane__deployment_name="ci", case_key="c0")
    old = dict(item.grade, status="FAILED")
    RunItem.objects.filter(pk=item.pk).update(status="FAILED", score=0.0, grade=old)
    RunLane.objects.filter(run=run, deployment_name="ci").update(passed=2, failed=1)
    assert _agree(run)["lanes"][0]["counts"]["FAILED"] == 1
    run_rescore(run=run, enqueue=False)
    rescore_run(str(run.pk), 2)
    run.refresh_from_db()
    assert run.status == "completed"
    assert GradeRevision.objects.filter(item=item).values_list("revision", "status").get() == (1, "FAILED")
    doc = _agree(run)
    assert {c["status"] for c in doc["cases"]} == {"PASSED"}
    assert [lane["counts"]["PASSED"] for lane in doc["lanes"]] == [3, 3]


def test_a_failed_runs_exports_agree(personas):
    run = _two_lane_run(personas)
    _upload(
        personas,
        run,
        [
            {"deployment": "ci", "case_key": "c0", "final_output": "answer-0"},
            {"deployment": "ci", "case_key": "c1", "final_output": "nope"},
            {"deployment": "ci", "case_key": "c2", "final_output": "answer-2"},
            {"deployment": "nightly", "case_key": "c0", "final_output": "nope"},
        ],
    )
    Run.objects.filter(pk=run.pk).update(stats={"error": "critique failed"}, status="failed")
    run.refresh_from_db()
    doc = _agree(run)
    assert doc["run"]["status"] == "failed"
    assert Counter(c["status"] for c in doc["cases"]) == {"PASSED": 2, "FAILED": 2, "pending": 2}


def test_a_cancelled_run_with_repetitions_and_two_lanes_exports_agree(personas):
    from runs.services.operations import run_cancel

    run = _two_lane_run(personas, repetitions=2)
    _upload(
        personas,
        run,
        [
            {"deployment": "ci", "case_key": "c0", "repetition": 1, "final_output": "answer-0"},
            {"deployment": "ci", "case_key": "c0", "repetition": 2, "final_output": "nope"},
            {"deployment": "nightly", "case_key": "c2", "repetition": 2, "final_output": "answer-2"},
        ],
    )
    run_cancel(run=run)
    doc = _agree(run)
    assert doc["run"]["status"] == "cancelled"
    assert Counter(c["status"] for c in doc["cases"]) == {"PASSED": 2, "FAILED": 1, "cancelled": 9}
