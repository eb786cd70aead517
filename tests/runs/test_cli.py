"""``eval start`` (with --follow, --fail-under, exit codes 0/1/2/3), ``run status``, ``run export``."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command

from runs.models import Run
from runs.services.deployments import deployment_create
from tests.fakes.agent_server import FakeAgent, ok, raw
from tests.runs.runfactory import echo_answer, hosted, publish

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def inline_tasks(monkeypatch):
    """Run the dispatch and check tasks in this process as they are enqueued."""
    from runs import tasks
    from runs.dispatch import dispatch_lane
    from runs.scoring import check_run

    def dispatch(lane_id):
        for _ in range(20):
            if not dispatch_lane(lane_id, time_slice=30).requeue:
                break

    monkeypatch.setattr(tasks.dispatch_lane, "delay", dispatch)
    monkeypatch.setattr(tasks.check_run, "delay", check_run)


def _cli(*args):
    out, err = io.StringIO(), io.StringIO()
    code = 0
    try:
        call_command(*args, stdout=out, stderr=err)
    except SystemExit as exc:
        code = exc.code
    return code, out.getvalue(), err.getvalue()


def _start(*extra):
    return _cli("eval", "start", "--workspace", "acme", "--pack", "echo", "--deployment", "agent", *extra)


def test_follow_prints_the_document_and_exits_0_or_1(personas, inline_tasks):
    publish(personas.workspace, cases=3)
    with FakeAgent() as agent:
        agent.default = ok(echo_answer)
        hosted(personas.workspace, agent.url)
        code, out, err = _start("--follow", "--json")
        assert code == 0, out
        assert err == ""  # no progress bar: stderr is not a terminal
        doc = json.loads(out)
        run_id = doc["run"]["id"]
        assert doc["run"] == {
            "id": run_id,
            "status": "completed",
            "pack": {"slug": "echo", "number": 1},
            "input_set": "set0",
            "url": f"http://127.0.0.1:8000/runs/{run_id}/",
        }
        lane = doc["lanes"][0]
        assert lane["deployment"] == "agent" and lane["pass_rate"] == 1.0
        assert lane["pass_rate_interval"] == [0.4385, 1.0]
        assert lane["counts"] == {
            "PASSED": 3, "FAILED": 0, "NOT_EVALUATED": 0, "UNAVAILABLE": 0, "ERROR": 0,
            "infra_error": 0, "config_error": 0, "cancelled": 0, "pending": 0,
        }  # fmt: skip
        assert doc["cases"][0] == {
            "deployment": "agent", "challenge_key": "echo", "case_key": "c0", "repetition": 1,
            "status": "PASSED", "score": 1.0, "attempts": 1,
        }  # fmt: skip
        agent.queue(ok({"final_output": "no"}), case="c2")
        code, out, _ = _start("--follow", "--json")
        assert code == 1 and json.loads(out)["lanes"][0]["pass_rate"] == 0.6667
        agent.queue(ok({"final_output": "no"}), case="c2")
        code, _, _ = _start("--follow", "--json", "--fail-under", "0.5")
        assert code == 0


def test_infra_or_config_errors_exit_3(personas, inline_tasks):
    publish(personas.workspace, cases=2)
    with FakeAgent() as agent:
        agent.default = ok(echo_answer)
        agent.queue(raw("{}", status=404), case="c1")
        hosted(personas.workspace, agent.url)
        code, out, _ = _start("--follow", "--json", "--fail-under", "0")
    assert code == 3
    cases = json.loads(out)["cases"]
    assert cases[1]["status"] == "config_error" and cases[1]["score"] is None and cases[1]["attempts"] == 1


def test_usage_and_validation_errors_exit_2(personas):
    publish(personas.workspace, cases=1, sets=2)
    deployment_create(workspace=personas.workspace, name="agent", kind="trace_import")
    code, out, _ = _start("--fail-under", "0.5", "--json")
    assert code == 2 and json.loads(out)["error"]["code"] == "usage"
    code, out, _ = _start("--follow", "--json")
    error = json.loads(out)["error"]
    assert (
        code == 2
        and error["code"] == "missing_challenge_input_set_id"
        and error["choices"] == ["set0", "set1"]
    )
    code, out, _ = _start("--json", "--input-set", "set0", "--repetitions", "11")
    assert code == 2 and json.loads(out)["error"]["code"] == "invalid_repetitions"
    code, out, _ = _cli(
        "eval", "start", "--workspace", "nope", "--pack", "echo", "--deployment", "x", "--json"
    )
    assert code == 2 and json.loads(out)["error"]["code"] == "unknown_workspace"


def test_every_selection_error_of_the_exit_table_exits_2_with_its_code(personas):
    """interfaces.md §6 lists these codes under exit 2 of ``eval start --follow``, as error
    objects naming --input-set (or the pack) with the fix (pack-format §13)."""
    import yaml

    from packs.services import pack_version_publish
    from tests.runs.runfactory import pack_yaml

    doc = yaml.safe_load(pack_yaml(sets=2))
    doc["input_sets"][0]["name"] = "set1"  # set0's name is set1's key: "set1" matches both
    pack_version_publish(workspace=personas.workspace, data=yaml.safe_dump(doc).encode())
    publish(personas.workspace, slug="chat", mode="responses", cases=1)
    deployment_create(workspace=personas.workspace, name="agent", kind="trace_import")
    rows = [
        (["--input-set", "SET1"], "ambiguous_challenge_input_set", "input_set", ["set0", "set1"]),
        (["--input-set", "nope"], "invalid_challenge_input_set_id", "input_set", None),
        (["--pack", "chat"], "unsupported_execution_mode", "deployment", None),  # its kind cannot run it
    ]
    for args, code_name, field, choices in rows:
        code, out, err = _start("--follow", "--json", *args)
        error = json.loads(out)["error"]
        assert (code, error["code"], error["field"], error.get("choices")) == (2, code_name, field, choices)
        assert err == ""
        code, out, err = _start("--follow", *args)  # text: the same exit, the error on stderr
        assert (code, out) == (2, "") and f"({code_name})" in err
    assert not Run.objects.exists()


def test_an_unknown_deployment_is_named_by_the_option_given(personas):
    publish(personas.workspace, cases=1)
    deployment_create(workspace=personas.workspace, name="agent", kind="trace_import")
    code, out, _ = _cli(
        "eval", "start", "--workspace", "acme", "--pack", "echo", "--deployment", "ghost", "--json"
    )
    error = json.loads(out)["error"]
    assert code == 2 and error["code"] == "invalid_deployment"
    # --deployment is the option (the API's body key is "deployments")
    assert error["field"] == "deployment" and error["choices"] == ["agent"]


def test_an_unreachable_broker_is_an_error_object_not_a_traceback(personas, monkeypatch):
    from kombu.exceptions import OperationalError as BrokerError

    from runs import tasks

    def refuse(*args):
        raise BrokerError("Error 111 connecting to 127.0.0.1:1. Connection refused.")

    monkeypatch.setattr(tasks.check_run, "delay", refuse)
    publish(personas.workspace, cases=1)
    deployment_create(workspace=personas.workspace, name="agent", kind="trace_import")
    code, out, _ = _start("--json")
    error = json.loads(out)["error"]
    # An infrastructure failure, like losing the database: exit 3.
    assert code == 3 and error["code"] == "broker_unavailable"
    assert "CELERY_BROKER_URL" in error["message"] and "Connection refused" in error["message"]
    assert str(Run.objects.get().pk) in error["message"]
    code, out, err = _start()
    assert code == 3 and out == "" and "broker_unavailable" in err


def test_start_without_follow_status_and_export(personas, tmp_path):
    publish(personas.workspace, cases=2)
    deployment_create(workspace=personas.workspace, name="agent", kind="trace_import")
    code, out, _ = _start("--json")
    assert code == 0
    doc = json.loads(out)
    assert list(doc) == ["run"] and doc["run"]["status"] == "queued"
    run_id = doc["run"]["id"]
    code, out, _ = _cli("run", "status", run_id, "--json")
    status = json.loads(out)
    assert code == 0 and "cases" not in status and status["lanes"][0]["counts"]["pending"] == 2
    code, out, _ = _cli("run", "status", run_id, "--cases", "--json")
    assert [c["status"] for c in json.loads(out)["cases"]] == ["pending", "pending"]
    code, out, _ = _cli("run", "export", run_id, "--format", "csv")
    assert code == 0 and out.splitlines()[0].startswith("deployment,challenge_key,case_key")
    target = tmp_path / "out.jsonl"
    code, out, _ = _cli("run", "export", run_id, "--format", "jsonl", "--output", str(target))
    assert code == 0 and out == "" and len(target.read_text().splitlines()) == 2
    code, out, _ = _cli("run", "status", "not-a-run", "--json")
    assert code == 2 and json.loads(out)["error"]["code"] == "unknown_run"
    assert Run.objects.count() == 1


def _follow_in_thread(run):
    """``eval start --follow``'s wait for ``run`` on a thread of its own (its own connection)."""
    import threading

    from django.db import connection

    from runs.management.commands.eval import Command

    out: dict = {}

    def follow():
        try:
            out["document"] = Command(stdout=io.StringIO(), stderr=io.StringIO()).follow(run)
        except BaseException as exc:
            out["error"] = exc
        finally:
            connection.close()

    thread = threading.Thread(target=follow)
    thread.start()
    return thread, out


