"""A trace-import run and the offline ``grade`` of the same results file agree case by case:
the run's exports (jsonl, csv, junit, grading), ``run status --cases``, its lane figures and
its overview give each (deployment, case, repetition) the status and score ``grade`` gives it.
The file is uploaded as a CI job writes it (BOM, CRLF, no newline at the end, unknown keys,
repetitions out of order) and a case left without a line on one lane."""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path
from xml.etree import ElementTree

import pytest
from django.core.management import call_command

from packs.services import pack_version_publish
from runs.exports import export_stream
from runs.services.deployments import deployment_create
from runs.services.trace_import import run_import_results
from runs.views.runs import overview_url
from tests.clients import logged_in
from tests.runs.runfactory import create_run

pytestmark = pytest.mark.django_db
MENTAL = Path(__file__).resolve().parents[2] / "examples" / "packs" / "mental-math"


def _results_file() -> bytes:
    """The example's results with a second repetition (answers swapped between lanes), the
    sloppy lane's ``change`` case left out of repetition 2, in a CI job's bytes."""
    rows = [json.loads(line) for line in (MENTAL / "results.jsonl").read_text().splitlines() if line.strip()]
    by = {(r["deployment"], r["case_key"]): r for r in rows}
    second = []
    for (dep, case), row in by.items():
        if (dep, case) == ("sloppy", "change"):
            continue
        other = by[("sloppy" if dep == "careful" else "careful", case)]
        second.append({**row, "final_output": other["final_output"], "repetition": 2, "ci_job": 17})
    lines = [json.dumps(r) for r in second[::-1] + rows]
    return b"\xef\xbb\xbf" + "\r\n".join(lines).encode()  # BOM, CRLF, no final newline


def _offline(tmp_path: Path, data: bytes) -> dict:
    path = tmp_path / "results.jsonl"
    path.write_bytes(data)
    out = io.StringIO()
    with pytest.raises(SystemExit):  # exit 1: some case FAILED
        call_command("grade", str(MENTAL / "pack.yaml"), "--results", str(path), "--json", stdout=out)
    return json.loads(out.getvalue())


def _rounded(cases: dict) -> dict:
    return {k: (status, None if score is None else round(score, 4)) for k, (status, score) in cases.items()}


def _text(stream) -> str:
    return "".join(stream)


