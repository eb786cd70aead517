"""Call a validator's grade function directly on two resolved sides."""

from __future__ import annotations

from typing import Any

from grading.engine.evidence import evidence_from_response
from grading.engine.refs import Resolved
from grading.engine.types import CaseDef, GradeContext
from grading.engine.validators import GRADERS
from grading.engine.validators.common import Env, VResult


def run(
    vtype: str, actual: Any, expected: Any = None, config: dict | None = None, response: dict | None = None
) -> VResult:
    ev = evidence_from_response(response or {"final_output": actual if isinstance(actual, str) else ""})
    env = Env(ev, CaseDef("ch", "c"), GradeContext(), key="v")
    a = actual if isinstance(actual, Resolved) else Resolved(value=actual)
    e = (
        None
        if expected is None
        else (expected if isinstance(expected, Resolved) else Resolved(value=expected))
    )
    r = GRADERS[vtype](a, e, dict(config or {}), env)
    assert r.evidence, "evidence must never be empty"
    assert len(r.evidence) <= 1000
    assert r.score is None or 0.0 <= r.score <= 1.0
    return r


def status(r: VResult) -> str:
    return r.status.value
