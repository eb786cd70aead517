"""Eval critique, deterministic parts (spec/grading.md §9 a and b).

(a) Baseline probes, per case: every deterministic validator, trajectory matcher, rule and
guard is graded on synthetic executions of the same case (empty, echo, reference) through
``grade_case``; a check that PASSES on the empty or echo baseline is *trivially satisfied*,
one that FAILS on the reference output *fails on reference*. Guard-style checks are flagged
with advice to add a positive companion. code_execution is never probed (no sandbox runs on
synthetic files); judges only on the empty baseline with ``critique.probe_judges``
(:func:`probe_judges`, critic spend charged by the caller to the run's judge budget).

(b) Run health, over the case results of all lanes (light :class:`CaseRecord` rows):
no_discrimination, mostly_unavailable, pack_error, judge_disagreement,
unstable_across_repeats, budget_exhausted; :func:`run_health` feeds them to the one
streaming accumulator, :class:`grading.engine.health.RunHealthAccumulator`, which the run's
streamed scoring uses too. Critique never changes a score.

Every suggestion names the assertion by key (``Suggestion.assertion``) and the reason starts
with its label when it has one, followed by numbers a reader can check.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from .aggregate import CaseRecord
from .types import (
    MISSING,
    CaseDef,
    Channels,
    EvalFeedback,
    Evidence,
    FileEntry,
    GradeContext,
    Invocation,
    Message,
    RenderedPrompt,
    Resolution,
    Suggestion,
    as_text,
)

FINDING_ORDER = (
    "trivially_satisfied",
    "fails_on_reference",
    "no_discrimination",
    "mostly_unavailable",
    "pack_error",
    "judge_disagreement",
    "unstable_across_repeats",
    "budget_exhausted",
    "llm",
)
NOTHING_FOUND = "No findings: every probe and run-health check came back clean."
DEFAULT_UNAVAILABLE_SHARE_MAX = 0.5
DEFAULT_JUDGE_AGREEMENT_MIN = 0.75
PROBED_KINDS = frozenset({"validator", "trajectory", "rule", "guard"})
NOT_PROBED_TYPES = frozenset({"code_execution"})
REASON_EVIDENCE_MAX = 300
CLAIMS_KEY = "claims"

GradeFn = Callable[..., Any]


# ---------------------------------------------------------------------------
# Spec access (defensive: the spec is G1a's pydantic model, tests may pass namespaces)
# ---------------------------------------------------------------------------


def _get(obj: Any, name: str, default: Any = None) -> Any:
    if obj is None:
        return default
    if isinstance(obj, Mapping):
        return obj.get(name, default)
    return getattr(obj, name, default)


def _list(obj: Any, name: str) -> list[Any]:
    return list(_get(obj, name) or [])


def _critique_setting(spec: Any, name: str, default: Any) -> Any:
    value = _get(_get(spec, "critique"), name)
    return default if value is None else value


def assertion_labels(spec: Any) -> dict[str, str | None]:
    """Expectation key -> label, in grading.json order (guards, validators, rules, judges)."""
    out: dict[str, str | None] = {}
    rules = _get(spec, "rules")
    if rules is not None:
        for guard in ("allowed_tools", "allowed_hosts"):
            if _get(rules, guard) is not None:
                out[f"rules.{guard}"] = None
    for v in _list(spec, "validators"):
        out[str(_get(v, "key"))] = _get(v, "label")
    if rules is not None:
        for scope in ("job", "tasks"):
            for i, rule in enumerate(_list(rules, scope)):
                out[f"rules.{scope}[{i}]"] = _get(rule, "label")
    for j in _list(spec, "llm_judges"):
        out[str(_get(j, "key"))] = _get(j, "label")
    return out


def _name(key: str, labels: Mapping[str, str | None]) -> str:
    label = labels.get(key)
    return f"'{label}' ({key})" if label and label != key else key


def _short(text: str, limit: int = REASON_EVIDENCE_MAX) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


def not_probed(spec: Any) -> list[dict[str, str]]:
    """Checks the baseline probes skip, with why (listed on the version page)."""
    out = [
        {"assertion": str(_get(v, "key")), "reason": f"{_get(v, 'type')} is not probed"}
        for v in _list(spec, "validators")
        if _get(v, "type") in NOT_PROBED_TYPES
    ]
    if not _critique_setting(spec, "probe_judges", False):
        out.extend(
            {
                "assertion": str(_get(j, "key")),
                "reason": "judges are probed only with critique.probe_judges: true",
            }
            for j in _list(spec, "llm_judges")
        )
    else:
        out.extend(
            {"assertion": str(_get(j, "key")), "reason": "n_wise judges rank lanes; not probed"}
            for j in _list(spec, "llm_judges")
            if str(_get(j, "mode", "")) == "n_wise"
        )
    return out


def _guard_style(spec: Any) -> dict[str, str]:
    """Expectation key -> why it is guard-style (passes when the agent does nothing)."""
    out: dict[str, str] = {}
    rules = _get(spec, "rules")
    if rules is not None:
        for guard in ("allowed_tools", "allowed_hosts"):
            if _get(rules, guard) is not None:
                out[f"rules.{guard}"] = f"the {guard} guard only forbids"
        for scope in ("job", "tasks"):
            for i, rule in enumerate(_list(rules, scope)):
                if _get(rule, "negate"):
                    out[f"rules.{scope}[{i}]"] = "negated rule"
    for v in _list(spec, "validators"):
        key, vtype, cfg = str(_get(v, "key")), _get(v, "type"), _get(v, "config")
        if vtype == "tool_call_assertion":
            count, most = _get(cfg, "count"), _get(cfg, "max_count")
            if _get(cfg, "must_call") is False:
                out[key] = "tool_call_assertion with must_call: false"
            elif count == 0 and not isinstance(count, bool):
                out[key] = "tool_call_assertion with count: 0"
            elif most == 0 and not isinstance(most, bool):
                out[key] = "tool_call_assertion with max_count: 0"
        elif vtype == "file_content_match" and _get(cfg, "match_mode") == "not_contains":
            out[key] = "file_content_match with match_mode: not_contains"
        elif vtype == "postcondition" and _get(cfg, "condition") in ("not_exists", "not_contains"):
            out[key] = f"postcondition {_get(cfg, 'condition')}"
        elif vtype == "file_exists" and _get(cfg, "must_exist") is False:
            out[key] = "file_exists with must_exist: false"
        elif (
            vtype == "directory_structure"
            and _get(cfg, "forbidden_files")
            and not (_get(cfg, "required_files") or _get(cfg, "required_directories"))
        ):
            out[key] = "directory_structure with only forbidden_files"
    return out


# ---------------------------------------------------------------------------
# Synthetic executions
# ---------------------------------------------------------------------------


def _synthetic(
    context: GradeContext, final_output: Any = "", files: dict[str, FileEntry] | None = None
) -> Evidence:
    rendered = context.rendered_instructions or ""
    text = final_output if isinstance(final_output, str) else as_text(final_output)
    messages = [Message(index=0, role="user", content=rendered)] if rendered else []
    return Evidence(
        final_output=text,
        final_output_value=final_output,
        messages=messages,
        invocations=[Invocation(id="0", user_content=rendered, tool_call_indexes=[], final_response=text)],
        tool_calls=[],
        files=dict(files or {}),
        tasks=[],
        resolution=Resolution(),
        user_notes="",
        rendered_prompt=RenderedPrompt(
            system=None, instructions=rendered, tool_policy=dict(context.tool_policy)
        ),
        channels=Channels(),
    )


def empty_evidence(context: GradeContext) -> Evidence:
    """The empty baseline: no output, no messages after the prompt, no calls, files or tasks."""
    return _synthetic(context)


def echo_text(case: CaseDef, context: GradeContext) -> str:
    """The rendered instructions and every case input value, joined by newlines (§9); no
    instructions contribute no line (the output does not start with an empty one)."""
    parts = [context.rendered_instructions] if context.rendered_instructions else []
    parts.extend(as_text(i.value) for i in case.inputs if i.value is not MISSING)
    return "\n".join(parts)


def _echoed(inputs: int, instructions: bool = True) -> str:
    """What the echo baseline sent back, in words (a payload-only case has no input values:
    its payload reaches the agent through the rendered instructions)."""
    if not inputs:
        return "the rendered instructions"
    values = f"{inputs} case input value{'s' if inputs != 1 else ''}"
    return f"the instructions and {values}" if instructions else values


def echo_evidence(case: CaseDef, context: GradeContext) -> Evidence:
    """The echo baseline: the rendered instructions and every case input value as the output."""
    return _synthetic(context, echo_text(case, context))


def _file_entry(path: str, text: str) -> FileEntry:
    data = text.encode()
    return FileEntry(path=path, content=text, size=len(data), sha256=hashlib.sha256(data).hexdigest())


def _reference_probes(
    spec: Any, case: CaseDef, context: GradeContext
) -> list[tuple[Evidence, str, list[str]]]:
    """(evidence, expected_from, validator keys) for every case expectation used as
    ``expected_from`` by a probed validator, placed where the validator looks."""
    from .refs import parse_reference, resolve_reference

    checks = {str(_get(c, "key")): c for c in _list(spec, "post_execution_checks")}
    code_targets = {
        str(_get(v, "target", "")).strip()
        for v in _list(spec, "validators")
        if _get(v, "type") in NOT_PROBED_TYPES
    }
    base = empty_evidence(context)
    groups: dict[tuple[str, str], list[str]] = {}
    for v in _list(spec, "validators"):
        expected_from = str(_get(v, "expected_from") or "").strip()
        target = str(_get(v, "target") or "").strip()
        if not expected_from or _get(v, "type") in NOT_PROBED_TYPES:
            continue
        try:
            if parse_reference(expected_from).kind != "expectation":
                continue
        except ValueError:
            continue
        groups.setdefault((target, expected_from), []).append(str(_get(v, "key")))
    out: list[tuple[Evidence, str, list[str]]] = []
    for (target, expected_from), keys in groups.items():
        resolved = resolve_reference(expected_from, base, case, context, checks=checks)
        if not resolved.ok:
            continue  # the real grade reports reference_missing; nothing to probe
        if target in ("final_output", "run.final_output"):
            out.append((_synthetic(context, resolved.value), expected_from, keys))
        elif target.startswith("file:") and target not in code_targets:
            check = checks.get(target[len("file:") :].strip())
            if check is not None and _get(check, "type") == "file_capture":
                path = str(_get(check, "path") or "").strip()
                from .evidence import normalize_path

                norm = normalize_path(path, context.working_directory)
                files = {norm: _file_entry(norm, resolved.text)}
                out.append((_synthetic(context, "", files), expected_from, keys))
    return out


# ---------------------------------------------------------------------------
# (a) Baseline probes
# ---------------------------------------------------------------------------


def _probe_context(context: GradeContext) -> GradeContext:
    names = {f.name for f in dataclasses.fields(context)}
    changes: dict[str, Any] = {"deployment_kind": "trace_import", "evidence_level": "structured"}
    if "case_findings" in names:
        changes["case_findings"] = []  # grade_case must not probe again
    return dataclasses.replace(context, **changes)


def _results(grade: Any) -> dict[str, dict[str, Any]]:
    """Expectation key -> {kind, status, evidence} of a CaseGrade or a grading.json dict."""
    doc = grade.to_dict() if hasattr(grade, "to_dict") else grade
    out: dict[str, dict[str, Any]] = {}
    for exp in _get(doc, "expectations") or []:
        kind = _get(exp, "kind")
        out[str(_get(exp, "key"))] = {
            "kind": str(getattr(kind, "value", kind)),
            "status": str(getattr(_get(exp, "status"), "value", _get(exp, "status"))),
            "evidence": str(_get(exp, "evidence") or ""),
        }
    return out


def _default_grade() -> GradeFn:
    from .grade import grade_case

    return grade_case


def probe_case(
    spec: Any,
    case: CaseDef,
    context: GradeContext,
    *,
    grade: GradeFn | None = None,
    judge: Any = None,
) -> list[Suggestion]:
    """The §9a findings of one case. ``grade`` defaults to ``grade_case``; ``judge`` is used
    only for the empty baseline and only when ``critique.probe_judges`` is true."""
    grade = grade or _default_grade()
    ctx = _probe_context(context)
    labels = assertion_labels(spec)
    skipped = {str(_get(v, "key")) for v in _list(spec, "validators") if _get(v, "type") in NOT_PROBED_TYPES}
    probe_judges = bool(_critique_setting(spec, "probe_judges", False))
    judge_keys = {str(_get(j, "key")) for j in _list(spec, "llm_judges")}
    guard_style = _guard_style(spec)

    def probed(key: str, result: Mapping[str, Any], *, judges: bool = False) -> bool:
        if key in skipped:
            return False
        if result["kind"] in PROBED_KINDS:
            return True
        return judges and result["kind"] == "judge" and key in judge_keys

    suggestions: list[Suggestion] = []
    flagged: set[str] = set()
    empty = _results(
        grade(empty_evidence(ctx), case, spec, context=ctx, judge=judge if probe_judges else None)
    )
    for key, result in empty.items():
        if not probed(key, result, judges=probe_judges):
            continue
        if key in guard_style:
            continue  # reported once below, with the companion advice
        if result["status"] == "PASSED":
            flagged.add(key)
            suggestions.append(
                Suggestion(
                    reason=f"{_name(key, labels)} passes on the empty baseline (no output, calls or files): "
                    f"{_short(result['evidence'])}",
                    finding="trivially_satisfied",
                    assertion=key,
                )
            )
    echo = echo_text(case, ctx)
    echoed = sum(1 for i in case.inputs if i.value is not MISSING)
    if echo:
        results = _results(grade(echo_evidence(case, ctx), case, spec, context=ctx, judge=None))
        for key, result in results.items():
            if key in flagged or key in guard_style or not probed(key, result):
                continue
            if result["status"] == "PASSED":
                flagged.add(key)
                suggestions.append(
                    Suggestion(
                        reason=f"{_name(key, labels)} passes on the echo baseline ({_echoed(echoed, bool(ctx.rendered_instructions))} "
                        f"echoed back): {_short(result['evidence'])}",
                        finding="trivially_satisfied",
                        assertion=key,
                    )
                )
    for key, why in guard_style.items():
        if key not in labels and key not in empty:
            continue
        on_empty = empty.get(key, {}).get("status")
        suffix = " and passes on the empty baseline" if on_empty == "PASSED" else ""
        suggestions.append(
            Suggestion(
                reason=f"{_name(key, labels)} is guard-style ({why}){suffix}: it holds when the agent does "
                "nothing; add a positive companion check that the task was actually done",
                finding="trivially_satisfied",
                assertion=key,
            )
        )
    for evidence, expected_from, keys in _reference_probes(spec, case, ctx):
        reference = _results(grade(evidence, case, spec, context=ctx, judge=None))
        for key in keys:
            ref_result = reference.get(key)
            if ref_result is not None and ref_result["status"] == "FAILED":
                suggestions.append(
                    Suggestion(
                        reason=f"{_name(key, labels)} fails on the reference output ({expected_from} placed "
                        f"as the output): {_short(ref_result['evidence'])}",
                        finding="fails_on_reference",
                        assertion=key,
                    )
                )
    order = {k: i for i, k in enumerate(labels)}
    suggestions.sort(key=lambda s: (FINDING_ORDER.index(s.finding), order.get(s.assertion or "", len(order))))
    return suggestions


def judges_to_probe(spec: Any) -> list[str]:
    """Keys of the judges the empty baseline probes (``critique.probe_judges: true``): every
    per-case judge; n_wise judges rank lanes against each other and are not probed."""
    if not _critique_setting(spec, "probe_judges", False):
        return []
    return [str(_get(j, "key")) for j in _list(spec, "llm_judges") if str(_get(j, "mode", "")) != "n_wise"]


def probe_judges(
    spec: Any,
    case: CaseDef,
    context: GradeContext,
    *,
    judge: Any,
    grade: GradeFn | None = None,
) -> tuple[list[Suggestion], Any]:
    """§9a for judges alone: with ``critique.probe_judges: true`` the case's judges run on the
    empty baseline; one that PASSES an empty answer is *trivially satisfied*. Returns the
    suggestions and the probe grade's ``judge_usage`` (critic spend: the caller charges it to
    the run's judge budget, never to an agent). ``([], None)`` without the setting, a judge or
    a judge to probe. The deterministic checks are :func:`probe_case`'s."""
    keys = judges_to_probe(spec)
    if judge is None or not keys:
        return [], None
    grade = grade or _default_grade()
    ctx = _probe_context(context)
    labels = assertion_labels(spec)
    g = grade(empty_evidence(ctx), case, spec, context=ctx, judge=judge)
    results = _results(g)
    out: list[Suggestion] = []
    for key in keys:
        result = results.get(key)
        if result is not None and result["kind"] == "judge" and result["status"] == "PASSED":
            out.append(
                Suggestion(
                    reason=f"{_name(key, labels)} (an LLM judge) passes on the empty baseline (no output, "
                    f"calls or files): {_short(result['evidence'])}",
                    finding="trivially_satisfied",
                    assertion=key,
                )
            )
    return out, getattr(g, "judge_usage", None)


