"""The probe findings document is assembled inside the database on SQLite too (the embedded
default of ``make run``): a child process on a fresh SQLite file migrates, publishes a pack,
probes a run and a later run copies the findings."""

from __future__ import annotations

from tests.processes import run_on_sqlite

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
    result = run_on_sqlite(tmp_path, SCRIPT)
    assert result["outcome"] == "computed"
    assert result["keys"] == ["echo\x1fc0", "echo\x1fc1", "echo\x1fc2"]
    assert result["first"] and result["first"][0]["finding"] == "trivially_satisfied"
    assert result["again"] == "nothing to do" and result["copied"] is True
