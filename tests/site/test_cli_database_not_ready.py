"""A command that needs the database, run on one that was never migrated, prints the error
object of spec/interfaces.md §2 and exits 2 instead of an OperationalError traceback."""

from __future__ import annotations

import json

import pytest

from tests.processes import manage_on_sqlite

NOT_READY = {
    "error": {
        "code": "database_not_ready",
        "message": "the database has no tables yet: run python manage.py migrate",
    }
}
RUN_ID = "00000000-0000-0000-0000-000000000000"
COMMANDS = {
    "eval start": ["eval", "start", "--workspace", "w", "--pack", "p", "--deployment", "d"],
    "run status": ["run", "status", RUN_ID],
    "run export": ["run", "export", RUN_ID, "--format", "csv"],
    "pack publish": ["pack", "publish", "examples/packs/invoice-totals.zip", "--workspace", "w"],
    "workspace create": ["workspace", "create", "w"],
    "token create": ["token", "create", "u"],
    "deployment create": [
        "deployment",
        "create",
        "--workspace",
        "w",
        "--name",
        "n",
        "--kind",
        "trace_import",
    ],
}


@pytest.fixture
def empty_database(tmp_path):
    (tmp_path / "lite.sqlite3").touch()
    return tmp_path


@pytest.mark.parametrize(
    "name", ["eval start", "run status", "pack publish", "workspace create", "token create"]
)
def test_a_json_command_on_an_unmigrated_database_prints_database_not_ready(empty_database, name):
    done = manage_on_sqlite(empty_database, *COMMANDS[name], "--json")
    assert done.returncode == 2, done.stderr[-2000:]
    assert json.loads(done.stdout) == NOT_READY
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("name", ["run export", "deployment create"])
def test_without_json_it_is_readable_text_with_the_same_exit_code(empty_database, name):
    done = manage_on_sqlite(empty_database, *COMMANDS[name])
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stdout == ""
    assert done.stderr.strip() == (
        "error: the database has no tables yet: run python manage.py migrate (database_not_ready)"
    )


def test_a_database_migrated_only_in_part_says_how_many_migrations_are_missing(empty_database):
    assert manage_on_sqlite(empty_database, "migrate", "auth", "--noinput", "-v", "0").returncode == 0
    done = manage_on_sqlite(empty_database, *COMMANDS["workspace create"], "--json")
    assert done.returncode == 2, done.stderr[-2000:]
    error = json.loads(done.stdout)["error"]
    assert error["code"] == "database_not_ready"
    assert error["message"].startswith("the database is not migrated (")
    assert error["message"].endswith(" migrations not applied): run python manage.py migrate")


def test_commands_that_need_no_database_still_work_on_it(empty_database):
    done = manage_on_sqlite(empty_database, "pack", "validate", "examples/packs/invoice-totals.zip", "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout)["valid"] is True


def _closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize(
    ("name", "exit_code"), [("run status", 2), ("workspace create", 2), ("eval start", 3)]
)
def test_a_database_that_cannot_be_reached_is_database_unavailable_not_a_traceback(tmp_path, name, exit_code):
    import os
    import subprocess
    import sys

    from tests.processes import ROOT

    urls = {
        "postgresql": f"postgresql://postgres@127.0.0.1:{_closed_port()}/nothing",
        "sqlite": f"sqlite:///{tmp_path}",  # a directory: no database file can be opened there
    }
    for url in urls.values():
        env = {**os.environ, "DATABASE_URL": url, "DJANGO_SETTINGS_MODULE": "agentclash_site.settings"}
        done = subprocess.run(
            [sys.executable, "manage.py", *COMMANDS[name], "--json"],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert done.returncode == exit_code, (url, done.stderr[-2000:])
        error = json.loads(done.stdout)["error"]
        assert error["code"] == "database_unavailable"
        assert error["message"].startswith("cannot reach the database (")
        assert "check DATABASE_URL" in error["message"]
        assert "Traceback" not in done.stderr
