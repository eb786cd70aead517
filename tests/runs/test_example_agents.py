"""The example agents, started as real processes on free loopback ports and driven
through the executors exactly as runs drive deployments."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from agentclash_site.lib.outbound import OutboundClient
from runs.deployment_config import DeploymentConfig
from runs.executors import CaseInfo, ChallengeInfo, DeploymentTarget, ExecutionRequest, executor_for
from tests.processes import ROOT, free_port, wait_until

AGENTS = ROOT / "examples" / "agents"


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


@contextmanager
def example(script: str, *args: str) -> Iterator[int]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, str(AGENTS / script), "--port", str(port), "--quiet", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        wait_until(
            lambda: proc.poll() is not None or _listening(port), timeout=15, message=f"{script} on {port}"
        )
        assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
        yield port
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
        if proc.stderr:
            proc.stderr.close()


def execute(
    target: DeploymentTarget, *, challenge: str = "word-problem", case: str = "crates", instructions: str = ""
):
    request = ExecutionRequest(
        run_id="r1",
        item_id="i1",
        attempt=1,
        deadline=datetime.now(UTC) + timedelta(minutes=1),
        challenge=ChallengeInfo(key=challenge, title="t", instructions=instructions),
        case=CaseInfo(key=case, payload={}),
        deployment=target,
    )

    async def go():
        async with OutboundClient() as client:
            return await executor_for(target.kind).execute(request, client=client)

    return asyncio.run(go())


@pytest.fixture
def packs_dir(tmp_path: Path) -> Path:
    pack = tmp_path / "mental-math"
    pack.mkdir()
    lines = [
        {"deployment": "careful", "challenge_key": "word-problem", "case_key": "crates", "final_output": "36",
         "tool_calls": [{"name": "calculator", "args": {"expr": "12*3"}, "result": "36"}]},
        {"deployment": "sloppy", "challenge_key": "word-problem", "case_key": "crates", "final_output": "15"},
        {"deployment": "careful", "case_key": "pens", "final_output": "14"},
        {"deployment": "careful", "challenge_key": "word-problem", "case_key": "crates", "repetition": 2, "final_output": "37"},
    ]  # fmt: skip
    (pack / "results.jsonl").write_text("\n".join(json.dumps(line) for line in lines) + "\nnot json\n")
    return tmp_path


def hosted(port: int, persona: str, **overrides) -> DeploymentTarget:
    fields = dict(
        kind="hosted_http",
        url=f"http://127.0.0.1:{port}/agents/{persona}",
        allow_private=True,
        timeout_seconds=10,
    )
    fields.update(overrides)
    return DeploymentTarget(**fields)


def test_the_hosted_agent_replays_each_personas_recording(packs_dir):
    with example("hosted_agent.py", "--packs-dir", str(packs_dir)) as port:
        careful = execute(hosted(port, "careful"))
        sloppy = execute(hosted(port, "sloppy"))
        pens = execute(hosted(port, "careful"), case="pens", challenge="other")
        unknown = execute(hosted(port, "careful"), case="never-recorded")
    assert careful.ok and careful.evidence.final_output == "36"  # repetition 1 wins
    assert [c.name for c in careful.evidence.tool_calls] == ["calculator"]
    assert sloppy.evidence.final_output == "15"
    assert pens.evidence.final_output == "14"  # a line without challenge_key matches any challenge
    assert unknown.ok and "don't know" in unknown.evidence.final_output


def test_the_hosted_agent_verifies_signatures_when_given_a_key(packs_dir):
    with example("hosted_agent.py", "--packs-dir", str(packs_dir), "--signing-key", "k-123") as port:
        good = execute(hosted(port, "careful", signing_key="k-123"))
        bad = execute(hosted(port, "careful", signing_key="wrong"))
        missing = execute(hosted(port, "careful"))
    assert good.ok
    assert (bad.category, bad.status_code) == ("config_error", 401)
    assert missing.status_code == 401


def test_the_hosted_agent_can_fail_to_demonstrate_retries(packs_dir):
    with example("hosted_agent.py", "--packs-dir", str(packs_dir), "--fail-rate", "1") as port:
        outcome = execute(hosted(port, "careful"))
    assert (outcome.category, outcome.status_code, outcome.retry_after) == ("infra_error", 503, 1.0)


def test_the_hosted_agent_reads_the_real_example_packs_if_present():
    recordings = sorted((ROOT / "examples" / "packs").glob("*/results.jsonl"))
    if not recordings:
        pytest.skip("no example packs with results.jsonl yet")
    first = next(json.loads(line) for line in recordings[0].read_text().splitlines() if line.strip())
    with example("hosted_agent.py") as port:
        outcome = execute(
            hosted(port, first.get("deployment") or "default"),
            challenge=first.get("challenge_key") or "",
            case=first["case_key"],
        )
    assert outcome.ok, outcome.error


def chat(port: int, path: str = "/v1", **overrides) -> DeploymentTarget:
    fields = dict(
        kind="openai_chat",
        url=f"http://127.0.0.1:{port}{path}",
        model="example-arithmetic",
        allow_private=True,
        timeout_seconds=10,
        config=DeploymentConfig(temperature=0),
    )
    fields.update(overrides)
    return DeploymentTarget(**fields)


@pytest.mark.parametrize(
    ("question", "answer"),
    [
        ("A crate holds 12 apples. How many apples are in 3 crates?", "36"),
        ("Tom has 5 marbles and finds 7 more. How many marbles in total?", "12"),
        ("Sam had 10 sweets and ate 4. How many are left?", "6"),
        ("24 cookies are split equally between 4 friends. How many does each get?", "6"),
        # the deliberate weakness: only the first two numbers are used (right answer: 14)
        ("A shop has 3 boxes with 4 pens each and 2 loose pens. How many pens in total?", "12"),
    ],
)
def test_the_example_chat_server_answers_arithmetic_and_is_deterministically_wrong_on_some(question, answer):
    with example("openai_compatible.py") as port:
        outcome = execute(chat(port), instructions=question)
    assert outcome.ok, outcome.error
    assert outcome.evidence.final_output == answer
    assert outcome.evidence.metrics.model == "example-arithmetic (not a model)"
    assert outcome.evidence.metrics.total_tokens > 0


def test_the_example_chat_server_serves_the_unversioned_path_and_checks_the_key():
    with example("openai_compatible.py", "--api-key", "demo-key") as port:
        ok = execute(chat(port, path="", secret="demo-key"), instructions="2 plus 2")
        denied = execute(chat(port, secret="wrong"), instructions="2 plus 2")
    assert ok.ok and ok.evidence.final_output == "4"
    assert (denied.category, denied.status_code) == ("config_error", 401)
