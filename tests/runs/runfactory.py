"""Small published packs, deployments and runs for the run tests."""

from __future__ import annotations

from typing import Any

import yaml

from packs.services import pack_version_publish
from runs.dispatch import dispatch_lane
from runs.models import Run, RunLane
from runs.services.deployments import deployment_create
from runs.services.runs import run_create


def pack_yaml(
    *,
    slug: str = "echo",
    cases: int = 3,
    sets: int = 1,
    mode: str = "native",
    number: int = 1,
) -> bytes:
    """A pack whose case ``cN`` passes when final_output contains ``answer-N``."""
    doc: dict[str, Any] = {
        "pack": {"slug": slug, "name": slug.title(), "family": "test"},
        "version": {
            "number": number,
            "execution_mode": mode,
            "evaluation_spec": {
                "name": f"{slug}-v{number}",
                "version_number": number,
                "judge_mode": "deterministic",
                "validators": [
                    {
                        "key": "answer",
                        "type": "contains",
                        "target": "final_output",
                        "expected_from": "case.expectations.answer",
                    }
                ],
                "scorecard": {
                    "pass_threshold": 1,
                    "dimensions": [{"key": "correctness", "source": "validators", "validators": ["answer"]}],
                },
            },
        },
        "challenges": [
            {
                "key": "echo",
                "title": "Echo",
                "category": "test",
                "difficulty": "easy",
                "instructions": "Say {{word}}",
            }
        ],
        "input_sets": [
            {
                "key": f"set{s}",
                "name": f"Set {s}",
                "cases": [
                    {
                        "challenge_key": "echo",
                        "case_key": f"c{i}",
                        "payload": {"word": f"answer-{i}"},
                        "expectations": [{"key": "answer", "kind": "text", "value": f"answer-{i}"}],
                    }
                    for i in range(cases)
                ],
            }
            for s in range(sets)
        ],
    }
    return yaml.safe_dump(doc, sort_keys=False).encode()


def publish(workspace: Any, **kwargs: Any) -> Any:
    return pack_version_publish(workspace=workspace, data=pack_yaml(**kwargs)).version


def hosted(workspace: Any, url: str, *, name: str = "agent", **fields: Any) -> Any:
    workspace.allow_private_endpoints = True
    workspace.save(update_fields=["allow_private_endpoints"])
    fields.setdefault("timeout_seconds", 5)
    return deployment_create(workspace=workspace, name=name, kind="hosted_http", url=url, **fields).deployment


def echo_answer(recorded: Any) -> dict[str, Any]:
    """The right answer: the rendered instructions end with the expected word."""
    instructions = recorded.json["challenge"]["instructions"]
    return {"final_output": instructions.split()[-1]}


def create_run(workspace: Any, version: Any, deployments: list[Any], **kwargs: Any) -> Run:
    kwargs.setdefault("enqueue", False)
    return run_create(workspace=workspace, user=None, pack_version=version, deployments=deployments, **kwargs)


def drive(run: Run, *, slices: int = 20) -> Run:
    """Dispatch every calling lane until nothing is left (eagerly, in this process)."""
    for _ in range(slices):
        lanes = list(
            RunLane.objects.filter(run=run, status__in=["queued", "running"]).exclude(
                deployment_kind="trace_import"
            )
        )
        if not lanes:
            break
        for lane in lanes:
            dispatch_lane(lane.pk, time_slice=10)
    run.refresh_from_db()
    return run
