"""The run API: create, document, keyset cases, case detail, results, operations, exports;
outsiders get 404 everywhere, viewers 403 on writes."""

from __future__ import annotations

import csv
import io
import json
import xml.etree.ElementTree as ET

import pytest

from runs.models import Run, RunItem
from runs.services.deployments import deployment_create
from tests.fakes.agent_server import FakeAgent, ok, raw
from tests.runs.runfactory import create_run, drive, echo_answer, hosted, publish

pytestmark = pytest.mark.django_db(transaction=True)
BASE = "/api/v1/workspaces/acme/runs"


def _body(response):
    return json.loads(b"".join(response.streaming_content) if response.streaming else response.content)


def _finished_run(personas, cases=3):
    version = publish(personas.workspace, cases=cases)
    with FakeAgent() as agent:
        agent.default = ok(echo_answer)
        agent.queue(ok({"final_output": "nope"}), case="c1")
        dep = hosted(personas.workspace, agent.url)
        return drive(create_run(personas.workspace, version, [dep]))


def test_create_run_and_read_its_document(personas, enqueued):
    publish(personas.workspace, cases=2, sets=2)
    deployment_create(workspace=personas.workspace, name="ci", kind="trace_import")
    api = personas.api(personas.editor)
    missing = api.post(BASE, {"pack": "echo", "deployments": ["ci"]}, format="json")
    assert missing.status_code == 400
    assert _body(missing)["error"] == {
        "code": "missing_challenge_input_set_id",
        "message": "the pack version has several input sets; choose one",
        "field": "input_set",
        "choices": ["set0", "set1"],
    }
    assert _body(api.post(BASE, {"pack": "nope", "deployments": ["ci"]}, format="json"))["error"]["code"] == (
        "invalid_pack"
    )
    assert (
        _body(api.post(BASE, {"pack": "echo", "pack_version": 9, "deployments": ["ci"]}, format="json"))[
            "error"
        ]["code"]
        == "invalid_pack_version"
    )
    bad = api.post(BASE, {"pack": "echo", "deployments": ["ci", "ci"], "input_set": "set0"}, format="json")
    assert _body(bad)["error"]["code"] == "duplicate_deployment"
    created = api.post(
        BASE, {"pack": "echo", "input_set": "set1", "deployments": ["ci"], "repetitions": 2}, format="json"
    )
    assert created.status_code == 201, created.content
    assert enqueued.names() == ["runs.check_run"]  # a trace_import lane is not dispatched
    doc = _body(created)
    run_id = doc["run"]["id"]
    assert doc["run"] == {
        "id": run_id,
        "status": "queued",
        "pack": {"slug": "echo", "number": 1},
        "input_set": "set1",
        "url": f"http://127.0.0.1:8000/runs/{run_id}/",
    }
    assert doc["lanes"][0]["counts"]["pending"] == 4
    assert _body(api.get(f"{BASE}/{run_id}"))["run"]["id"] == run_id
    listed = _body(api.get(BASE))["results"]
    assert [r["id"] for r in listed] == [run_id]


def test_cases_are_keyset_paginated_and_filtered(personas):
    run = _finished_run(personas, cases=5)
    api = personas.api(personas.viewer)
    page = _body(api.get(f"{BASE}/{run.pk}/cases?limit=2"))
    assert [c["case_key"] for c in page["results"]] == ["c0", "c1"]
    second = _body(api.get(f"{BASE}/{run.pk}/cases?limit=2&after={page['next']}"))
    assert [c["case_key"] for c in second["results"]] == ["c2", "c3"]
    failed = _body(api.get(f"{BASE}/{run.pk}/cases?status=FAILED"))
    assert [(c["case_key"], c["status"], c["score"], c["attempts"]) for c in failed["results"]] == [
        ("c1", "FAILED", 0.0, 1)
    ]
    assert failed["next"] is None
    assert _body(api.get(f"{BASE}/{run.pk}/cases?deployment=nobody"))["results"] == []
    assert _body(api.get(f"{BASE}/{run.pk}/cases?status=weird"))["error"]["code"] == "invalid_status"
    detail = _body(api.get(f"{BASE}/{run.pk}/cases/{failed['results'][0]['id']}"))
    assert detail["grading"]["status"] == "FAILED"
    assert detail["attempts"][0]["category"] == "ok"
    doc = _body(api.get(f"{BASE}/{run.pk}"))
    lane = doc["lanes"][0]
    assert (lane["pass_rate"], lane["counts"]["PASSED"], lane["counts"]["FAILED"]) == (0.8, 4, 1)
    assert lane["pass_rate_interval"] and lane["mean_score_interval"]


