"""`manage.py deployment create`, as spec/interfaces.md §6 pins it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from runs.models import Deployment

pytestmark = pytest.mark.django_db
ROOT = Path(__file__).resolve().parents[2]
SECRET = "sk-CLI-SECRET-0000"


def run(*args: str) -> tuple[int, dict, str]:
    out, err = StringIO(), StringIO()
    try:
        call_command("deployment", "create", *args, "--json", stdout=out, stderr=err)
        code = 0
    except SystemExit as exc:
        code = exc.code
    return code, json.loads(out.getvalue()), out.getvalue() + err.getvalue()


def test_create_prints_the_document_with_the_signing_key(personas, monkeypatch):
    monkeypatch.setenv("AGENT_TOKEN", SECRET)
    code, doc, text = run(
        "--workspace", "acme", "--name", "careful", "--kind", "hosted_http",
        "--endpoint", "https://agent.example.com/run", "--secret-env", "AGENT_TOKEN",
        "--max-in-flight", "4", "--timeout", "30", "--max-attempts", "2", "--evidence-level", "black_box",
        "--config", '{"extra_headers": {"X-Team": "evals"}}',
    )  # fmt: skip
    assert code == 0
    assert set(doc) == {"deployment", "created", "signing_key"}
    assert doc["created"] is True
    d = doc["deployment"]
    assert (d["name"], d["kind"], d["endpoint_url"], d["base_url"]) == (
        "careful", "hosted_http", "https://agent.example.com/run", None,
    )  # fmt: skip
    assert (d["max_in_flight"], d["timeout_seconds"], d["max_attempts"], d["evidence_level"]) == (
        4,
        30.0,
        2,
        "black_box",
    )
    assert d["has_secret"] is True and d["config"] == {"extra_headers": {"X-Team": "evals"}}
    stored = Deployment.objects.get(public_id=d["id"])
    assert stored.get_secret() == SECRET and stored.get_signing_key() == doc["signing_key"]
    assert SECRET not in text


def test_a_rerun_updates_only_the_given_fields_and_prints_no_key(personas):
    run(
        "--workspace", "acme", "--name", "ci", "--kind", "hosted_http", "--endpoint", "https://a.example.com/"
    )
    code, doc, _ = run("--workspace", "acme", "--name", "ci", "--kind", "hosted_http", "--max-attempts", "5")
    assert code == 0
    assert doc["created"] is False and "signing_key" not in doc
    assert (doc["deployment"]["endpoint_url"], doc["deployment"]["max_attempts"]) == (
        "https://a.example.com/",
        5,
    )
    assert Deployment.objects.count() == 1


def test_openai_chat_takes_the_endpoint_as_base_url(personas):
    code, doc, _ = run(
        "--workspace", "acme", "--name", "gpt", "--kind", "openai_chat",
        "--endpoint", "http://127.0.0.1:9000/v1", "--model", "example-arithmetic", "--config", '{"temperature": 0}',
    )  # fmt: skip
    assert code == 0
    assert (doc["deployment"]["base_url"], doc["deployment"]["model"]) == (
        "http://127.0.0.1:9000/v1",
        "example-arithmetic",
    )


def test_trace_import_needs_no_endpoint(personas):
    code, doc, _ = run("--workspace", "acme", "--name", "uploads", "--kind", "trace_import")
    assert code == 0 and doc["deployment"]["endpoint_url"] is None


@pytest.mark.parametrize(
    ("args", "code_name", "field"),
    [
        (["--workspace", "nope", "--name", "x", "--kind", "trace_import"], "unknown_workspace", "workspace"),
        (["--workspace", "acme", "--name", "x", "--kind", "hosted_http"], "missing_url", "endpoint"),
        (["--workspace", "acme", "--name", "x", "--kind", "openai_chat", "--endpoint", "https://x/v1"], "missing_model", "model"),
        (["--workspace", "acme", "--name", "x", "--kind", "trace_import", "--config", "{bad"], "invalid_config", "config"),
        (["--workspace", "acme", "--name", "x", "--kind", "trace_import", "--config", "[1]"], "invalid_config", "config"),
        (["--workspace", "acme", "--name", "x", "--kind", "trace_import", "--max-in-flight", "0"], "invalid_max_in_flight", "max_in_flight"),
        (["--workspace", "acme", "--name", "x", "--kind", "trace_import", "--secret-env", "NO_SUCH_VAR_XYZ"], "missing_secret_env", "secret_env"),
        (["--workspace", "acme", "--name", "x", "--kind", "trace_import", "--timeout", "0"], "invalid_timeout_seconds", "timeout"),
        (["--workspace", "acme", "--name", "x", "--kind", "hosted_http", "--endpoint", "ftp://x"], "invalid_url", "endpoint"),
        (["--workspace", "acme", "--name", "x", "--kind", "trace_import", "--max-attempts", "0"], "invalid_max_attempts", "max_attempts"),
        # an empty variable name (`--secret-env "$VAR"` with VAR unset) was ignored: no secret, exit 0
        (["--workspace", "acme", "--name", "x", "--kind", "trace_import", "--secret-env", ""], "missing_secret_env", "secret_env"),
    ],
)  # fmt: skip
def test_invalid_input_exits_2_with_an_error_object(personas, args, code_name, field):
    code, doc, _ = run(*args)
    assert code == 2
    assert (doc["error"]["code"], doc["error"].get("field")) == (code_name, field)
    # The field is the option's name, and the message names the option the user typed.
    assert doc["error"]["message"].startswith(f"--{field.replace('_', '-')}") or field in (
        "workspace", "config", "secret_env", "model", "max_in_flight", "max_attempts"
    )  # fmt: skip
    assert not Deployment.objects.exists()


def test_an_error_on_a_renamed_option_names_the_option(personas):
    code, doc, _ = run("--workspace", "acme", "--name", "x", "--kind", "trace_import", "--timeout", "-5")
    assert code == 2
    assert doc["error"]["field"] == "timeout"
    assert doc["error"]["message"].startswith("--timeout: ")


def test_usage_errors_exit_2_with_json_on_stdout():
    result = subprocess.run(
        [
            sys.executable,
            "manage.py",
            "deployment",
            "create",
            "--workspace",
            "acme",
            "--name",
            "x",
            "--kind",
            "fax",
            "--json",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "DATABASE_URL": "sqlite:///:memory:"},
    )
    assert result.returncode == 2
    assert json.loads(result.stdout)["error"]["code"] == "usage"


def test_text_output_shows_the_key_once_and_never_the_secret(personas, monkeypatch):
    monkeypatch.setenv("AGENT_TOKEN", SECRET)
    out = StringIO()
    call_command(
        "deployment", "create", "--workspace", "acme", "--name", "careful", "--kind", "hosted_http",
        "--endpoint", "https://agent.example.com/run", "--secret-env", "AGENT_TOKEN", stdout=out,
    )  # fmt: skip
    text = out.getvalue()
    key = Deployment.objects.get(name="careful").get_signing_key()
    assert text.count(key) == 1 and SECRET not in text
    assert "created in acme" in text


def test_an_endpoint_every_call_to_which_will_be_refused_is_warned_on_stderr(personas):
    # The deployment page warns that a loopback endpoint in a workspace refusing private
    # endpoints makes every case a config_error; the CLI (CI's way in) said nothing, and the
    # first sign was a run of config_errors.
    def create(name: str, url: str) -> tuple[dict, str]:
        out, err = StringIO(), StringIO()
        call_command(
            "deployment", "create", "--workspace", "acme", "--name", name, "--kind", "hosted_http",
            "--endpoint", url, "--json", stdout=out, stderr=err,
        )  # fmt: skip
        return json.loads(out.getvalue()), err.getvalue()

    doc, err = create("local", "http://127.0.0.1:8766/agents/careful")
    assert doc["created"] is True  # saved all the same, as the page and the API do
    assert "every call to http://127.0.0.1:8766/agents/careful will be refused" in err
    assert "127.0.0.1 is a loopback address" in err
    assert "python manage.py workspace create acme --allow-private-endpoints" in err
    assert create("public", "https://agent.example.com/run")[1] == ""
    personas.workspace.allow_private_endpoints = True
    personas.workspace.save(update_fields=["allow_private_endpoints"])
    assert create("local", "http://127.0.0.1:8766/agents/careful")[1] == ""
