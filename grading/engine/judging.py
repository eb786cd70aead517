"""The LLM-judge seam (grading.md §6). The judge implementation lives in ``grading.judges``
(``LLMJudge``; no import from here, the engine stays provider-free); this module defines what
``grade_case`` hands it and what it returns.

n_wise judges are not run per case: ``grade_case`` asks ``judge.ranked_result(key)`` (when the
judge has that method) for the result of the rank_case second pass, else leaves them
NOT_EVALUATED, reason ``pending_rank`` (``grading.judges.nwise``).

With ``judge=None`` every judge expectation is NOT_EVALUATED / unavailable, reason
``no_judge_provider``: visible in the grade, never skipped.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from .types import (
    CaseDef,
    Evidence,
    ExpectationResult,
    GradeContext,
    JudgeUsage,
    OutcomeClass,
    ResultKind,
    Status,
)


@dataclass(slots=True)
class JudgeRequest:
    """One judge declaration to run for one case execution.

    ``context_blocks`` are the resolved ``context_from`` references as (id, text), in order;
    ``reference`` is the resolved ``reference_from`` (reference mode); ``resolve_id`` turns a
    §1.2 evidence id into text (None when it does not resolve), for citation checks.
    The judge adds its spend to ``usage`` (never to the agent's metrics).
    """

    key: str
    text: str
    declaration: Any
    evidence: Evidence
    case: CaseDef
    context: GradeContext
    context_blocks: list[tuple[str, str]]
    reference: str | None
    resolve_id: Callable[[str], str | None]
    usage: JudgeUsage = field(default_factory=JudgeUsage)


class Judge(Protocol):
    def evaluate(self, request: JudgeRequest) -> ExpectationResult:
        """Run the judge's samples and return its expectation (kind ``judge``). Synchronous;
        must be safe to call from any thread (``grading.judges.LLMJudge`` runs its HTTP on a
        private event-loop thread)."""
        ...


def no_judge_result(key: str, text: str, mode: str) -> ExpectationResult:
    return ExpectationResult(
        key=key,
        kind=ResultKind.JUDGE,
        text=text,
        status=Status.NOT_EVALUATED,
        outcome_class=OutcomeClass.UNAVAILABLE,
        evidence=(
            f"NOT_EVALUATED: no judge provider configured; {mode} judge {key!r} was not run (set one "
            "on the workspace's Judge provider settings page, or give the grade command --judge-provider)"
        ),
        reason_code="no_judge_provider",
    )
