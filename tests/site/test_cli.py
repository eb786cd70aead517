"""`workspace create` and `token create`, as spec/interfaces.md §6 pins them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from agentclash_site.workspaces.models import ApiToken, Membership, Workspace, hash_token
from tests.commands import json_command as run

pytestmark = pytest.mark.django_db
ROOT = Path(__file__).resolve().parents[2]


def test_workspace_create_prints_the_document_and_reruns_update_only_given_flags(personas):
    code, doc = run("workspace", "create", "evals", "--name", "Evals", "--owner", "olive", "--json")
    assert code == 0
    assert doc == {
        "workspace": {"slug": "evals", "name": "Evals", "allow_private_endpoints": False},
        "created": True,
    }
    assert Membership.objects.get(workspace__slug="evals", user=personas.owner).role == "owner"

    code, doc = run("workspace", "create", "evals", "--allow-private-endpoints", "--json")
    assert code == 0
    assert doc == {
        "workspace": {"slug": "evals", "name": "Evals", "allow_private_endpoints": True},
        "created": False,
    }


@pytest.mark.parametrize("slug", ["Bad", "a_b", "x" * 64, "", "é"])
def test_workspace_create_refuses_a_bad_slug_with_exit_2(slug):
    code, doc = run("workspace", "create", slug, "--json")
    assert code == 2
    assert doc["error"]["code"] == "invalid_slug"
    assert not Workspace.objects.filter(slug=slug).exists()


def test_workspace_create_refuses_an_unknown_owner():
    code, doc = run("workspace", "create", "evals", "--owner", "nobody", "--json")
    assert code == 2
    assert doc["error"]["code"] == "unknown_user"
    assert not Workspace.objects.filter(slug="evals").exists()


def test_token_create_prints_the_secret_once_and_stores_only_its_hash(personas):
    code, doc = run("token", "create", "olive", "--workspace", "acme", "--name", "ci", "--json")
    assert code == 0
    assert set(doc) == {"token", "user", "workspace", "name"}
    assert (doc["user"], doc["workspace"], doc["name"]) == ("olive", "acme", "ci")
    token = ApiToken.objects.get(digest=hash_token(doc["token"]))
    assert token.workspace == personas.workspace


def test_token_create_refuses_unknown_users_and_workspaces(personas):
    assert run("token", "create", "nobody", "--json")[0] == 2
    code, doc = run("token", "create", "olive", "--workspace", "nope", "--json")
    assert code == 2
    assert doc["error"]["code"] == "unknown_workspace"


def test_usage_errors_exit_2_with_a_json_error_on_stdout():
    result = subprocess.run(
        [sys.executable, "manage.py", "token", "create", "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    assert json.loads(result.stdout)["error"]["code"] == "usage"


def test_an_abbreviated_option_is_not_taken_for_another():
    """argparse took ``--jso`` for ``--json`` (and ``--work`` for ``--workspace``): a script's
    abbreviation would change meaning when an option sharing it is added. Only whole option
    names are read now; an abbreviation is a usage error naming it."""
    result = subprocess.run(
        [sys.executable, "manage.py", "token", "create", "olive", "--work", "acme", "--jso"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    assert result.stdout == ""
    assert "unrecognized arguments: --work acme --jso" in result.stderr


@pytest.mark.parametrize(
    ("argv", "field"),
    [
        (["eval", "start", "--workspace", b"x\xffy", "--pack", "p", "--deployment", "d"], "workspace"),
        (
            [
                "eval",
                "start",
                "--workspace",
                "w",
                "--pack",
                "p",
                "--deployment",
                "d",
                "--deployment",
                b"\xfe",
            ],
            "deployment",
        ),
        (["deployment", "create", "--workspace", "w", "--name", b"a\xff", "--kind", "trace_import"], "name"),
        (["run", "status", b"\xff"], "run"),
        (["workspace", "create", b"w\xff"], "slug"),
    ],
)
def test_a_text_argument_that_is_not_utf8_is_a_usage_error(argv, field, tmp_path):
    """Bytes that are not UTF-8 reach Python as lone surrogates, which reached a database
    query and ended the command in a traceback; they are a usage error naming the option."""
    env = {
        "PATH": "/usr/bin:/bin",
        "DATABASE_URL": f"sqlite:///{tmp_path}/db.sqlite3",
        "CELERY_BROKER_URL": "memory://",
    }
    done = subprocess.run(
        [sys.executable, "manage.py", *argv, "--json"], cwd=ROOT, env=env, capture_output=True, timeout=120
    )
    assert done.returncode == 2, done.stderr[-2000:]
    error = json.loads(done.stdout)["error"]
    assert (error["code"], error["field"]) == ("usage", field)
    assert error["message"].startswith(f"{field} is not UTF-8 text (") and "\ufffd" in error["message"]


def test_a_path_argument_may_hold_any_bytes(tmp_path):
    """File names are bytes: a pack at a path that is not UTF-8 is read as any other."""
    pack = (ROOT / "examples" / "packs" / "mental-math" / "pack.yaml").read_bytes()
    folder = tmp_path / "p\udcffq"  # the name Python gives the bytes p\xffq
    folder.mkdir()
    (folder / "pack.yaml").write_bytes(pack)
    done = subprocess.run(
        [sys.executable, "manage.py", "pack", "validate", bytes(tmp_path) + b"/p\xffq", "--json"],
        cwd=ROOT,
        env={"PATH": "/usr/bin:/bin"},
        capture_output=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout)["valid"] is True
