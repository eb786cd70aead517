"""The same run's figures agree between the overview page, the run API and the exports, and
unusual runs (repetitions, several deployments, odd output) give valid documents."""

from __future__ import annotations

import json

import pytest

from runs.models import RunLane
from runs.results import lanes_of, leaderboard
from runs.services.deployments import deployment_create
from tests.runs.runfactory import create_run, publish

pytestmark = pytest.mark.django_db(transaction=True)
BASE = "/api/v1/workspaces/acme/runs"


def _body(response):
    return json.loads(b"".join(response.streaming_content) if response.streaming else response.content)


def _upload(personas, run, lines):
    body = "\n".join(json.dumps(line) for line in lines)
    response = personas.api(personas.editor).generic(
        "POST", f"{BASE}/{run.pk}/results", body, content_type="application/x-ndjson"
    )
    assert response.status_code == 200, response.content
    return _body(response)


def _trace_run(personas, *, cases: int, repetitions: int = 1):
    """A run of one trace_import deployment "ci" over the echo pack (``cN`` passes on
    ``answer-N``), waiting for its results."""
    version = publish(personas.workspace, cases=cases)
    dep = deployment_create(workspace=personas.workspace, name="ci", kind="trace_import").deployment
    return create_run(personas.workspace, version, [dep], repetitions=repetitions)


def test_a_running_runs_pass_rate_with_repetitions_is_the_same_on_the_page_and_in_the_api(personas):
    """grading.md §10.3: with repetitions a case contributes the mean of its repetitions'
    pass indicators; the overview of a running run counted repetitions as cases (2 of 3
    executions passed: 0.6667) while the run document said 0.75 (c0 half, c1 whole)."""
    run = _trace_run(personas, cases=2, repetitions=2)
    _upload(
        personas,
        run,
        [
            {"case_key": "c0", "repetition": 1, "final_output": "answer-0"},
            {"case_key": "c0", "repetition": 2, "final_output": "nope"},
            {"case_key": "c1", "repetition": 1, "final_output": "answer-1"},
        ],
    )
    run.refresh_from_db()
    assert run.status == "running"
    api_lane = _body(personas.api(personas.viewer).get(f"{BASE}/{run.pk}"))["lanes"][0]
    assert api_lane["pass_rate"] == 0.75
    row = leaderboard(run, lanes_of(run))[0]
    assert (row.pass_rate, row.pass_rate_interval, row.mean_score) == (
        api_lane["pass_rate"],
        api_lane["pass_rate_interval"],
        api_lane["mean_score"],
    )
    assert RunLane.objects.get(run=run).passed == 2


def _exports(personas, run):
    import csv
    import io
    import xml.etree.ElementTree as ET

    api = personas.api(personas.viewer)

    def get(fmt):
        response = api.get(f"{BASE}/{run.pk}/export?format={fmt}")
        assert response.status_code == 200 and response.streaming
        return b"".join(response.streaming_content).decode()

    jsonl = [json.loads(line) for line in get("jsonl").split("\n") if line]
    table = list(csv.DictReader(io.StringIO(get("csv"))))
    junit = ET.fromstring(get("junit").encode())
    grading = [json.loads(line) for line in get("grading").split("\n") if line]
    return jsonl, table, junit, grading


def test_every_export_agrees_with_the_case_route_on_a_cancelled_run_of_two_deployments_with_repetitions(
    personas,
):
    from runs.services.operations import run_cancel

    version = publish(personas.workspace, cases=3)
    deps = [
        deployment_create(workspace=personas.workspace, name=name, kind="trace_import").deployment
        for name in ("ci", "nightly")
    ]
    run = create_run(personas.workspace, version, deps, repetitions=2)
    huge = 'ünïcødé \u2028 "quoted", line\nbreak\r\n\x1b[0m ' + "x" * 300_000
    _upload(
        personas,
        run,
        [
            {"deployment": "ci", "case_key": "c0", "repetition": 1, "final_output": "answer-0"},
            {"deployment": "ci", "case_key": "c0", "repetition": 2, "final_output": huge},
            {"deployment": "nightly", "case_key": "c1", "repetition": 2, "final_output": "answer-1"},
        ],
    )
    run_cancel(run=run)
    api = personas.api(personas.viewer)
    cases = _body(api.get(f"{BASE}/{run.pk}/cases?limit=500"))["results"]
    assert len(cases) == 12
    jsonl, table, junit, grading = _exports(personas, run)
    key = ("deployment", "challenge_key", "case_key", "repetition", "status")
    expected = [tuple(c[k] for k in key) for c in cases]
    assert [tuple(r[k] for k in key) for r in jsonl] == expected
    assert [tuple(r[k] if k != "repetition" else int(r[k]) for k in key) for r in table] == expected
    assert len(grading) == 3
    doc = _body(api.get(f"{BASE}/{run.pk}"))
    for suite, lane in zip(junit.findall("testsuite"), doc["lanes"], strict=True):
        counts = lane["counts"]
        testcases = suite.findall("testcase")
        assert int(suite.get("tests")) == len(testcases) == sum(counts.values()) == 6
        assert int(suite.get("failures")) == len([t for t in testcases if t.find("failure") is not None])
        assert int(suite.get("failures")) == counts["FAILED"]
        assert int(suite.get("errors")) == len([t for t in testcases if t.find("error") is not None])
        assert int(suite.get("skipped")) == len([t for t in testcases if t.find("skipped") is not None])
    statuses = {c["status"] for c in cases}
    assert statuses == {"PASSED", "FAILED", "cancelled"}


