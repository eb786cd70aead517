"""Shared builders for the judge tests: specs, cases, a judge on the fake provider."""

from __future__ import annotations

from typing import Any

from grading.engine import evidence_from_response, grade_case
from grading.engine.types import CaseDef, CaseExpectation, GradeContext
from grading.judges import JudgeBudget, LLMJudge, ProviderConfig

CTX = GradeContext(run_id="r1", lane_id="l1", deployment="dep", pack_version=1, case_findings=[])


def case(key: str = "c1", answer: str | None = "Paris") -> CaseDef:
    exps = [CaseExpectation("answer", value=answer)] if answer is not None else []
    return CaseDef("ch", key, payload={"q": "capital of France?"}, expectations=exps)


def spec(
    *judges: dict[str, Any], limits: dict[str, Any] | None = None, dims: list[Any] | None = None
) -> dict:
    sc: dict[str, Any] = {"dimensions": dims or ["correctness"]}
    if limits:
        sc["judge_limits"] = limits
    return {
        "validators": [
            {"key": "v", "type": "contains", "target": "final_output", "expected_from": "literal:a"}
        ],
        "llm_judges": list(judges),
        "scorecard": sc,
    }


def assertion(**extra: Any) -> dict[str, Any]:
    return {
        "key": "j",
        "mode": "assertion",
        "assertion": "The answer names Paris",
        "model": "gpt-4o-mini",
        **extra,
    }


def evidence(text: str = "The capital is Paris."):
    return evidence_from_response({"final_output": text})


async def no_sleep(delay: float, _delays: list[float] | None = None) -> None:
    return None


def make_judge(
    fake,
    *,
    kind: str = "openai",
    budget: JudgeBudget | None = None,
    sleeps: list | None = None,
    max_output_tokens: int = 1024,
    **provider: Any,
) -> LLMJudge:
    async def sleep(delay: float) -> None:
        if sleeps is not None:
            sleeps.append(delay)

    cfg = ProviderConfig(
        kind=kind,
        base_url=fake.base_url if kind == "openai" else fake.base_url[:-3],
        api_key="sk-test",
        allow_private=True,
        **provider,
    )
    return LLMJudge(cfg, budget=budget, sleep=sleep, max_output_tokens=max_output_tokens)


def judge_result(grade, key: str = "j"):
    return next(e for e in grade.expectations if e.key == key)


def grade(judge, sp, *, ev=None, c=None, ctx=CTX):
    return grade_case(ev or evidence(), c or case(), sp, context=ctx, judge=judge)
