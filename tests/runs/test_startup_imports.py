"""CLI start-up stays light: creating a run from ``eval start`` must not import the pack
validator's models, the grading engine or the HTTP client (each costs a large share of a
command's ~1 s start-up; the worker and the validator import them where they are used)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

import grading.engine
import packs.bundle

ROOT = Path(__file__).resolve().parents[2]

HEAVY = (
    "packs.bundle.models",
    "grading.engine.grade",
    "grading.engine.spec",
    "aiohttp",
    "pydantic",
    "cryptography",
)


@pytest.mark.parametrize("package", [packs.bundle, grading.engine])
def test_lazy_names_match_all(package: ModuleType) -> None:
    assert sorted(package.__all__) == sorted(package._LAZY)
    for name in package.__all__:
        assert getattr(package, name) is not None
    with pytest.raises(AttributeError, match="no_such_name"):
        package.no_such_name  # noqa: B018


def test_eval_command_imports_stay_light() -> None:
    code = (
        "import json, sys, django; django.setup();"
        # the command, the task module run_create enqueues through, the run document
        "import runs.management.commands.eval, runs.tasks, runs.documents;"
        f"print(json.dumps([m for m in {list(HEAVY)!r} if m in sys.modules]))"
    )
    env = dict(os.environ, DJANGO_SETTINGS_MODULE="agentclash_site.settings")
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []


@pytest.mark.parametrize(
    ("broker", "module"),
    [("redis://127.0.0.1:9/0", "kombu.transport.redis"), ("filesystem://", "kombu.transport.filesystem")],
)
def test_the_broker_transport_is_preloaded_on_a_thread(broker: str, module: str) -> None:
    """``eval start`` imports the broker's transport on a thread while it creates the run;
    no connection is made (port 9 would refuse it), and a scheme kombu does not know is
    left to the publish to report."""
    code = (
        "import sys, django; django.setup();"
        "from agentclash_site.celery import app, preload_broker_transport;"
        f"assert {module!r} not in sys.modules;"
        "t = preload_broker_transport(); t.join(60); assert not t.is_alive();"
        f"print({module!r} in sys.modules);"
        "app.conf.broker_url = 'nosuchtransport://x';"
        "t = preload_broker_transport(); t.join(60); print(t.is_alive())"
    )
    env = dict(os.environ, DJANGO_SETTINGS_MODULE="agentclash_site.settings", CELERY_BROKER_URL=broker)
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["True", "False"]