def test_a_retried_infra_error_case_counts_once_everywhere(personas):
    from django.test import Client

    from runs.services.operations import run_retry_failed
    from tests.fakes.agent_server import FakeAgent, ok, server_error
    from tests.runs.runfactory import drive, echo_answer, hosted

    version = publish(personas.workspace, cases=3)
    with FakeAgent() as agent:
        agent.default = ok(echo_answer)
        agent.queue(server_error(), case="c1")
        dep = hosted(personas.workspace, agent.url, max_attempts=1)
        run = drive(create_run(personas.workspace, version, [dep]))
        api = personas.api(personas.viewer)
        doc = _body(api.get(f"{BASE}/{run.pk}"))
        assert doc["lanes"][0]["counts"]["infra_error"] == 1, doc
        client = Client()
        client.force_login(personas.viewer)
        infra = _body(api.get(f"{BASE}/{run.pk}/cases?status=infra_error"))["results"]
        assert [c["case_key"] for c in infra] == ["c1"]
        for url in (
            f"/runs/{run.pk}/",
            f"/runs/{run.pk}/cases/?status=infra_error",
            f"/runs/{run.pk}/cases/{infra[0]['id']}/",
        ):
            assert client.get(url).status_code == 200, url
        agent.queue(ok(echo_answer), case="c1")
        run_retry_failed(run=run, enqueue=False)
        run = drive(run)
    assert run.status == "completed"
    doc = _body(api.get(f"{BASE}/{run.pk}"))
    lane = doc["lanes"][0]
    assert lane["counts"] == {
        "PASSED": 3, "FAILED": 0, "NOT_EVALUATED": 0, "UNAVAILABLE": 0, "ERROR": 0,
        "infra_error": 0, "config_error": 0, "cancelled": 0, "pending": 0,
    }  # fmt: skip
    assert lane["pass_rate"] == 1.0 and lane["pass_rate_interval"]
    cases = _body(api.get(f"{BASE}/{run.pk}/cases"))["results"]
    assert [(c["case_key"], c["status"], c["attempts"]) for c in cases] == [
        ("c0", "PASSED", 1), ("c1", "PASSED", 2), ("c2", "PASSED", 1)
    ]  # fmt: skip
    jsonl, table, junit, grading = _exports(personas, run)
    assert [r["attempts"] for r in jsonl] == [1, 2, 1]
    assert junit.find("testsuite").get("tests") == "3" and junit.find("testsuite").get("errors") == "0"
    assert len(grading) == 3
    row = leaderboard(run, lanes_of(run))[0]
    assert (row.pass_rate, row.pass_rate_interval) == (lane["pass_rate"], lane["pass_rate_interval"])
    assert client.get(f"/runs/{run.pk}/").status_code == 200


def test_the_csv_export_quotes_a_key_holding_a_carriage_return(personas):
    """Pack keys are free text: a case key holding a bare CR was written unquoted (the
    writer quotes only what contains its "\\n" line end), so a CSV reader saw a line break
    inside the row ("new-line character seen in unquoted field")."""
    import csv
    import io

    import yaml

    from packs.services import pack_version_publish
    from tests.runs.runfactory import pack_yaml

    doc = yaml.safe_load(pack_yaml(cases=2))
    doc["input_sets"][0]["cases"][0]["case_key"] = "c\r0"
    version = pack_version_publish(workspace=personas.workspace, data=yaml.safe_dump(doc).encode()).version
    dep = deployment_create(workspace=personas.workspace, name="ci", kind="trace_import").deployment
    run = create_run(personas.workspace, version, [dep])
    _upload(personas, run, [{"case_key": "c\r0", "final_output": "answer-0"}])
    response = personas.api(personas.viewer).get(f"{BASE}/{run.pk}/export?format=csv")
    text = b"".join(response.streaming_content).decode()
    rows = list(csv.reader(io.StringIO(text, newline="")))
    assert [row[2] for row in rows] == ["case_key", "c\r0", "c1"]
    assert [row[4] for row in rows[1:]] == ["PASSED", "pending"]


