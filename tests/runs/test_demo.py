"""The demo step: deployments and one run per input set of the demo pack, idempotent, and the
runs complete with graded results against the real example agent."""

from __future__ import annotations

import io
import subprocess
import sys

import pytest

from packs import demo as packs_demo
from runs import demo
from runs.models import Deployment, Run, RunItem
from tests.processes import ROOT, free_port, wait_until
from tests.runs.runfactory import drive

pytestmark = pytest.mark.django_db(transaction=True)


def _port_open(port: int) -> bool:
    import socket

    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


def test_demo_setup_is_idempotent_and_its_runs_complete(personas, monkeypatch):
    port = free_port()
    monkeypatch.setenv("AGENTCLASH_DEMO_AGENT_URL", f"http://127.0.0.1:{port}")
    workspace = personas.workspace
    workspace.allow_private_endpoints = True
    workspace.save()
    out = io.StringIO()
    packs_demo.setup(workspace=workspace, user=personas.owner, stdout=out)
    demo.setup(workspace=workspace, user=personas.owner, stdout=out)
    runs = list(Run.objects.filter(workspace=workspace))
    assert len(runs) == 4  # one per input set of the demo pack
    assert sorted(Deployment.objects.filter(workspace=workspace).values_list("name", flat=True)) == [
        "careful",
        "sloppy",
    ]
    demo.setup(workspace=workspace, user=personas.owner, stdout=out)
    assert Run.objects.filter(workspace=workspace).count() == 4
    assert "exists" in out.getvalue()

    agent = subprocess.Popen(
        [sys.executable, "examples/agents/hosted_agent.py", "--port", str(port), "--quiet"],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_until(lambda: _port_open(port), timeout=10, message="the example agent")
        run = drive(runs[0])
    finally:
        agent.terminate()
        agent.wait(timeout=10)
    assert run.status == "completed"
    statuses = set(RunItem.objects.filter(run=run).values_list("status", flat=True))
    assert "PASSED" in statuses and "" not in statuses