def test_a_trace_import_run_grades_every_case_as_offline_grade_does(personas, tmp_path):
    data = _results_file()
    offline = _offline(tmp_path, data)
    expected = {
        (c["deployment"], c["case_key"], c["repetition"]): (
            c["grading"]["status"],
            c["grading"]["scorecard"]["overall_score"] if c["grading"]["scorecard"] else None,
        )
        for c in offline["cases"]
    }
    assert ("sloppy", "change", 2) not in expected  # offline lists repetition 1 only for a case
    assert {s for s, _ in expected.values()} == {"PASSED", "FAILED"}

    version = pack_version_publish(
        workspace=personas.workspace, data=(MENTAL / "pack.yaml").read_bytes()
    ).version
    deps = [
        deployment_create(workspace=personas.workspace, name=n, kind="trace_import").deployment
        for n in ("careful", "sloppy")
    ]
    run = create_run(personas.workspace, version, deps, repetitions=2)
    outcome = run_import_results(run=run, data=data)
    assert (outcome.accepted, outcome.bad_lines) == (len(expected), [])
    # the missing line leaves its item pending, as grade leaves it without a grade
    missing = ("sloppy", "change", 2)

    # run status --cases
    out = io.StringIO()
    call_command("run", "status", str(run.pk), "--cases", "--json", stdout=out)
    status_doc = json.loads(out.getvalue())
    got = {
        (c["deployment"], c["case_key"], c["repetition"]): (c["status"], c["score"])
        for c in status_doc["cases"]
    }
    assert got.pop(missing) == ("pending", None)
    assert _rounded(got) == _rounded(expected)

    # jsonl
    rows = [json.loads(line) for line in _text(export_stream(run, "jsonl")).splitlines()]
    got = {(r["deployment"], r["case_key"], r["repetition"]): (r["status"], r["score"]) for r in rows}
    assert got.pop(missing) == ("pending", None)
    assert _rounded(got) == _rounded(expected)

    # csv
    rows = list(csv.DictReader(io.StringIO(_text(export_stream(run, "csv")))))
    got = {
        (r["deployment"], r["case_key"], int(r["repetition"])): (
            r["status"],
            float(r["score"]) if r["score"] else None,
        )
        for r in rows
    }
    assert got.pop(missing) == ("pending", None)
    assert _rounded(got) == _rounded(expected)

    # grading: the same documents, but for timing and the run's own ids
    graded = [json.loads(line) for line in _text(export_stream(run, "grading")).splitlines()]
    assert len(graded) == len(expected)
    offline_docs = {(c["deployment"], c["case_key"], c["repetition"]): c["grading"] for c in offline["cases"]}
    for doc in graded:
        case = doc["case"]
        key = (case["deployment"], case["case_key"], case["repetition"])
        mine = offline_docs[key]
        assert doc["status"] == mine["status"]
        assert doc["expectations"] == mine["expectations"]
        assert doc["scorecard"] == mine["scorecard"]
        assert doc["gates"] == mine["gates"]

    # junit
    suites = ElementTree.fromstring(_text(export_stream(run, "junit")))
    got_junit = {}
    for suite in suites:
        for case in suite.findall("testcase"):  # a suite also holds its <properties>
            name = case.get("name")
            key_case, _, rep = name.partition(" #")
            shown = (
                "FAILED"
                if case.find("failure") is not None
                else "skipped"
                if case.find("skipped") is not None
                else "PASSED"
            )
            got_junit[(suite.get("name"), key_case, int(rep or 1))] = shown
    assert got_junit.pop(missing) == "skipped"
    assert got_junit == {k: s for k, (s, _) in expected.items()}

    # lane figures (document and overview): counts, pass rate and mean score as grade's lanes
    lanes = {lane["deployment"]: lane for lane in status_doc["lanes"]}
    page = logged_in(personas.editor).get(overview_url(run)).content.decode()
    for lane in offline["lanes"]:
        mine = lanes[lane["deployment"]]
        assert {k: mine["counts"][k] for k in lane["counts"]} == lane["counts"]
        assert (mine["pass_rate"], mine["mean_score"]) == pytest.approx(
            (lane["pass_rate"], lane["mean_score"])
        )
        row = re.search(rf'<th scope="row">(?:<bdi>)?{lane["deployment"]}.*?</tr>', page, re.S).group(0)
        assert f"{lane['pass_rate'] * 100:.1f}%" in row
        assert f"{lane['mean_score']:.4f}" in row
        assert f"{lane['counts']['PASSED']} pass · {lane['counts']['FAILED']} fail" in row


def test_the_completed_run_has_grades_lane_figures(personas, tmp_path):
    """Uploaded in two parts (the second completes the run, its figures computed at
    completion), the lanes have grade's counts, pass rate and mean score for the whole file."""
    data = _results_file()
    last = json.dumps(
        {"deployment": "sloppy", "case_key": "change", "repetition": 2, "final_output": "17.85"}
    )
    offline = _offline(tmp_path, data + b"\r\n" + last.encode())
    version = pack_version_publish(
        workspace=personas.workspace, data=(MENTAL / "pack.yaml").read_bytes()
    ).version
    deps = [
        deployment_create(workspace=personas.workspace, name=n, kind="trace_import").deployment
        for n in ("careful", "sloppy")
    ]
    run = create_run(personas.workspace, version, deps, repetitions=2)
    assert run_import_results(run=run, data=data).accepted == 11
    assert run_import_results(run=run, data=last.encode()).accepted == 1
    out = io.StringIO()
    call_command("run", "status", str(run.pk), "--cases", "--json", stdout=out)
    doc = json.loads(out.getvalue())
    assert doc["run"]["status"] == "completed"
    got = {(c["deployment"], c["case_key"], c["repetition"]): (c["status"], c["score"]) for c in doc["cases"]}
    expected = {
        (c["deployment"], c["case_key"], c["repetition"]): (
            c["grading"]["status"],
            c["grading"]["scorecard"]["overall_score"],
        )
        for c in offline["cases"]
    }
    assert _rounded(got) == _rounded(expected)
    lanes = {lane["deployment"]: lane for lane in doc["lanes"]}
    for lane in offline["lanes"]:
        mine = lanes[lane["deployment"]]
        assert {k: mine["counts"][k] for k in lane["counts"]} == lane["counts"]
        assert (mine["pass_rate"], mine["mean_score"], mine["pass_rate_interval"]) == (
            lane["pass_rate"],
            lane["mean_score"],
            lane["pass_rate_interval"],
        )
