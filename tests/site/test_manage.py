"""manage.py: collection is off during start-up and back on, with start-up's objects frozen."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_commands_run_with_the_collector_on_and_start_up_frozen() -> None:
    code = "import gc; print(gc.isenabled(), gc.get_freeze_count() > 50_000)"
    env = dict(os.environ, DJANGO_SETTINGS_MODULE="agentclash_site.settings")
    done = subprocess.run(
        [sys.executable, "manage.py", "shell", "--verbosity", "0", "-c", code],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1].split() == ["True", "True"]
