"""Offline grading with judges (``manage.py grade --judge-provider ...``, interfaces.md §5).

:func:`grade_offline_with_judges` wraps the engine's ``grade_offline``: one
:class:`~grading.judges.LLMJudge` for the whole file, budgets split equally between the
deployments found in the results (``scorecard.judge_limits``), an n_wise pre-pass that ranks
every deployment's answer to each (case, repetition) before the cases are graded, the model
claims pass per case execution, the judge baseline probes (``critique.probe_judges``,
:mod:`grading.judges.probes`, charged to the run's budget, in each case's ``eval_feedback``),
and the model critique per challenge merged into the run's
``eval_feedback``. The document gains ``judge_usage`` (run total; never in agent metrics).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from grading.engine.aggregate import record_from_grade
from grading.engine.critique import overall_line
from grading.engine.grade import grade_case
from grading.engine.offline import OFFLINE_RUN_ID, grade_offline
from grading.engine.reader import evidence_of, read_results
from grading.engine.types import CaseDef, ExpectationResult, GradeContext, JudgeUsage, Suggestion

from .budget import LaneBudgets, SharedBudget, judge_limits_of
from .judge import LLMJudge, get
from .model_pass import merge_claims, model_claims, model_critique
from .nwise import LaneAnswer, rank_case, split_usage
from .probes import JudgeProbes
from .providers import ProviderConfig

RankKey = tuple[str, str, str, int]  # deployment, challenge, case, repetition


class RankedView:
    """The judge as ``grade_case`` sees it for one case execution: per-case judges run live,
    n_wise judges answer with the pre-computed ranking of this execution."""

    def __init__(self, judge: LLMJudge, ranked: dict[str, ExpectationResult]) -> None:
        self.judge = judge
        self.ranked = ranked

    def evaluate(self, request: Any) -> ExpectationResult:
        return self.judge.evaluate(request)

    def ranked_result(self, key: str) -> ExpectationResult | None:
        return self.ranked.get(key)


def _add(total: JudgeUsage, part: JudgeUsage) -> None:
    total.add(part)


def grade_offline_with_judges(
    *,
    provider: ProviderConfig,
    spec: Any,
    pack_slug: str,
    pack_number: int,
    input_set_name: str | None,
    cases: Sequence[tuple[CaseDef, GradeContext]],
    results: bytes | str,
    model_pass: bool = True,
) -> dict[str, Any]:
    contexts = {(c.challenge_key, c.case_key): ctx for c, ctx in cases}
    result_set = read_results(results, [c for c, _ in cases], contexts=contexts)
    deployments = result_set.deployments or ["default"]
    lanes = LaneBudgets(judge_limits_of(spec), len(deployments))
    judge = LLMJudge(provider, lane_budgets=lanes)
    try:
        ranked, shares = _rank_all(judge, spec, result_set.executions, contexts, lanes, deployments)
        # critique.probe_judges: judges on the empty baseline, charged to the run's budget
        probes = JudgeProbes(judge, spec, SharedBudget([lanes.for_lane(d) for d in deployments]))

        def grade(evidence: Any, case: CaseDef, sp: Any, *, context: GradeContext, judge: Any = None) -> Any:
            if judge is None:  # baseline probes never spend on judges (critique.probe_judges aside)
                return grade_case(evidence, case, sp, context=context, judge=None)
            context = probes.with_findings(case, context)
            key = (context.deployment, case.challenge_key, case.case_key, context.repetition)
            g = grade_case(evidence, case, sp, context=context, judge=RankedView(judge, ranked.get(key, {})))
            if key in shares:
                _add(g.judge_usage, shares[key])
            if model_pass:
                merge_claims(g, model_claims(judge, evidence, case, context, sp, usage=g.judge_usage))
            return g

        document = grade_offline(
            spec=spec,
            pack_slug=pack_slug,
            pack_number=pack_number,
            input_set_name=input_set_name,
            cases=cases,
            results=results,
            judge=judge,
            grade=grade,
        )
        total = JudgeUsage()
        for entry in document["cases"]:
            ju = entry["grading"].get("judge_usage") or {}
            _add(total, JudgeUsage.from_doc(ju))
        _add(total, probes.usage)
        if model_pass:
            records = [record_from_grade(e["grading"]) for e in document["cases"]]
            by_challenge: dict[str, list[CaseDef]] = {}
            for c, _ in cases:
                by_challenge.setdefault(c.challenge_key, []).append(c)
            critic_usage = JudgeUsage()
            extra = model_critique(
                judge,
                spec,
                records,
                by_challenge,
                run_id=OFFLINE_RUN_ID,
                budget=SharedBudget([lanes.for_lane(d) for d in deployments]),
                usage=critic_usage,
            )
            _add(total, critic_usage)
            if extra:
                feedback = document["eval_feedback"]
                suggestions = [Suggestion.from_dict(s) for s in feedback.get("suggestions") or []] + extra
                feedback["suggestions"] = [s.to_dict() for s in suggestions]
                feedback["overall"] = overall_line(suggestions)
        document["judge_usage"] = total.to_doc()
        return document
    finally:
        judge.close()


def _rank_all(
    judge: LLMJudge,
    spec: Any,
    executions: Sequence[Any],
    contexts: dict[tuple[str, str], GradeContext],
    lanes: LaneBudgets,
    deployments: list[str],
) -> tuple[dict[RankKey, dict[str, ExpectationResult]], dict[RankKey, JudgeUsage]]:
    ranked: dict[RankKey, dict[str, ExpectationResult]] = {}
    shares: dict[RankKey, JudgeUsage] = {}
    decls = [j for j in get(spec, "llm_judges", []) or [] if str(get(j, "mode", "")) == "n_wise"]
    if not decls:
        return ranked, shares
    groups: dict[tuple[str, str, int], list[Any]] = {}
    for ex in executions:
        groups.setdefault((ex.case.challenge_key, ex.case.case_key, ex.repetition), []).append(ex)
    checks = {str(get(c, "key")): c for c in get(spec, "post_execution_checks", []) or []}
    shared = SharedBudget([lanes.for_lane(d) for d in deployments])
    for (challenge, case_key, rep), group in groups.items():
        answers = [
            LaneAnswer(
                ex.deployment,
                evidence_of(ex),  # kept: read_results above keeps the evidence
                ex.case,
                dataclasses.replace(
                    contexts[(challenge, case_key)],
                    run_id=OFFLINE_RUN_ID,
                    lane_id=ex.deployment,
                    deployment=ex.deployment,
                    repetition=rep,
                ),
            )
            for ex in group
        ]
        for decl in decls:
            out = rank_case(judge, decl, answers, checks=checks, budget=shared)  # type: ignore[arg-type]
            parts = split_usage(out.usage, len(out.results))
            for (lane, result), share in zip(sorted(out.results.items()), parts, strict=True):
                key = (lane, challenge, case_key, rep)
                ranked.setdefault(key, {})[str(get(decl, "key"))] = result
                _add(shares.setdefault(key, JudgeUsage()), share)
    return ranked, shares