def test_follow_survives_its_database_connection_being_terminated(personas):
    """A database restart or failover while ``--follow`` waits used to end the command in a
    traceback, exit 1: a failed eval to CI. It connects again and goes on waiting."""
    from django.db import connection

    from runs.states import transition_run
    from tests.processes import wait_until
    from tests.runs.runfactory import create_run

    version = publish(personas.workspace, cases=1)
    dep = deployment_create(workspace=personas.workspace, name="ci", kind="trace_import").deployment
    run = create_run(personas.workspace, version, [dep])
    thread, out = _follow_in_thread(run)

    def others() -> set[int]:
        """The other backends on the test database: the follower's (the test's own is excluded)."""
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
            return {row[0] for row in cursor.fetchall()}

    try:
        first = wait_until(others, timeout=30, message="the follower's connection")
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM unnest(%s::int[]) AS pid", [list(first)]
            )
        wait_until(lambda: others() - first, timeout=30, message="the follower connected again")
        assert thread.is_alive() and "error" not in out
        transition_run(Run.objects.get(pk=run.pk), "running", reason="test")
        Run.objects.filter(pk=run.pk).update(items_open=0)
        transition_run(Run.objects.get(pk=run.pk), "cancelled", reason="test")  # a finished status
    finally:
        thread.join(timeout=30)
    assert "error" not in out, out.get("error")
    assert out["document"]["run"]["status"] == "cancelled"


