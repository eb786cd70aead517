"""The exports on SQLite (the embedded default of ``make run``): the JUnit writer reads the
grade's expectations there too, and no export holds a transaction (Django opens them
IMMEDIATE there: a write lock for the whole download). A child process on a fresh file."""

from __future__ import annotations

from tests.processes import run_on_sqlite

SCRIPT = """
import json
import xml.etree.ElementTree as ET
from django.db import connection
from agentclash_site.workspaces.models import Workspace
from runs.exports import FORMATS, export_stream
from runs.models import RunItem
from runs.services.deployments import deployment_create
from tests.runs.runfactory import create_run, publish

ws = Workspace.objects.create(slug="lite", name="Lite")
version = publish(ws, cases=2)
deployment = deployment_create(workspace=ws, name="ci", kind="trace_import").deployment
run = create_run(ws, version, [deployment])
first = RunItem.objects.filter(run=run).order_by("id").first()
grade = {"status": "FAILED", "expectations": [
    {"key": "answer", "status": "FAILED", "text": "contains", "evidence": "not found: 日本"},
    {"key": "other", "status": "PASSED", "text": "x", "evidence": "ok"},
]}
RunItem.objects.filter(pk=first.pk).update(status="FAILED", state="done", grade=grade)
atomic = []
for fmt in FORMATS:
    stream = export_stream(run, fmt)
    chunks = [next(stream)]
    atomic.append(connection.in_atomic_block)
    chunks += list(stream)
    if fmt == "junit":
        failure = ET.fromstring("".join(chunks)).find("testsuite/testcase/failure")
print(json.dumps({"message": failure.get("message"), "text": failure.text, "atomic": atomic}))
"""


def test_exports_on_sqlite_read_the_expectations_and_hold_no_transaction(tmp_path):
    result = run_on_sqlite(tmp_path, SCRIPT)
    assert result["message"] == "failed: answer"
    assert result["text"] == "answer: FAILED: contains\n  evidence: not found: 日本"
    assert result["atomic"] == [False, False, False, False]