def test_exports_stream_every_format(personas):
    run = _finished_run(personas, cases=3)
    api = personas.api(personas.viewer)
    jsonl = api.get(f"{BASE}/{run.pk}/export?format=jsonl")
    assert jsonl.streaming and jsonl["Content-Type"] == "application/x-ndjson"
    rows = [json.loads(line) for line in b"".join(jsonl.streaming_content).decode().splitlines()]
    assert [(r["case_key"], r["status"]) for r in rows] == [
        ("c0", "PASSED"),
        ("c1", "FAILED"),
        ("c2", "PASSED"),
    ]
    text = b"".join(api.get(f"{BASE}/{run.pk}/export?format=csv").streaming_content).decode()
    table = list(csv.DictReader(io.StringIO(text)))
    assert len(table) == 3 and table[1]["status"] == "FAILED" and table[1]["deployment"] == "agent"
    xml = b"".join(api.get(f"{BASE}/{run.pk}/export?format=junit").streaming_content)
    suite = ET.fromstring(xml).find("testsuite")
    assert suite.get("tests") == "3" and suite.get("failures") == "1"
    failure = suite.findall("testcase")[1].find("failure")
    assert "answer" in failure.get("message") and "evidence" in failure.text
    grading = b"".join(api.get(f"{BASE}/{run.pk}/export?format=grading").streaming_content).decode()
    docs = [json.loads(line) for line in grading.splitlines()]
    assert [d["status"] for d in docs] == ["PASSED", "FAILED", "PASSED"]
    assert _body(api.get(f"{BASE}/{run.pk}/export?format=pdf"))["error"]["code"] == "invalid_format"


def test_results_upload_and_operations(personas):
    version = publish(personas.workspace, cases=2)
    dep = deployment_create(workspace=personas.workspace, name="ci", kind="trace_import").deployment
    run = create_run(personas.workspace, version, [dep])
    api = personas.api(personas.editor)
    url = f"{BASE}/{run.pk}/results"
    lines = json.dumps({"case_key": "c0", "final_output": "answer-0"}) + "\nnot json\n"
    bad = api.generic("POST", url, lines, content_type="application/x-ndjson")
    assert bad.status_code == 400
    error = _body(bad)["error"]
    assert (error["code"], error["message"]) == (
        "invalid_results",
        "1 bad result lines; nothing was stored: fix every listed line and send the whole upload again",
    )
    assert [line["line"] for line in error["lines"]] == [2] and "not JSON" in error["lines"][0]["message"]
    assert not RunItem.objects.filter(run=run).exclude(status="").exists()
    fixed = json.dumps({"case_key": "c0", "final_output": "answer-0"}) + "\n"
    fixed += json.dumps({"case_key": "c1", "final_output": "x"})
    good = api.generic("POST", url, fixed, content_type="application/x-ndjson")
    assert _body(good) == {"accepted": 2, "run": {"id": str(run.pk), "status": "completed"}}
    rescored = api.post(f"{BASE}/{run.pk}/rescore")
    assert rescored.status_code == 202
    assert _body(rescored)["run"] == {**_body(api.get(f"{BASE}/{run.pk}"))["run"], "status": "scoring"}
    assert Run.objects.get(pk=run.pk).scoring_revision == 2
    again = api.post(f"{BASE}/{run.pk}/rescore")
    assert (again.status_code, _body(again)["error"]["code"]) == (409, "run_not_rescorable")
    from runs.tasks import rescore_run

    rescore_run(str(run.pk), 2)  # what the enqueued task does
    assert _body(api.get(f"{BASE}/{run.pk}"))["run"]["status"] == "completed"
    assert _body(api.post(f"{BASE}/{run.pk}/cancel"))["error"]["code"] == "run_finished"
    assert api.post(f"{BASE}/{run.pk}/cancel").status_code == 409
    assert _body(api.post(f"{BASE}/{run.pk}/retry-failed"))["error"]["code"] == "nothing_to_retry"


