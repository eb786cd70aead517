"""Settings are parsed strictly: a bad value stops start-up with a message naming it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography.fernet import Fernet

from agentclash_site.lib.env import (
    ConfigError,
    env_broker_url,
    env_json_object,
    parse_bool,
    parse_database_url,
)

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    "raw,expected", [("true", True), ("TRUE", True), ("1", True), ("False", False), ("0", False)]
)
def test_it_parses_strict_booleans(raw, expected):
    assert parse_bool("DEBUG", raw) is expected


@pytest.mark.parametrize("raw", ["yes", "ture", "", "2", "off"])
def test_it_refuses_anything_else_as_a_boolean(raw):
    with pytest.raises(ConfigError, match="DEBUG must be true or false"):
        parse_bool("DEBUG", raw)


def test_storage_options_are_a_json_object():
    assert env_json_object("X", {}, {"X": '{"bucket_name": "b"}'}) == {"bucket_name": "b"}
    assert env_json_object("X", {"a": 1}, {}) == {"a": 1}
    with pytest.raises(ConfigError, match="X must be a JSON object, got list"):
        env_json_object("X", {}, {"X": "[1]"})
    with pytest.raises(ConfigError, match="X must be a JSON object"):
        env_json_object("X", {}, {"X": "{bucket"})


def test_it_parses_sqlite_urls_relative_to_the_project(tmp_path):
    config = parse_database_url("sqlite:///var/x.sqlite3", base_dir=tmp_path)
    assert config["NAME"] == str(tmp_path / "var" / "x.sqlite3")
    assert config["OPTIONS"]["transaction_mode"] == "IMMEDIATE"
    assert config["OPTIONS"]["timeout"] >= 20
    assert "journal_mode=WAL" in config["OPTIONS"]["init_command"]


def test_it_parses_postgres_urls(tmp_path):
    config = parse_database_url(
        "postgresql://bob:s%40cret@db.internal:6543/evals?sslmode=require", base_dir=tmp_path
    )
    assert config["ENGINE"] == "django.db.backends.postgresql"
    assert (config["USER"], config["PASSWORD"], config["HOST"], config["PORT"], config["NAME"]) == (
        "bob",
        "s@cret",
        "db.internal",
        "6543",
        "evals",
    )
    assert config["OPTIONS"] == {"sslmode": "require"}


def test_it_names_an_unsupported_database_scheme(tmp_path):
    with pytest.raises(ConfigError, match="unsupported scheme 'mysql'"):
        parse_database_url("mysql://root@localhost/db", base_dir=tmp_path)


def _manage(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k not in {"DEBUG", "SECRET_KEY", "FIELD_ENCRYPTION_KEY"}}
    clean.update(env)
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=clean, capture_output=True, text=True, timeout=120
    )


def test_it_refuses_to_start_without_a_secret_key_when_debug_is_off():
    result = _manage(["check"], {"DEBUG": "false", "ALLOWED_HOSTS": "example.com"})
    assert result.returncode != 0
    assert "SECRET_KEY is required when DEBUG is false" in result.stderr


def test_it_refuses_a_malformed_debug_flag():
    result = _manage(["check"], {"DEBUG": "maybe"})
    assert result.returncode != 0
    assert "DEBUG must be true or false" in result.stderr


def test_it_refuses_a_bad_database_url():
    result = _manage(["check"], {"DATABASE_URL": "oracle://x/y"})
    assert result.returncode != 0
    assert "DATABASE_URL has unsupported scheme 'oracle'" in result.stderr


def test_check_deploy_is_clean_with_just_the_four_production_variables():
    env = {
        "DEBUG": "false",
        "SECRET_KEY": "x7!Qp" * 12,
        "ALLOWED_HOSTS": "evals.example.com",
        "FIELD_ENCRYPTION_KEY": Fernet.generate_key().decode(),
    }
    result = _manage(["check", "--deploy", "--fail-level", "WARNING"], env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_it_refuses_a_field_encryption_key_that_is_not_a_fernet_key():
    env = {"DEBUG": "false", "SECRET_KEY": "x7!Qp" * 12, "FIELD_ENCRYPTION_KEY": "not-a-key"}
    result = _manage(["check"], env)
    assert result.returncode != 0
    assert "FIELD_ENCRYPTION_KEY must be a Fernet key" in result.stderr


@pytest.mark.parametrize(
    "env,named",
    [
        ({"RUNS_SWEEP_SECONDS": "abc"}, "RUNS_SWEEP_SECONDS must be a number"),
        ({"RUNS_CLAIM_MARGIN_SECONDS": "1m"}, "RUNS_CLAIM_MARGIN_SECONDS must be a number"),
        ({"RUNS_SWEEP_SECONDS": "0"}, "RUNS_SWEEP_SECONDS must be a number greater than 0"),
        ({"LOG_LEVEL": "chatty"}, "LOG_LEVEL must be one of DEBUG, INFO, WARNING, ERROR, CRITICAL"),
        ({"DATABASE_URL": "postgres://u@db:abc/agentclash"}, "DATABASE_URL has a port that is not a number"),
        ({"PUBLIC_BASE_URL": "evals.example.com"}, "PUBLIC_BASE_URL must be an absolute http(s) URL"),
        ({"CELERY_BROKER_URL": "bogus://x"}, "CELERY_BROKER_URL has unsupported scheme 'bogus'"),
        ({"CELERY_BROKER_URL": "localhost:6379"}, "CELERY_BROKER_URL must be a broker URL"),
        # a negative max-age went out as "Strict-Transport-Security: max-age=-1", and a
        # negative Celery time limit reached the worker
        ({"SECURE_HSTS_SECONDS": "-1"}, "SECURE_HSTS_SECONDS must be a whole number 0 or more"),
        ({"CELERY_TASK_TIME_LIMIT": "-5"}, "CELERY_TASK_TIME_LIMIT must be a whole number 0 or more"),
        ({"CELERY_TASK_SOFT_TIME_LIMIT": "1.5"}, "CELERY_TASK_SOFT_TIME_LIMIT must be a whole number"),
        # a soft limit at or past the hard one never fires: the task is killed without cleanup
        (
            {"CELERY_TASK_SOFT_TIME_LIMIT": "960", "CELERY_TASK_TIME_LIMIT": "900"},
            "CELERY_TASK_SOFT_TIME_LIMIT (960) must be less than CELERY_TASK_TIME_LIMIT (900)",
        ),
        # Django's own check says so only under `manage.py check`; gunicorn started and every
        # form post from that origin was a 403 CSRF failure
        (
            {"CSRF_TRUSTED_ORIGINS": "evals.example.com"},
            "CSRF_TRUSTED_ORIGINS entries must start with a scheme, such as https://evals.example.com",
        ),
        # a storage backend that is not installed failed at the first upload, with a traceback
        ({"DEFAULT_FILE_STORAGE": "nowhere.backends.Storage"}, "DEFAULT_FILE_STORAGE names module"),
        ({"DEFAULT_FILE_STORAGE": "S3Storage"}, "DEFAULT_FILE_STORAGE must be a dotted path"),
    ],
)
def test_a_malformed_value_stops_start_up_naming_the_variable(env, named):
    result = _manage(["check"], env)
    assert result.returncode == 2, result.stdout + result.stderr
    assert f"configuration error: {named}" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    "argv",
    [
        ["-m", "celery", "-A", "agentclash_site", "worker"],
        ["-c", "import agentclash_site.wsgi"],
        ["-c", "import agentclash_site.asgi"],
    ],
    ids=["celery-worker", "wsgi", "asgi"],
)
def test_a_malformed_value_stops_the_other_entry_points_naming_the_variable(argv):
    # The README's team installation starts `celery -A agentclash_site worker` and a WSGI
    # server: a malformed setting stopped them with a 90-line traceback and exit 1.
    clean = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    clean["DEBUG"] = "yes"
    result = subprocess.run(
        [sys.executable, *argv], cwd=ROOT, env=clean, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 2, result.stdout + result.stderr
    assert "configuration error: DEBUG must be true or false" in result.stderr
    assert "Traceback" not in result.stderr


def _bad_debug_env() -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    clean["DEBUG"] = "yes"
    return clean


def test_a_malformed_value_stops_gunicorn_instead_of_rebooting_its_workers_forever():
    # gunicorn loads the app in each worker and boots a new worker when one exits 2, so a
    # malformed setting printed its line twice a second until someone stopped the server.
    # Only a worker's exit 3 (gunicorn's "Worker failed to boot") stops the master.
    pytest.importorskip("gunicorn")
    result = subprocess.run(
        [sys.executable, "-m", "gunicorn", "agentclash_site.wsgi", "--bind", "127.0.0.1:0", "--workers", "2"],
        cwd=ROOT,
        env=_bad_debug_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 3, result.stderr[-2000:]
    assert "configuration error: DEBUG must be true or false" in result.stderr
    assert result.stderr.count("configuration error") <= 2  # once per worker at most
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("module", ["agentclash_site.wsgi", "agentclash_site.asgi"])
def test_under_gunicorn_a_malformed_value_exits_as_a_failed_worker_boot(module):
    # The same without gunicorn installed: the entry point exits 3 when gunicorn loads it.
    code = f"import sys, types; sys.modules['gunicorn'] = types.ModuleType('gunicorn'); import {module}"
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=_bad_debug_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 3, result.stdout + result.stderr
    assert result.stderr.strip() == "configuration error: DEBUG must be true or false (or 1/0), got 'yes'"


@pytest.mark.parametrize(
    "url",
    [
        "redis://127.0.0.1:6379/0",
        "amqp://guest@h//",
        "filesystem://",
        "sqla+postgresql://h/db",
        "redis://a;redis://b",
    ],
)
def test_any_kombu_broker_url_is_accepted(url):
    assert env_broker_url("CELERY_BROKER_URL", "filesystem://", {"CELERY_BROKER_URL": url}) == url


def test_log_level_takes_any_case():
    result = _manage(["check"], {"LOG_LEVEL": "debug"})
    assert result.returncode == 0, result.stderr


def test_an_empty_public_base_url_is_the_default():
    script = "from django.conf import settings; print(settings.PUBLIC_BASE_URL)"
    clean = {k: v for k, v in os.environ.items() if k != "PUBLIC_BASE_URL"}
    clean.update({"PUBLIC_BASE_URL": " ", "DJANGO_SETTINGS_MODULE": "agentclash_site.settings"})
    result = subprocess.run(
        [sys.executable, "-c", f"import django; django.setup(); {script}"],
        cwd=ROOT, env=clean, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.stdout.strip() == "http://127.0.0.1:8000", result.stderr


def test_empty_storage_variables_are_their_defaults():
    # .env.example lists MEDIA_ROOT=, STATIC_ROOT and DEFAULT_FILE_STORAGE= empty, and an env
    # file (docker --env-file, systemd) passes them so: uploads went to the working directory
    # (Path("") is "."), and every upload failed with "Could not find backend ''".
    script = (
        "from django.conf import settings; from django.core.files.storage import default_storage; "
        "print(settings.MEDIA_ROOT, settings.STATIC_ROOT, type(default_storage._wrapped).__name__ "
        "if default_storage._setup() is None else '')"
    )
    clean = {k: v for k, v in os.environ.items() if k not in {"MEDIA_ROOT", "STATIC_ROOT"}}
    clean.update(
        {"MEDIA_ROOT": "", "STATIC_ROOT": " ", "DEFAULT_FILE_STORAGE": "", "DEFAULT_FILE_STORAGE_OPTIONS": ""}
    )
    clean["DJANGO_SETTINGS_MODULE"] = "agentclash_site.settings"
    result = subprocess.run(
        [sys.executable, "-c", f"import django; django.setup(); {script}"],
        cwd=ROOT, env=clean, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [
        str(ROOT / "var" / "media"),
        str(ROOT / "var" / "staticfiles"),
        "FileSystemStorage",
    ]


@pytest.mark.parametrize("variable", ["AGENTCLASH_FOLLOW_TIMEOUT", "AGENTCLASH_FOLLOW_RECONNECT"])
def test_eval_start_names_a_malformed_follow_variable(variable):
    result = _manage(["eval", "start", "--help"], {variable: "soon"})
    assert result.returncode == 2, result.stdout + result.stderr
    assert f"configuration error: {variable} must be a number" in result.stderr


def test_env_example_documents_every_variable_the_settings_read():
    # The README says .env.example documents every setting; four RUNS_* variables and
    # STATIC_ROOT were read by the settings and missing there.
    import re
    from pathlib import Path

    # The commands and make run's script read some too (AGENTCLASH_FOLLOW_TIMEOUT and
    # AGENTCLASH_FOLLOW_RECONNECT, which the README documents, were missing).
    root = Path(__file__).resolve().parents[2]
    files = [root / "scripts" / "devserver.py"]
    for app in ("agentclash_site", "packs", "runs", "grading"):
        files += sorted((root / app).rglob("*.py"))
    source = "\n".join(f.read_text() for f in files)
    read = set(
        re.findall(r"""(?:env_\w+|environ\.get|environ\.setdefault)\(\s*["']([A-Z][A-Z0-9_]+)["']""", source)
    )
    read |= set(re.findall(r"""environ\[["']([A-Z][A-Z0-9_]+)["']\]""", source))
    test_only = {"AGENTCLASH_TESTING", "TEST_DATABASE_NAME", "DJANGO_SETTINGS_MODULE"}
    documented = set(re.findall(r"^#?\s*([A-Z][A-Z0-9_]+)=", (root / ".env.example").read_text(), re.M))
    assert len(read) > 20
    assert sorted(read - test_only - documented) == []


@pytest.mark.parametrize("module", ["agentclash_site.settings", "tests.settings_filesystem_broker"])
def test_a_worker_on_the_filesystem_broker_looks_for_tasks_ten_times_a_second(module, tmp_path):
    # make run's broker: with kombu's default poll of 1 s and prefetch 1, the worker took at
    # most one task a second, and a run waited behind the demo's tasks for ~13 s.
    script = (
        "from agentclash_site.celery import app; print(app.connection_for_read().transport.polling_interval)"
    )
    clean = {k: v for k, v in os.environ.items() if k != "CELERY_BROKER_URL"}
    clean.update({"DJANGO_SETTINGS_MODULE": module, "TEST_BROKER_DIR": str(tmp_path)})
    result = subprocess.run(
        [sys.executable, "-c", f"import django; django.setup(); {script}"],
        cwd=ROOT, env=clean, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert float(result.stdout.strip()) <= 0.1
