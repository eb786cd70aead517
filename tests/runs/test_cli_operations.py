"""``run cancel``, ``run retry-failed`` and ``run rescore``: the API's run operations for a
CI job that has no token, through the same services, printing the body the API answers.
Exit 0 done, 2 unknown run, 3 refused because of the run's state (the API's 409)."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command

from runs.documents import run_document
from runs.models import Run
from tests.fakes.agent_server import FakeAgent, ok, raw
from tests.runs.runfactory import create_run, drive, echo_answer, hosted, publish

# Not transactional: the operations' on-commit enqueues (dispatch, rescore) never run.
pytestmark = pytest.mark.django_db

BASE = "/api/v1/workspaces/acme/runs"


def _cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = 0
    try:
        call_command("run", *args, stdout=out, stderr=err)
    except SystemExit as exc:
        code = exc.code
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def finished(personas) -> Run:
    """A completed run: c0 passed, c1 config_error (the agent said 401)."""
    version = publish(personas.workspace, cases=2)
    with FakeAgent() as agent:
        agent.default = ok(echo_answer)
        agent.queue(raw("{}", status=401), case="c1")
        run = drive(create_run(personas.workspace, version, [hosted(personas.workspace, agent.url)]))
    assert run.status == "completed"
    return run


def test_run_cancel_prints_the_apis_body_and_a_second_cancel_exits_3(personas):
    version = publish(personas.workspace, cases=2)
    dep = hosted(personas.workspace, "http://127.0.0.1:9/agent")
    by_cli = create_run(personas.workspace, version, [dep])
    by_api = create_run(personas.workspace, version, [dep])
    code, out, _ = _cli("cancel", str(by_cli.pk), "--json")
    assert code == 0
    answered = personas.api(personas.owner).post(f"{BASE}/{by_api.pk}/cancel")
    assert answered.status_code == 200
    assert json.loads(out) == {"run": {"id": str(by_cli.pk), "status": "cancelled"}}
    assert answered.json() == {"run": {"id": str(by_api.pk), "status": "cancelled"}}
    assert Run.objects.get(pk=by_cli.pk).status == "cancelled"
    code, out, _ = _cli("cancel", str(by_cli.pk), "--json")
    assert code == 3
    assert json.loads(out)["error"] == {"code": "run_finished", "message": "the run is already cancelled"}
    code, _, err = _cli("cancel", str(by_cli.pk))
    assert (code, err.strip()) == (3, "error: the run is already cancelled (run_finished)")


def test_run_retry_failed_prints_how_many_went_back_and_exits_3_when_none_can(finished):
    code, out, _ = _cli("retry-failed", str(finished.pk), "--json")
    assert code == 0
    assert json.loads(out) == {"run": {"id": str(finished.pk), "status": "running"}, "retried": 1}
    code, out, _ = _cli("retry-failed", str(finished.pk), "--json")
    assert code == 3
    assert json.loads(out)["error"]["code"] == "nothing_to_retry"  # c1 is pending again


def test_run_retry_failed_of_a_run_without_failures_exits_3(personas):
    version = publish(personas.workspace, cases=1)
    with FakeAgent() as agent:
        agent.default = ok(echo_answer)
        run = drive(create_run(personas.workspace, version, [hosted(personas.workspace, agent.url)]))
    assert run.status == "completed"
    code, out, _ = _cli("retry-failed", str(run.pk), "--json")
    assert (code, json.loads(out)["error"]["code"]) == (3, "nothing_to_retry")


def test_run_rescore_prints_the_run_document_in_scoring(finished):
    code, out, err = _cli("rescore", str(finished.pk), "--json")
    assert (code, err) == (0, "")
    document = json.loads(out)
    assert document == json.loads(json.dumps(run_document(finished)))
    assert document["run"]["status"] == "scoring"
    assert Run.objects.get(pk=finished.pk).scoring_revision == 2
    code, out, _ = _cli("rescore", str(finished.pk), "--json")
    assert code == 3
    error = json.loads(out)["error"]
    assert error["code"] == "run_not_rescorable" and "(this one is scoring)" in error["message"]


def test_run_rescore_text_names_the_revision(finished):
    code, out, _ = _cli("rescore", str(finished.pk))
    assert code == 0
    assert out.startswith(f"Run {finished.pk} is being re-scored (revision 2): run status {finished.pk}\n")
    assert f"Run {finished.pk}: scoring" in out


@pytest.mark.parametrize("operation", ["cancel", "retry-failed", "rescore"])
def test_an_unknown_run_exits_2(personas, operation):
    code, out, _ = _cli(operation, "00000000-0000-0000-0000-000000000000", "--json")
    assert code == 2
    assert json.loads(out)["error"] == {
        "code": "unknown_run",
        "message": "no run 00000000-0000-0000-0000-000000000000",
        "field": "run",
    }
    code, out, _ = _cli(operation, "not-a-run", "--json")
    assert (code, json.loads(out)["error"]["code"]) == (2, "unknown_run")


def test_run_export_refuses_an_empty_output_instead_of_printing_to_stdout(personas):
    # `run export RUN --format csv --output "$OUT"` with OUT unset wrote the export to stdout
    # and exited 0, the file the CI job then reads never written.
    run = create_run(
        personas.workspace, publish(personas.workspace), [hosted(personas.workspace, "http://127.0.0.1:9/a")]
    )
    code, out, err = _cli("export", str(run.pk), "--format", "csv", "--output", "")
    assert code == 2
    assert out == ""
    assert "--output is empty" in err
