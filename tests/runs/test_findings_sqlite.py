"""The probe findings document is assembled inside the database on SQLite too (the embedded
default of ``make run``): a child process on a fresh SQLite file migrates, publishes a pack,
probes a run and a later run copies the findings."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.processes import ROOT

SCRIPT = """
import json
from agentclash_site.workspaces.models import Workspace
from runs.models import Run
from runs.probing import probe_run
from tests.runs.runfactory import create_run, hosted, publish

ws = Workspace.objects.create(slug="lite", name="Lite")
version = publish(ws, cases=3)
dep = hosted(ws, "http://127.0.0.1:9/")
run = create_run(ws, version, [dep])
outcome = probe_run(run.pk)
stored = Run.objects.get(pk=run.pk).case_findings
again = create_run(ws, version, [dep])
print(json.dumps({
    "outcome": outcome,
    "again": probe_run(again.pk),
    "keys": sorted(stored),
    "first": stored["echo\\x1fc0"],
    "copied": Run.objects.get(pk=again.pk).case_findings == stored,
}))
"""


def test_findings_are_stored_and_copied_on_sqlite(tmp_path):
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{tmp_path / 'lite.sqlite3'}",
        "DJANGO_SETTINGS_MODULE": "agentclash_site.settings",
        "PYTHONUNBUFFERED": "1",
    }
    manage = [sys.executable, "manage.py"]
    done = subprocess.run([*manage, "migrate", "--noinput", "-v", "0"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    done = subprocess.run([*manage, "shell", "-c", SCRIPT], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["outcome"] == "computed"
    assert result["keys"] == ["echo\x1fc0", "echo\x1fc1", "echo\x1fc2"]
    assert result["first"] and result["first"][0]["finding"] == "trivially_satisfied"
    assert result["again"] == "nothing to do" and result["copied"] is True