def test_cancel_through_the_api(personas):
    version = publish(personas.workspace, cases=2)
    run = create_run(personas.workspace, version, [hosted(personas.workspace, "http://127.0.0.1:9/a")])
    body = _body(personas.api(personas.owner).post(f"{BASE}/{run.pk}/cancel"))
    assert body["run"]["status"] == "cancelled"
    assert set(RunItem.objects.filter(run=run).values_list("state", flat=True)) == {"cancelled"}


def test_outsiders_get_404_and_viewers_403_on_writes(personas):
    version = publish(personas.workspace, cases=1)
    run = create_run(personas.workspace, version, [hosted(personas.workspace, "http://127.0.0.1:9/a")])
    item = RunItem.objects.get(run=run)
    reads = [
        BASE,
        f"{BASE}/{run.pk}",
        f"{BASE}/{run.pk}/cases",
        f"{BASE}/{run.pk}/cases/{item.pk}",
        f"{BASE}/{run.pk}/export?format=csv",
    ]
    writes = [f"{BASE}/{run.pk}/{op}" for op in ("results", "cancel", "retry-failed", "rescore")] + [BASE]
    outsider = personas.api(personas.outsider)
    for url in reads:
        assert outsider.get(url).status_code == 404, url
    for url in writes:
        assert outsider.post(url, {}, format="json").status_code == 404, url
    # the run seen through another workspace's path is 404 too
    assert outsider.get(f"/api/v1/workspaces/globex/runs/{run.pk}").status_code == 404
    viewer = personas.api(personas.viewer)
    for url in writes:
        assert (
            viewer.post(url, {"pack": "echo", "deployments": ["agent"]}, format="json").status_code == 403
        ), url
    for url in reads:
        assert viewer.get(url).status_code == 200, url
    assert Run.objects.get(pk=run.pk).status == "queued"


def test_the_junit_export_is_well_formed_xml_whatever_the_evidence_holds(personas):
    """XML 1.0 has no ESC, no other C0 control but tab and newlines, no U+FFFE/U+FFFF: an
    agent's terminal output (ANSI colours) quoted as evidence made the JUnit file one that
    CI tools refuse to read. Such characters are written as U+FFFD."""
    run = _finished_run(personas, cases=3)
    item = RunItem.objects.get(run=run, case_key="c1")
    grade = dict(item.grade)
    hostile = "\x1b[31mred\x1b[0m \x01\x08\x0b\x0c\x1f \ufffe\uffff tab\tok"
    grade["expectations"] = [
        dict(e, evidence=hostile, text=e.get("text", "") + "\x02") for e in grade["expectations"]
    ]
    RunItem.objects.filter(pk=item.pk).update(grade=grade, reason_code="bad\x07code")
    api = personas.api(personas.viewer)
    xml = b"".join(api.get(f"{BASE}/{run.pk}/export?format=junit").streaming_content)
    suite = ET.fromstring(xml).find("testsuite")  # raised "not well-formed (invalid token)"
    failure = suite.findall("testcase")[1].find("failure")
    assert "\ufffd[31mred\ufffd[0m \ufffd\ufffd\ufffd\ufffd\ufffd \ufffd\ufffd tab\tok" in failure.text


