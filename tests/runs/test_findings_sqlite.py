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


WHILE_PROBING = """
import json, sqlite3
from django.db import connection
from agentclash_site.workspaces.models import Workspace
from runs import probing
from runs.models import Run
from tests.runs.runfactory import create_run, hosted, publish

ws = Workspace.objects.create(slug="lite", name="Lite")
version = publish(ws, cases=3)
run = create_run(ws, version, [hosted(ws, "http://127.0.0.1:9/")])
seen = []
probe_case = probing.probe_case

def probe(*args, **kwargs):
    # what a write of another process (the web server's) meets while a case is probed
    other = sqlite3.connect(connection.settings_dict["NAME"], timeout=0, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
        other.execute("ROLLBACK")
        seen.append("free")
    except sqlite3.OperationalError as exc:
        seen.append(str(exc))
    finally:
        other.close()
    return probe_case(*args, **kwargs)

probing.probe_case = probe
outcome = probing.probe_run(run.pk)
print(json.dumps({"outcome": outcome, "seen": seen, "keys": sorted(Run.objects.get(pk=run.pk).case_findings)}))
"""


def test_probing_a_run_on_sqlite_leaves_the_write_lock_to_others(tmp_path):
    # Probing every case took the one write lock of the database for the whole pass (about
    # a second for 2,000 cases): the web server's writes (an autosave, a publish) waited.
    result = run_on_sqlite(tmp_path, WHILE_PROBING)
    assert result["outcome"] == "computed"
    assert result["seen"] == ["free", "free", "free"]
    assert result["keys"] == ["echo\x1fc0", "echo\x1fc1", "echo\x1fc2"]
