"""examples/ci/agentclash_ci.py, the dependency-free CI client over the REST API: run as a
process against a live server, it creates the run, waits for it, writes the JUnit export and
exits as ``eval start --follow`` does for the same run document."""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agentclash_site.workspaces.services import token_create
from runs.management.commands.eval import follow_exit_code
from runs.models import Run
from tests.fakes.agent_server import FakeAgent, ok
from tests.runs.runfactory import drive, echo_answer, hosted, publish

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "ci" / "agentclash_ci.py"
DEADLINE = 60.0


def _load():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("agentclash_ci", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _start(url: str, token: str, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "AGENTCLASH_URL": url, "AGENTCLASH_TOKEN": token}
    return subprocess.Popen(
        [sys.executable, str(SCRIPT), *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for_run(process: subprocess.Popen[str]) -> Run:
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline:
        run = Run.objects.order_by("-created_at").first()
        if run is not None:
            return run
        if process.poll() is not None:
            pytest.fail(f"the client ended before creating a run: {process.communicate()}")
        time.sleep(0.05)
    process.kill()
    pytest.fail("no run was created in time")


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(("fail_under", "code"), [("0.5", 0), ("1.0", 1)])
def test_the_client_runs_an_eval_to_its_end_and_exits_by_its_result(
    personas, live_server, tmp_path, fail_under, code
):
    version = publish(personas.workspace, cases=3)
    token = token_create(user=personas.editor, workspace=personas.workspace, name="ci").secret
    junit = tmp_path / "results.xml"
    with FakeAgent() as agent:
        agent.default = ok(echo_answer)
        agent.queue(ok({"final_output": "no idea"}), case="c2")
        deployment = hosted(personas.workspace, agent.url)
        process = _start(
            live_server.url,
            token,
            *("--workspace", "acme", "--pack", version.pack.slug, "--deployment", deployment.name),
            *("--fail-under", fail_under, "--junit", str(junit), "--name", "commit abc123"),
        )
        run = _wait_for_run(process)  # created through the API; this test is its worker
        assert drive(run).status == "completed"
        out, err = process.communicate(timeout=DEADLINE)
    assert process.returncode == code, err
    document = json.loads(out)
    assert document["run"]["id"] == str(run.id) and document["run"]["status"] == "completed"
    assert follow_exit_code(document, float(fail_under)) == code
    assert Run.objects.get(pk=run.pk).name == "commit abc123"
    lane = document["lanes"][0]
    assert lane["counts"]["PASSED"] == 2 and lane["counts"]["FAILED"] == 1
    assert "agent: pass rate 66.7%" in err
    xml = junit.read_text()
    assert xml.count("<testcase") == 3 and xml.count("<failure") == 1


@pytest.mark.django_db(transaction=True)
def test_a_refused_request_exits_2_naming_the_field(personas, live_server):
    publish(personas.workspace, cases=1)
    token = token_create(user=personas.editor, workspace=personas.workspace).secret
    process = _start(
        live_server.url, token, "--workspace", "acme", "--pack", "echo", "--deployment", "nobody"
    )
    out, err = process.communicate(timeout=DEADLINE)
    assert process.returncode == 2 and out == ""
    assert "HTTP 400" in err and "deployments" in err and "nobody" in err
    assert not Run.objects.exists()

    outsider = token_create(user=personas.outsider, workspace=personas.other_workspace).secret
    process = _start(live_server.url, outsider, "--workspace", "acme", "--pack", "echo", "--deployment", "x")
    _, err = process.communicate(timeout=DEADLINE)
    assert process.returncode == 2 and "HTTP 404" in err

    process = _start(
        live_server.url, "acl_not-a-token", "--workspace", "acme", "--pack", "echo", "--deployment", "x"
    )
    _, err = process.communicate(timeout=DEADLINE)
    assert process.returncode == 2 and "HTTP 401" in err and "AGENTCLASH_TOKEN" in err


def test_a_server_that_does_not_answer_exits_3():
    with socket.socket() as sock:  # a loopback port nobody listens on
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    process = _start(url, "t", "--workspace", "w", "--pack", "p", "--deployment", "d")
    _, err = process.communicate(timeout=DEADLINE)
    assert process.returncode == 3 and "127.0.0.1" in err


def test_usage_errors_exit_2_without_a_request():
    process = _start("http://127.0.0.1:9", "", "--workspace", "w", "--pack", "p", "--deployment", "d")
    _, err = process.communicate(timeout=DEADLINE)
    assert process.returncode == 2 and "AGENTCLASH_TOKEN" in err
    process = _start(
        "http://127.0.0.1:9", "t", "--workspace", "w", "--pack", "p", "--deployment", "d", "--fail-under", "2"
    )
    _, err = process.communicate(timeout=DEADLINE)
    assert process.returncode == 2 and "--fail-under" in err


@pytest.mark.parametrize(
    "document",
    [
        {"run": {"status": "failed"}, "lanes": []},
        {"run": {"status": "completed"}, "lanes": [{"pass_rate": 1.0, "counts": {"PASSED": 3}}]},
        {"run": {"status": "completed"}, "lanes": [{"pass_rate": 1.0, "counts": {"PASSED": 9, "FAILED": 1}}]},
        {"run": {"status": "completed"}, "lanes": [{"pass_rate": 0.5, "counts": {"infra_error": 1}}]},
        {"run": {"status": "completed"}, "lanes": [{"pass_rate": None, "counts": {}}]},
        {"run": {"status": "cancelled"}, "lanes": [{"pass_rate": 0.8, "counts": {"PASSED": 4, "FAILED": 1}}]},
        {
            "run": {"status": "completed"},
            "lanes": [
                {"pass_rate": 0.9, "counts": {"PASSED": 9}},
                {"pass_rate": 0.2, "counts": {"config_error": 1}},
            ],
        },
    ],
)
@pytest.mark.parametrize("fail_under", [0.0, 0.5, 0.85, 1.0])
def test_the_exit_code_is_eval_starts_for_the_same_document(document, fail_under):
    assert _load().exit_code(document, fail_under) == follow_exit_code(document, fail_under)


def test_a_server_error_exits_3_not_2():
    import http.server
    import threading

    class Failing(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.send_response(500)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(b'{"error": {"code": "internal_error", "message": "boom"}}')

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Failing)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        process = _start(url, "t", "--workspace", "w", "--pack", "p", "--deployment", "d")
        _, err = process.communicate(timeout=DEADLINE)
    finally:
        server.shutdown()
        server.server_close()
    assert process.returncode == 3 and "HTTP 500: internal_error: boom" in err