def test_the_junit_export_says_why_a_case_without_a_grade_errored(personas):
    """An infra or config error was a bare ``<error message="infra_error"/>``: CI showed the
    failed case without the cause. It now carries the last attempt's code and message."""
    version = publish(personas.workspace, cases=2)
    with FakeAgent() as agent:
        agent.default = ok(echo_answer)
        agent.queue(raw("<html>down</html>", status=503, content_type="text/html"), case="c1")
        agent.queue(raw("<html>down</html>", status=503, content_type="text/html"), case="c1")
        dep = hosted(personas.workspace, agent.url, max_attempts=2)
        run = drive(create_run(personas.workspace, version, [dep]))
    api = personas.api(personas.viewer)
    xml = b"".join(api.get(f"{BASE}/{run.pk}/export?format=junit").streaming_content)
    passed, errored = ET.fromstring(xml).find("testsuite").findall("testcase")
    assert passed.find("error") is None
    error = errored.find("error")
    assert error.get("type") == "infra_error"
    assert error.get("message") == "server_error: the agent failed with HTTP 503"
    assert error.text.endswith("\n2 attempts")


def test_jsonl_exports_keep_one_record_per_line_for_every_line_reader(personas):
    """U+2028 / U+2029 in an agent's answer were written raw (valid JSON): ``str.splitlines()``
    split the record there and each half failed to parse. They are escaped now."""
    run = _finished_run(personas, cases=2)
    item = RunItem.objects.get(run=run, case_key="c1")
    text = "one\u2028two\u2029three"
    grade = dict(item.grade, expectations=[dict(e, evidence=text) for e in item.grade["expectations"]])
    RunItem.objects.filter(pk=item.pk).update(grade=grade)
    lane = item.lane
    lane.deployment_name = "agent\u2028b"
    lane.save(update_fields=["deployment_name"])
    api = personas.api(personas.viewer)
    for format, key in (("grading", None), ("jsonl", "deployment")):
        body = b"".join(api.get(f"{BASE}/{run.pk}/export?format={format}").streaming_content).decode()
        docs = [json.loads(line) for line in body.splitlines()]
        assert len(docs) == 2
        if key:
            assert docs[1][key] == "agent\u2028b"
        else:
            assert docs[1]["expectations"][0]["evidence"] == text


def test_an_unreachable_broker_is_a_503_naming_the_setting(personas, monkeypatch):
    from kombu.exceptions import OperationalError as BrokerError

    from runs import tasks

    def refuse(*args):
        raise BrokerError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")

    monkeypatch.setattr(tasks.check_run, "delay", refuse)
    publish(personas.workspace, cases=1)
    deployment_create(workspace=personas.workspace, name="ci", kind="trace_import")
    response = personas.api(personas.editor).post(
        BASE, {"pack": "echo", "deployments": ["ci"]}, format="json"
    )
    assert response.status_code == 503
    error = response.json()["error"]
    assert error["code"] == "broker_unavailable"
    assert "CELERY_BROKER_URL" in error["message"] and "Connection refused" in error["message"]
    # The run was stored before the broker was asked; the message says which one it is.
    assert str(Run.objects.get().pk) in error["message"]


def test_a_rescore_with_the_broker_down_is_a_503_saying_the_regrade_follows(personas, monkeypatch):
    # The rescore's task was published on commit without a guard: the broker's error went out
    # as a 500 (and a traceback in the CLI), though the revision was committed and the sweeper
    # sends a stalled re-grade again.
    from kombu.exceptions import OperationalError as BrokerError

    from runs import tasks

    publish(personas.workspace, cases=1)
    deployment_create(workspace=personas.workspace, name="ci", kind="trace_import")
    api = personas.api(personas.editor)
    run = Run.objects.get(
        pk=api.post(BASE, {"pack": "echo", "deployments": ["ci"]}, format="json").json()["run"]["id"]
    )
    Run.objects.filter(pk=run.pk).update(status="completed")

    def refuse(*args):
        raise BrokerError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")

    monkeypatch.setattr(tasks.rescore_run, "delay", refuse)
    response = api.post(f"{BASE}/{run.pk}/rescore")
    assert response.status_code == 503
    error = response.json()["error"]
    assert error["code"] == "broker_unavailable"
    assert f"Run {run.pk} is re-scoring (revision 2)" in error["message"]
    assert Run.objects.get(pk=run.pk).status == "scoring"  # committed: the sweeper sends it again
