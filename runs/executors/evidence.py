"""The one place executors turn a response into ``Evidence``.

Wraps ``grading.engine.evidence.evidence_from_response`` (the single door for the
agent-protocol response shape); its ``ProtocolError`` is a config_error.
"""

from __future__ import annotations

from typing import Any

from grading.engine.evidence import ProtocolError, evidence_from_response
from grading.engine.types import Evidence, Timing
from runs.executors.base import ExecutionRequest

__all__ = ["ProtocolError", "build_evidence", "protocol_problem"]


def protocol_problem(response: dict[str, Any]) -> tuple[str, str] | None:
    """The Outcomes-table checks, as ``(error_code, message)``, before the full parse."""
    if "final_output" not in response:
        return "missing_final_output", "the response has no final_output"
    calls = response.get("tool_calls")
    if response.get("invocations") is not None and isinstance(calls, list) and calls:
        return (
            "invocations_with_tool_calls",
            "the response has both invocations and a non-empty top-level tool_calls",
        )
    return None


def build_evidence(
    response: dict[str, Any],
    *,
    request: ExecutionRequest,
    timing: Timing,
    system_prompt: str | None = None,
) -> Evidence:
    """Raises ``ProtocolError`` when the body is not the protocol's."""
    target = request.deployment
    return evidence_from_response(
        response,
        deployment_kind=target.kind,
        evidence_level=target.evidence_level,
        rendered_instructions=request.challenge.instructions,
        system_prompt=system_prompt,
        tool_policy=dict(request.tool_policy),
        working_directory=request.working_directory,
        timing=timing,
    )
