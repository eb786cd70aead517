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


def test_every_page_of_the_demo_renders_with_its_judge(personas, monkeypatch):
    """What `make run` shows a newcomer: the demo's runs, graded with the example agent and the
    example judge, and every overview, case list, case, transcript and row expansion of them answers 200.
    (A judge sample citing a captured file made the demo's case pages 500 while every test
    built its own judge grades.)"""
    from django.test import Client

    from grading import demo as grading_demo
    from grading.models import ModelPrice
    from grading.pricing import DEFAULT_PRICES

    # The admin price table, as its migration seeds it (an earlier transactional test's flush
    # empties it): the demo pack caps its judge spend in dollars, priced from this table.
    for model, price in DEFAULT_PRICES.items():
        ModelPrice.objects.update_or_create(
            model=model,
            defaults={
                "input_usd_per_million": price.input_per_million,
                "output_usd_per_million": price.output_per_million,
            },
        )
    agent_port, judge_port = free_port(), free_port()
    monkeypatch.setenv("AGENTCLASH_DEMO_AGENT_URL", f"http://127.0.0.1:{agent_port}")
    workspace = personas.workspace
    workspace.allow_private_endpoints = True
    workspace.save()
    out = io.StringIO()
    packs_demo.setup(workspace=workspace, user=personas.owner, stdout=out)
    grading_demo.setup(
        workspace=workspace, user=personas.owner, stdout=out, base_url=f"http://127.0.0.1:{judge_port}/v1"
    )
    demo.setup(workspace=workspace, user=personas.owner, stdout=out)
    servers = [
        subprocess.Popen(
            [sys.executable, script, "--port", str(port), "--quiet"],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for script, port in (
            ("examples/agents/hosted_agent.py", agent_port),
            ("examples/judges/heuristic_judge.py", judge_port),
        )
    ]
    try:
        for port in (agent_port, judge_port):
            wait_until(lambda port=port: _port_open(port), timeout=10, message=f"the example on port {port}")
        runs = [drive(run) for run in Run.objects.filter(workspace=workspace).order_by("created_at")]
    finally:
        for server in servers:
            server.terminate()
            server.wait(timeout=10)
    assert {run.status for run in runs} == {"completed"}
    judged = RunItem.objects.filter(
        run__in=runs, grade__expectations__contains=[{"kind": "judge", "passed": True}]
    )
    assert judged.exists()  # the example judge graded something: its samples are on the pages
    client = Client()
    client.force_login(personas.viewer)
    for run in runs:
        assert client.get(f"/runs/{run.pk}/").status_code == 200
        assert client.get(f"/runs/{run.pk}/cases/").status_code == 200
        for item_id in RunItem.objects.filter(run=run).values_list("id", flat=True):
            base = f"/runs/{run.pk}/cases/{item_id}/"
            for url in (base, f"{base}transcript/", f"{base}expectations/"):
                assert client.get(url).status_code == 200, url
