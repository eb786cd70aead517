"""Judges on the empty baseline (grading.md §9 (a), ``critique.probe_judges: true``).

:class:`JudgeProbes` runs :func:`grading.engine.critique.probe_judges` once per case of a
run (any lane asking first pays; the others reuse the findings), with the judge's calls
charged to the *run's* judge budget (a :class:`~grading.judges.budget.SharedBudget` over the
lanes' shares: critic spend never favours one lane and never reaches an agent's metrics).
Spend is summed in :attr:`JudgeProbes.usage` for the run's ``judge_usage``. The findings
(``trivially_satisfied`` for a judge that passes an empty answer) go into the case's
``eval_feedback`` next to the deterministic probe findings (:meth:`with_findings`).

Offline grading (``grading.judges.offline``) uses it; a runs-side caller would build one per
run with the workspace judge and the run's lane shares.
"""

from __future__ import annotations

import copy
import dataclasses
import threading
from typing import Any

from grading.engine.critique import judges_to_probe, probe_judges, sort_findings
from grading.engine.types import CaseDef, GradeContext, JudgeUsage, Suggestion

from .budget import SharedBudget
from .judge import LLMJudge


def _budgeted(judge: LLMJudge, budget: Any) -> LLMJudge:
    """The judge with every call charged to ``budget`` (shares its loop, breaker and ledger)."""
    loop = judge._loop_thread()  # the judge's own loop: the view never starts or closes one
    view = copy.copy(judge)
    view._loop, view._own_loop = loop, False
    view.lane_budgets = None
    view.budget = budget
    return view


class JudgeProbes:
    def __init__(self, judge: LLMJudge, spec: Any, budget: SharedBudget | Any) -> None:
        self.spec = spec
        self.enabled = bool(judges_to_probe(spec))
        self.judge = _budgeted(judge, budget) if self.enabled else judge
        self.usage = JudgeUsage()
        self._found: dict[tuple[str, str], list[Suggestion]] = {}
        self._lock = threading.Lock()

    def findings(self, case: CaseDef, context: GradeContext) -> list[Suggestion]:
        """The judge-probe findings of one case (computed on first use)."""
        if not self.enabled:
            return []
        key = (case.challenge_key, case.case_key)
        with self._lock:
            found = self._found.get(key)
            if found is None:
                found, usage = probe_judges(self.spec, case, context, judge=self.judge)
                self._found[key] = found
                if usage is not None:
                    self._add(usage)
            return list(found)

    def with_findings(self, case: CaseDef, context: GradeContext) -> GradeContext:
        """``context`` whose ``case_findings`` also hold the judge-probe findings."""
        extra = self.findings(case, context)
        if not extra:
            return context
        return dataclasses.replace(
            context, case_findings=sort_findings(self.spec, list(context.case_findings or []) + extra)
        )

    def _add(self, part: JudgeUsage) -> None:
        self.usage.add(part)