def sort_findings(spec: Any, suggestions: Iterable[Suggestion]) -> list[Suggestion]:
    """Findings in the order :func:`probe_case` returns them (finding kind, then assertion
    order), e.g. after judge probes are added to a case's deterministic findings."""
    order = {k: i for i, k in enumerate(assertion_labels(spec))}
    return sorted(
        suggestions,
        key=lambda s: (
            FINDING_ORDER.index(s.finding) if s.finding in FINDING_ORDER else len(FINDING_ORDER),
            order.get(s.assertion or "", len(order)),
        ),
    )


def probe_version(
    spec: Any,
    cases: Sequence[CaseDef],
    contexts: Mapping[Any, GradeContext] | Sequence[GradeContext] | GradeContext,
    *,
    grade: GradeFn | None = None,
) -> dict[str, list[Suggestion]]:
    """Publish-time probes of every case. ``contexts`` is one context per case (a sequence
    parallel to ``cases``, or a mapping by case_key or (challenge_key, case_key)), or one
    context for all. Keys are case keys; a case key used by two challenges becomes
    ``"<challenge_key>/<case_key>"``."""
    grade = grade or _default_grade()
    seen = Counter(c.case_key for c in cases)
    out: dict[str, list[Suggestion]] = {}
    for i, case in enumerate(cases):
        if isinstance(contexts, GradeContext):
            ctx = contexts
        elif isinstance(contexts, Mapping):
            ctx = contexts.get((case.challenge_key, case.case_key)) or contexts[case.case_key]
        else:
            ctx = contexts[i]
        key = case.case_key if seen[case.case_key] == 1 else f"{case.challenge_key}/{case.case_key}"
        out[key] = probe_case(spec, case, ctx, grade=grade)
    return out


