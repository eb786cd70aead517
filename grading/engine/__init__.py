"""Pure-Python grading engine (spec/grading.md). No Django import below this package."""

from __future__ import annotations

from .evidence import ProtocolError, evidence_from_response
from .grade import CaseGrade, grade_case
from .judging import Judge, JudgeRequest
from .refs import (
    Ref,
    Resolved,
    parse_reference,
    render_template,
    resolve_evidence_id,
    resolve_reference,
)
from .types import (
    CaseDef,
    Evidence,
    ExpectationResult,
    GradeContext,
    OutcomeClass,
    ResultKind,
    Status,
    Validity,
)

__all__ = [
    "CaseDef",
    "CaseGrade",
    "Evidence",
    "ExpectationResult",
    "GradeContext",
    "Judge",
    "JudgeRequest",
    "OutcomeClass",
    "ProtocolError",
    "Ref",
    "Resolved",
    "ResultKind",
    "Status",
    "Validity",
    "evidence_from_response",
    "grade_case",
    "parse_reference",
    "render_template",
    "resolve_evidence_id",
    "resolve_reference",
]