def test_a_run_whose_scoring_failed_after_its_lane_figures_shows_the_same_figures_on_the_page_and_in_the_api(
    personas,
):
    """finalize_run stores each lane's figures, then the critique and judge accounting may
    fail: the run keeps ``stats = {"error": ...}`` and is ``failed`` while its lanes hold
    their figures. The overview showed those (bootstrap interval included) while the run
    document fell back to the live counters (no mean score interval)."""
    from runs.models import Run

    version = publish(personas.workspace, cases=3)
    dep = deployment_create(workspace=personas.workspace, name="ci", kind="trace_import").deployment
    run = create_run(personas.workspace, version, [dep])
    _upload(personas, run, [{"case_key": f"c{i}", "final_output": f"answer-{i}"} for i in range(3)])
    Run.objects.filter(pk=run.pk).update(stats={"error": "critique failed"}, status="failed")
    run.refresh_from_db()
    api_lane = _body(personas.api(personas.viewer).get(f"{BASE}/{run.pk}"))["lanes"][0]
    row = leaderboard(run, lanes_of(run))[0]
    assert api_lane["mean_score_interval"] == row.mean_score_interval == [1.0, 1.0]
    assert (api_lane["pass_rate"], api_lane["pass_rate_interval"]) == (row.pass_rate, row.pass_rate_interval)


def test_assertion_health_flags_never_discriminates_only_where_run_health_would(personas, monkeypatch):
    """grading.md §9(b) no_discrimination needs 3+ graded results *and* 2+ lanes or 3+
    cases. The overview's assertion-health table flagged "never discriminates" on any 3
    graded results, so one lane of 2 cases x 2 repetitions, all passing, was flagged there
    while the run's eval_feedback (the engine) rightly had no such finding."""
    from django.test import Client

    from runs.models import Run, RunResultSummary
    from runs.result_tasks import compute_result_summary

    run = _trace_run(personas, cases=2, repetitions=2)
    _upload(
        personas,
        run,
        [
            {"case_key": f"c{i}", "repetition": rep, "final_output": f"answer-{i}"}
            for i in range(2)
            for rep in (1, 2)
        ],
    )
    run = Run.objects.get(pk=run.pk)
    assert run.status == "completed"
    findings = {s["finding"] for s in run.stats["eval_feedback"]["suggestions"]}
    assert "no_discrimination" not in findings
    compute_result_summary(str(run.pk))
    entry = next(e for e in RunResultSummary.objects.get(run=run).assertion_health if e["key"] == "answer")
    assert entry["discriminates"] is None
    # the streamed reading (databases other than PostgreSQL) decides the same
    from django.db import connection

    from runs import result_tasks

    def answer():
        return next(e for e in result_tasks._compute(run)[1] if e["key"] == "answer")

    postgres = answer()
    monkeypatch.setattr(connection, "vendor", "sqlite")
    assert answer() == postgres
    monkeypatch.undo()
    client = Client()
    client.force_login(personas.viewer)
    assert "never discriminates" not in client.get(f"/runs/{run.pk}/").content.decode()


def test_the_leaderboard_names_what_each_count_counts_with_repetitions(personas):
    """With 2 repetitions the leaderboard read "Graded 2" over "3 pass · 1 fail": cases over
    repetitions, unlabelled, so the figures seemed not to add up. Each now names its unit,
    and the counts are the run document's (per repetition) while graded counts cases."""
    import re

    from django.test import Client

    run = _trace_run(personas, cases=2, repetitions=2)
    _upload(
        personas,
        run,
        [
            {"case_key": "c0", "repetition": 1, "final_output": "answer-0"},
            {"case_key": "c0", "repetition": 2, "final_output": "nope"},
            {"case_key": "c1", "repetition": 1, "final_output": "answer-1"},
            {"case_key": "c1", "repetition": 2, "final_output": "answer-1"},
        ],
    )
    api_lane = _body(personas.api(personas.viewer).get(f"{BASE}/{run.pk}"))["lanes"][0]
    assert (api_lane["counts"]["PASSED"], api_lane["counts"]["FAILED"]) == (3, 1)
    client = Client()
    client.force_login(personas.viewer)
    page = client.get(f"/runs/{run.pk}/").content.decode()
    assert re.search(r"Graded <span[^>]*>cases</span>", page)
    cell = re.search(r'data-testid="graded">(.*?)</td>', page, re.S).group(1)
    assert cell.startswith("2 cases<br>")
    assert "3 pass · 1 fail of 4 repetitions" in cell


def test_a_dimension_passed_with_no_threshold_says_why_next_to_its_status(personas):
    """A dimension without a pass_threshold is PASSED once graded, whatever its score
    (grading.md §2: PASSED iff score >= threshold; §10.2: only gates and the overall decide
    the case). "0.0000 PASSED" read as a contradiction: the page now says why."""
    import re

    from django.test import Client

    from runs.models import RunItem

    run = _trace_run(personas, cases=1)  # correctness: no threshold; overall threshold 1
    _upload(personas, run, [{"case_key": "c0", "final_output": "nope"}])
    item = RunItem.objects.get(run=run)
    (dimension,) = item.grade["scorecard"]["dimensions"]
    assert (item.status, dimension["score"], dimension["status"]) == ("FAILED", 0.0, "PASSED")
    client = Client()
    client.force_login(personas.viewer)
    page = client.get(f"/runs/{run.pk}/cases/{item.pk}/").content.decode()
    row = re.search(r'<th scope="row">correctness</th>.*?</tr>', page, re.S).group(0)
    assert re.search(
        r'>PASSED</span><br><small class="muted" data-testid="dimension-threshold">graded; no threshold', row
    )
