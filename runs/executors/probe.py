""" "Test connection": one real, tiny request to a deployment, through its executor."""

from __future__ import annotations

import uuid
from datetime import timedelta

from runs.executors.base import (
    CaseInfo,
    CaseInputInfo,
    ChallengeInfo,
    DeploymentTarget,
    ExecutionRequest,
    utc_now,
)

PROBE_CHALLENGE_KEY = "agentclash-connection-test"
PROBE_CASE_KEY = "ping"
PROBE_INSTRUCTIONS = (
    "This is a connection test from AgentClash, not a graded case. Reply with the single word: pong"
)


def probe_request(target: DeploymentTarget) -> ExecutionRequest:
    """A synthetic request: a one-message prompt for chat models, a tiny protocol case for agents."""
    return ExecutionRequest(
        run_id=str(uuid.uuid4()),
        item_id=str(uuid.uuid4()),
        attempt=1,
        deadline=utc_now() + timedelta(seconds=float(target.timeout_seconds) + 5),
        challenge=ChallengeInfo(
            key=PROBE_CHALLENGE_KEY,
            title="Connection test",
            category="connection-test",
            difficulty="easy",
            instructions=PROBE_INSTRUCTIONS,
        ),
        case=CaseInfo(
            key=PROBE_CASE_KEY,
            payload={"value": "ping"},
            inputs=(CaseInputInfo(key="message", kind="text", value="ping"),),
        ),
        deployment=target,
        tool_policy={},
        execution_mode="prompt_eval",
    )