# ---------------------------------------------------------------------------
# overall
# ---------------------------------------------------------------------------


def overall_line(suggestions: Iterable[Suggestion]) -> str:
    """A one-line deterministic count of findings by kind, or a fixed sentence."""
    counts = Counter(s.finding for s in suggestions)
    if not counts:
        return NOTHING_FOUND
    kinds = sorted(
        counts, key=lambda k: (FINDING_ORDER.index(k) if k in FINDING_ORDER else len(FINDING_ORDER), k)
    )
    total = sum(counts.values())
    parts = ", ".join(f"{counts[k]} {k}" for k in kinds)
    return f"{total} finding{'s' if total != 1 else ''}: {parts}."


def eval_feedback(suggestions: Iterable[Suggestion]) -> EvalFeedback:
    items = list(suggestions)
    return EvalFeedback(suggestions=items, overall=overall_line(items))


# ---------------------------------------------------------------------------
# (b) Run health
# ---------------------------------------------------------------------------


def run_health(records: Iterable[CaseRecord | Mapping[str, Any]], spec: Any = None) -> EvalFeedback:
    """The §9b findings over the case results of all lanes of a run (records or grading
    documents), through the one streaming accumulator of :mod:`.health`."""
    from .health import RunHealthAccumulator

    health = RunHealthAccumulator(spec)
    for record in records:
        health.add_record(record)
    return health.finish()
