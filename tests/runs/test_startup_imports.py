"""CLI start-up stays light: creating a run from ``eval start`` must not import the pack
validator's models, the grading engine or the HTTP client (each costs a large share of a
command's ~1 s start-up; the worker and the validator import them where they are used)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import packs.bundle

ROOT = Path(__file__).resolve().parent.parent

HEAVY = ("packs.bundle.models", "grading.engine", "aiohttp")


def test_lazy_names_match_all() -> None:
    assert sorted(packs.bundle.__all__) == sorted(packs.bundle._LAZY)
    for name in packs.bundle.__all__:
        assert getattr(packs.bundle, name) is not None
    try:
        packs.bundle.no_such_name  # noqa: B018
    except AttributeError as exc:
        assert "no_such_name" in str(exc)
    else:
        raise AssertionError("an unknown attribute must raise AttributeError")


def test_eval_command_imports_stay_light() -> None:
    code = (
        "import json, sys, django; django.setup();"
        "import runs.management.commands.eval;"
        f"print(json.dumps([m for m in {list(HEAVY)!r} if m in sys.modules]))"
    )
    env = dict(os.environ, DJANGO_SETTINGS_MODULE="agentclash_site.settings")
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []
