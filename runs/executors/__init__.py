"""Agent adapters: one executor per deployment kind (spec/agent-protocol.md).

Public API::

    from runs.executors import executor_for, ExecutionRequest, AttemptOutcome
    outcome = await executor_for(target.kind).execute(request, client=client)

``client`` is an ``agentclash_site.lib.outbound.OutboundClient`` (share one per event
loop with ``client_for_loop()``).
"""

from __future__ import annotations

from runs.executors.base import (
    NO_VALUE,
    AssetLink,
    AttemptCategory,
    AttemptOutcome,
    CaseInfo,
    CaseInputInfo,
    ChallengeInfo,
    DeploymentTarget,
    ExecutionRequest,
    Executor,
    NotExecutable,
)
from runs.executors.hosted_http import HostedHttpExecutor
from runs.executors.openai_chat import OpenAIChatExecutor
from runs.executors.trace_import import TraceImportExecutor

EXECUTORS: dict[str, Executor] = {
    "hosted_http": HostedHttpExecutor(),
    "openai_chat": OpenAIChatExecutor(),
    "trace_import": TraceImportExecutor(),
}


def executor_for(kind: str) -> Executor:
    try:
        return EXECUTORS[kind]
    except KeyError:
        raise ValueError(f"no executor for deployment kind {kind!r}") from None


__all__ = [
    "EXECUTORS",
    "NO_VALUE",
    "AssetLink",
    "AttemptCategory",
    "AttemptOutcome",
    "CaseInfo",
    "CaseInputInfo",
    "ChallengeInfo",
    "DeploymentTarget",
    "ExecutionRequest",
    "Executor",
    "HostedHttpExecutor",
    "NotExecutable",
    "OpenAIChatExecutor",
    "TraceImportExecutor",
    "executor_for",
]