def test_follow_gives_up_with_exit_3_when_the_database_stays_away(personas, monkeypatch):
    import psycopg

    from runs.management.commands import eval as eval_command
    from tests.runs.runfactory import create_run

    version = publish(personas.workspace, cases=1)
    dep = deployment_create(workspace=personas.workspace, name="ci", kind="trace_import").deployment
    run = create_run(personas.workspace, version, [dep])
    monkeypatch.setattr(eval_command, "RECONNECT_SECONDS", 0.3)

    def unreachable():
        raise psycopg.OperationalError("connection refused")

    monkeypatch.setattr(eval_command, "_listen", unreachable)
    with pytest.raises(eval_command.CliError) as info:
        eval_command.Command(stdout=io.StringIO(), stderr=io.StringIO()).follow(run)
    error = info.value
    assert (error.code, error.exit_code) == ("database_unavailable", 3)
    assert "connection refused" in error.message and f"run status {run.pk}" in error.message


def _following() -> bool:
    """Whether another backend's last statement is ``--follow``'s read of the run's status."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            " AND pid <> pg_backend_pid() AND query LIKE %s",
            ['%"runs_run"."items_open"%'],
        )
        return cursor.fetchone()[0] > 0


@pytest.mark.slow
@pytest.mark.parametrize("signum", ["SIGINT", "SIGTERM"])
def test_an_interrupted_follow_names_the_run_it_leaves_going(personas, signum):
    """Ctrl-C (SIGINT) or a CI job cancelled (SIGTERM) while ``--follow`` waited: a
    KeyboardInterrupt traceback, or nothing at all, and with ``--json`` the run's id was never
    printed, so the run went on where its starter could not find it. It now prints the error
    object, ``interrupted``, naming ``run status RUN``, and exits 3 (as when following
    times out: the run goes on)."""
    import signal
    import subprocess
    import sys

    from tests.processes import ROOT, child_env, redis_server, wait_until

    publish(personas.workspace, cases=1)
    deployment_create(workspace=personas.workspace, name="ci", kind="trace_import")  # never finishes alone
    argv = [sys.executable, "manage.py", "eval", "start", "--workspace", "acme", "--pack", "echo"]
    argv += ["--deployment", "ci", "--follow", "--json"]
    with redis_server() as port:
        env = child_env(CELERY_BROKER_URL=f"redis://127.0.0.1:{port}/0")
        proc = subprocess.Popen(
            argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        try:
            run = wait_until(lambda: Run.objects.first(), timeout=60, message="the run")
            wait_until(lambda: _following(), timeout=60, message="the command waiting for the run")
            proc.send_signal(getattr(signal, signum))
            out, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)
    assert proc.returncode == 3, (out, err)
    error = json.loads(out)["error"]
    assert error["code"] == "interrupted"
    assert f"run status {run.pk}" in error["message"]
    assert "Traceback" not in err
    assert Run.objects.get(pk=run.pk).status == "queued"  # it goes on


INTERRUPT_WHILE_ENQUEUED = """
import os, signal, sys
import django

