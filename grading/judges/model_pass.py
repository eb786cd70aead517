"""Claims and critique with a model (grading.md §8 "LLM extraction", §9 (c)).

Both run only when a judge provider is configured and a model is known (the first model of
any pack judge, else the provider's default model). Their results carry ``source: "llm"``
(the deterministic ones carry ``source: "deterministic"``) and are merged after them.

- :func:`model_claims`: one call per case execution. The model returns
  ``{claims: [{claim, type, span, supported, citations}]}``; a claim whose span does not
  reproduce its text is dropped. A factual claim is verified only through citations that
  resolve (§6.2) to evidence *other than the answer itself*: ``supported`` true/false with
  such a citation gives verified true/false; otherwise it is unverifiable (null), never true.
  Quality claims are unverifiable unless a pack judge covers them (not attempted here).
- :func:`model_critique`: one call per challenge per run with the assertions, up to 5 case
  inputs and the outcome table; suggestions naming an unknown assertion are dropped; each
  kept one is ``{assertion?, reason, finding: "llm", source: "llm"}``.

With ``claims.fail_on_contradicted`` a contradicted model claim fails the claims gate like a
deterministic one (:func:`merge_claims` re-decides it). Spend goes to the same budget and ``judge_usage`` as the judges (§6.4, §6.5).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from grading.engine.claims import claims_source_text
from grading.engine.critique import assertion_labels
from grading.engine.grade import CaseGrade, regate_claims
from grading.engine.refs import resolve_evidence_id
from grading.engine.types import (
    CaseDef,
    Evidence,
    GradeContext,
    JudgeUsage,
    Suggestion,
    as_text,
    canonical_json,
)

from . import calls as C
from .budget import JudgeBudget
from .judge import LLMJudge, get, seed_int
from .protocol import check_citations, system_prompt, user_prompt

MAX_LLM_CLAIMS = 50
MAX_CRITIQUE_CASES = 5


def model_for(spec: Any, judge: LLMJudge) -> str | None:
    for j in get(spec, "llm_judges", []) or []:
        if get(j, "model"):
            return str(get(j, "model"))
        models = [m for m in get(j, "models", []) or [] if m]
        if models:
            return str(models[0])
    return judge.provider.model or None


def _source_id(evidence: Evidence) -> str:
    if evidence.final_output and evidence.final_output.strip():
        return "final_output"
    for m in reversed(evidence.messages):
        if m.role == "assistant" and m.content and m.content.strip():
            return f"message:{m.index}"
    return "final_output"


def _claim_blocks(evidence: Evidence, case: CaseDef, context: GradeContext, source_id: str, source: str):
    blocks = [(source_id, source)]
    blocks.append(("challenge_input", _challenge_input(case)))
    if evidence.channels.tool_calls and evidence.tool_calls:
        for call in evidence.tool_calls[:40]:
            blocks.append(
                (
                    f"tool_call:{call.index}",
                    f"{call.name} {canonical_json(call.args)} -> {as_text(call.result)} [{call.status}]",
                )
            )
    if evidence.channels.files:
        for path, entry in list(evidence.files.items())[:20]:
            if entry.content is not None:
                blocks.append((f"path:{path}", entry.content))
    return blocks


def _challenge_input(case: CaseDef) -> str:
    return canonical_json(case.payload or {})


def model_claims(
    judge: LLMJudge,
    evidence: Evidence,
    case: CaseDef,
    context: GradeContext,
    spec: Any,
    *,
    budget: JudgeBudget | None = None,
    usage: JudgeUsage | None = None,
) -> list[dict[str, Any]]:
    """The model's factual and quality claims of one case execution (grading.json dicts)."""
    model = model_for(spec, judge)
    source = claims_source_text(evidence)
    if model is None or not source:
        return []
    source_id = _source_id(evidence)
    blocks = _claim_blocks(evidence, case, context, source_id, source)
    spec_call = C.CallSpec(
        purpose="claims",
        key="claims",
        mode="claims",
        system=system_prompt("claims"),
        user=user_prompt(
            [
                f"List the factual and quality claims the agent makes in the evidence block {source_id!r} "
                "(at most 50). Copy each claim sentence verbatim and give its code-point span [start, end) "
                f"within {source_id!r}. For a factual claim, say whether the OTHER evidence blocks support it "
                "(supported true/false, null if they say nothing) and cite the blocks that decide it.",
            ],
            blocks,
        ),
        max_output_tokens=max(judge.max_output_tokens, 2048),
    )
    budget = budget or judge.budget_for(context.deployment)
    sample = judge.run_one(
        spec_call, model, seed_int(context.run_id, case.challenge_key, case.case_key, "claims"), budget
    )
    if usage is not None:
        C.add_usage(usage, sample.calls)
    if sample.status != C.OK:
        return []
    shown = dict(blocks)

    def resolve(eid: str) -> str | None:
        text = resolve_evidence_id(eid, evidence, case, context)
        return text if text is not None else shown.get(eid)

    out: list[dict[str, Any]] = []
    for item in sample.data.get("claims", [])[:MAX_LLM_CLAIMS]:
        claim, span = str(item["claim"]), item["span"]
        start, end = int(span[0]), int(span[1])
        if not (0 <= start <= end <= len(source)) or source[start:end] != claim:
            continue  # the span must reproduce the text
        cites = [c for c in item.get("citations") or [] if str(c.get("id", "")).split("#")[0] != source_id]
        verified: bool | None = None
        refs: list[str] = []
        if item["type"] == "factual":
            bad, refs = check_citations(cites, resolve)
            supported = item.get("supported")
            if bad is not None:
                note = f"unverifiable: citation {bad}"
                refs = []
            elif supported is None:
                note = "unverifiable: the model found no evidence either way"
            else:
                verified = bool(supported)
                note = ("supported by " if verified else "contradicted by ") + ", ".join(refs)
        else:
            note = "quality claim: unverifiable unless a pack judge covers it"
        out.append(
            {
                "id": f"llm{len(out) + 1}",
                "claim": claim,
                "type": item["type"],
                "kind": "llm",
                "source": "llm",
                "verified": verified,
                "evidence": note[:1000],
                "span": [start, end],
                "evidence_refs": refs,
            }
        )
    return out


