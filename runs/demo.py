"""Demo step of ``manage.py demo setup`` (after ``packs.demo.setup``): the demo deployments and
one demo run per input set of the demo pack.

The deployments ``careful`` and ``sloppy`` are hosted agents served by
``examples/agents/hosted_agent.py`` (started by ``make run`` through
``scripts/devserver_extra.py``), which replays the recorded answers of each persona under
``/agents/<persona>``. Idempotent: deployments are get-or-created, and a run is launched for an
input set only when the demo workspace has none for it yet, so rerunning ``make run`` does not
pile up runs. The runs are queued now and executed by the worker once it starts.
"""

from __future__ import annotations

import os
from typing import Any

from django.db.models import Max

from packs.models import InputSet, Pack, PackVersion
from runs.models import Deployment, Run
from runs.services.deployments import deployment_create
from runs.services.runs import RunError, run_create

DEMO_PACK = "agent-workbench-demo"
PERSONAS = ("careful", "sloppy")
DEFAULT_AGENT_URL = "http://127.0.0.1:8766"


def agent_url() -> str:
    return os.environ.get("AGENTCLASH_DEMO_AGENT_URL", DEFAULT_AGENT_URL).rstrip("/")


def demo_deployments(workspace: Any, stdout: Any) -> list[Deployment]:
    out = []
    for persona in PERSONAS:
        existing = Deployment.objects.filter(workspace=workspace, name=persona).first()
        if existing is not None:
            out.append(existing)
            continue
        created = deployment_create(
            workspace=workspace,
            name=persona,
            kind="hosted_http",
            url=f"{agent_url()}/agents/{persona}",
            max_in_flight=4,
            timeout_seconds=30,
            # The example agent starts with the worker: leave it a few seconds (backoff 1+2+4+8 s).
            max_attempts=5,
        )
        stdout.write(f"  deployment {persona}: created ({created.deployment.url})\n")
        out.append(created.deployment)
    return out


def setup(*, workspace: Any, user: Any, stdout: Any) -> None:
    pack = Pack.objects.filter(workspace=workspace, slug=DEMO_PACK).first()
    if pack is None:
        stdout.write(f"  demo runs: the {DEMO_PACK} pack is not published; skipped\n")
        return
    number = PackVersion.objects.filter(pack=pack).aggregate(n=Max("number"))["n"]
    version = PackVersion.objects.select_related("pack").get(pack=pack, number=number)
    deployments = demo_deployments(workspace, stdout)
    for input_set in InputSet.objects.filter(version=version).order_by("position", "id"):
        if Run.objects.filter(
            workspace=workspace, pack_version__pack=pack, input_set__key=input_set.key
        ).exists():
            stdout.write(f"  demo run {DEMO_PACK}/{input_set.key}: exists\n")
            continue
        try:
            run = run_create(
                workspace=workspace,
                user=user,
                pack_version=version,
                input_set=str(input_set.public_id),
                deployments=deployments,
                name=f"Demo: {input_set.name or input_set.key}",
            )
        except RunError as exc:
            stdout.write(f"  demo run {DEMO_PACK}/{input_set.key}: not started ({exc.code}: {exc.message})\n")
            continue
        stdout.write(f"  demo run {DEMO_PACK}/{input_set.key}: queued ({run.items_total} cases)\n")