django.setup()
from django.core.management import call_command
from runs.services import runs as services

original = services.enqueue_run

def enqueue_interrupted(run_id, **kwargs):
    os.kill(os.getpid(), signal.{signum})  # the run is committed, its tasks not yet sent
    original(run_id, **kwargs)
    print("enqueued", file=sys.stderr, flush=True)

services.enqueue_run = enqueue_interrupted
call_command("eval", "start", "--workspace", "acme", "--pack", "echo", "--deployment", "agent", "--json")
"""


@pytest.mark.slow
@pytest.mark.parametrize("signum", ["SIGINT", "SIGTERM"])
def test_an_interrupt_while_the_committed_run_is_enqueued_names_the_run(personas, signum):
    """Ctrl-C (or SIGTERM) right after the run's commit, while its tasks were enqueued: a
    KeyboardInterrupt traceback (SIGTERM: killed silently), the run's id never printed. The
    signal is now held until the run can be named: the tasks are all sent, then the
    ``interrupted`` error object, exit 3, as the other interrupts. The signal is sent from
    inside the enqueue, so the moment is exact."""
    import subprocess
    import sys

    from tests.processes import ROOT, child_env

    publish(personas.workspace, cases=1)
    hosted(personas.workspace, "http://127.0.0.1:9/agent")
    script = INTERRUPT_WHILE_ENQUEUED.replace("{signum}", signum)
    env = child_env(CELERY_BROKER_URL="memory://", DJANGO_SETTINGS_MODULE="agentclash_site.settings")
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 3, (done.returncode, done.stdout, done.stderr[-3000:])
    run = Run.objects.get()
    error = json.loads(done.stdout)["error"]
    assert error["code"] == "interrupted"
    assert f"run status {run.pk}" in error["message"]
    assert "enqueued" in done.stderr and "Traceback" not in done.stderr
    assert run.status == "queued"  # it goes on