def merge_claims(grade: Any, llm_claims: Sequence[dict[str, Any]]) -> None:
    """Append model claims after the deterministic ones of a ``CaseGrade``.

    With ``claims.fail_on_contradicted`` the "no contradicted claims" expectation and the
    case verdict are re-decided over the merged ledger (grading.md §8: a model claim that
    cited evidence contradicts counts like a deterministic one; unverifiable ones never do).
    """
    if llm_claims:
        grade.claims = list(grade.claims) + list(llm_claims)
        if isinstance(grade, CaseGrade):
            regate_claims(grade)


# ---------------------------------------------------------------------------
# Critique
# ---------------------------------------------------------------------------


def outcome_table(records: Iterable[Any]) -> dict[str, dict[str, Counter[str]]]:
    """challenge -> assertion key -> status counts."""
    table: dict[str, dict[str, Counter[str]]] = {}
    for r in records:
        exps = r.expectations if hasattr(r, "expectations") else (r.get("expectations") or {})
        challenge = r.challenge_key if hasattr(r, "challenge_key") else r.get("challenge_key")
        per = table.setdefault(str(challenge), {})
        for key, value in exps.items():
            status = value[0] if isinstance(value, (list, tuple)) else value
            per.setdefault(key, Counter())[str(status)] += 1
    return table


def model_critique(
    judge: LLMJudge,
    spec: Any,
    records: Iterable[Any],
    case_inputs: Mapping[str, Sequence[CaseDef]],
    *,
    run_id: str = "offline",
    budget: Any = None,  # a JudgeBudget or a SharedBudget
    usage: JudgeUsage | None = None,
) -> list[Suggestion]:
    """One critic call per challenge; the kept suggestions (``source: llm``)."""
    model = model_for(spec, judge)
    if model is None:
        return []
    labels = assertion_labels(spec)
    table = outcome_table(records)
    out: list[Suggestion] = []
    for challenge, per in sorted(table.items()):
        assertions = "\n".join(f"- {key}" + (f" ({label})" if label else "") for key, label in labels.items())
        rows = "\n".join(
            f"- {key}: " + ", ".join(f"{s} {n}" for s, n in sorted(counts.items()))
            for key, counts in per.items()
        )
        inputs = [
            (f"case:{c.case_key}", canonical_json(c.payload or {})) for c in case_inputs.get(challenge, [])
        ]
        call = C.CallSpec(
            purpose="critique",
            key=f"critique:{challenge}",
            mode="critique",
            system=system_prompt("critique"),
            user=user_prompt(
                [
                    f"Review the assertions of challenge {challenge!r}. Suggest weak or missing assertions: each "
                    "suggestion names the assertion (key) and gives a concrete, checkable reason with numbers.",
                    "Assertions:",
                    assertions,
                    "Outcomes so far (status counts per assertion):",
                    rows or "- none",
                ],
                inputs[:MAX_CRITIQUE_CASES] or [("case:none", "{}")],
            ),
        )
        sample = judge.run_one(call, model, seed_int(run_id, challenge, "critique"), budget)
        if usage is not None:
            C.add_usage(usage, sample.calls)
        if sample.status != C.OK:
            continue
        by_name = {k: k for k in labels} | {str(v): k for k, v in labels.items() if v}
        for s in sample.data.get("suggestions", []):
            name = s.get("assertion")
            if name is not None and str(name) not in by_name:
                continue  # an unknown assertion: dropped (§9 c)
            out.append(
                Suggestion(
                    reason=f"[{challenge}] {str(s['reason'])[:500]}",
                    finding="llm",
                    source="llm",
                    assertion=None if name is None else str(name),
                )
            )
    return out
