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
