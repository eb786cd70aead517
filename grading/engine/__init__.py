"""Pure-Python grading engine (spec/grading.md). No Django import below this package.

The names below load their modules on first use (PEP 562): ``from grading.engine.aggregate
import ...`` (result pages, task modules) does not pay for the validators, the rules and the
spec models (~0.4 s), which the worker and the validator import where they grade.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .lazy import lazy_attributes

if TYPE_CHECKING:
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

_LAZY = {
    "CaseDef": ".types",
    "CaseGrade": ".grade",
    "Evidence": ".types",
    "ExpectationResult": ".types",
    "GradeContext": ".types",
    "Judge": ".judging",
    "JudgeRequest": ".judging",
    "OutcomeClass": ".types",
    "ProtocolError": ".evidence",
    "Ref": ".refs",
    "Resolved": ".refs",
    "ResultKind": ".types",
    "Status": ".types",
    "Validity": ".types",
    "evidence_from_response": ".evidence",
    "grade_case": ".grade",
    "parse_reference": ".refs",
    "render_template": ".refs",
    "resolve_evidence_id": ".refs",
    "resolve_reference": ".refs",
}

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


__getattr__, __dir__ = lazy_attributes(__name__, globals(), _LAZY)
