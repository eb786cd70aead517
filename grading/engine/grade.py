"""``grade_case``: one case execution to one ``CaseGrade`` (grading.md §2-§7, §10.1-§10.2).

Order: guards, validators (trajectory matchers and tool_call_assertion included), rules,
judges, the claims expectation; then scorecard, gates and the verdict. No exception
escapes: a crashing validator is ERROR / evaluator_error for that expectation.

The spec is compiled once into a ``_Plan`` (parsed references, configs as plain dicts,
expectation texts, scorecard dimensions) cached by the spec object, so the per-case path
does no pydantic validation and no deep copies.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import sys
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from . import guards as guards_mod
from .evidence import tool_call_counts
from .judging import Judge, JudgeRequest, no_judge_result
from .notes import user_notes_summary
from .refs import (
    ABSENT,
    CHANNEL_UNAVAILABLE,
    INVALID_CHAIN,
    NOT_APPLICABLE,
    OK,
    REFERENCE_MISSING,
    Ref,
    ReferenceSyntaxError,
    Resolved,
    parse_reference,
    resolve_evidence_id,
    resolve_reference,
    walk,
)
from .rules import (
    DEFAULT_SHELL_TOOLS,
    derive_tasks,
    grade_rule,
    prepare_rule,
    rule_needs_tasks,
    rule_result,
)
from .rules import (
    compliance as compliance_of,
)
from .scorecard import (
    DimPlan,
    GatingInput,
    ScorecardOutcome,
    as_float,
    evaluate_dimension,
    plan_dimensions,
    run_scorecard,
    validity,
    verdict,
)
from .types import (
    MISSING,
    CaseDef,
    Claim,
    Evidence,
    ExpectationResult,
    Gate,
    GradeContext,
    JudgeUsage,
    OutcomeClass,
    ResultKind,
    Status,
    Suggestion,
    Task,
    Timing,
    Validity,
    as_text,
)
from .validators import (
    ABSENCE_TYPES,
    DEFAULTS,
    EVIDENCE_TYPES,
    GRADERS,
    GROUND_TRUTH_TYPES,
    TRAJECTORY_TYPES,
    threshold_of,
)
from .validators.common import (
    DEFAULT_CLASS,
    VALIDATOR_TIME_LIMIT,
    Env,
    InputOverLimits,
    ValidatorTimeout,
    VResult,
    cfg,
    clip,
    over_limits,
)

SCHEMA_VERSION = 1
_PASSED, _FAILED = Status.PASSED, Status.FAILED
_NO_TIME_LIMIT = frozenset({"code_execution"})  # the sandbox enforces its own limits

logger = logging.getLogger(__name__)


# ---------------------------------------------------------------------------
# The compiled plan
# ---------------------------------------------------------------------------


def _config_dict(config: Any) -> dict[str, Any]:
    if config is None:
        return {}
    if isinstance(config, Mapping):
        return dict(config)
    dump = getattr(config, "model_dump", None)
    if dump is not None:
        return dump(exclude_unset=True)
    return dict(vars(config))


def _fmt_cfg(v: Any) -> str:
    return v if isinstance(v, str) else as_text(v)


def expectation_text(vtype: str, target: str, expected_from: str | None, config: Mapping[str, Any]) -> str:
    text = f"{vtype} on {target}"
    if expected_from:
        text += f" against {expected_from}"
    defaults = DEFAULTS.get(vtype, {})
    extra = []
    for k, v in config.items():
        if k.startswith("_") or v is None or (k in defaults and defaults[k] == v):
            continue
        try:
            extra.append(f"{k}={_fmt_cfg(v)}")
        except (TypeError, ValueError):
            extra.append(f"{k}={v!r}")
    if extra:
        text += " (" + ", ".join(extra) + ")"
    return text


@dataclass(slots=True)
class _VPlan:
    key: str
    vtype: str
    target_text: str
    target: Ref | None
    expected: Ref | None
    expected_text: str | None
    config: dict[str, Any]
    text: str
    threshold: float | None
    ground_truth: bool
    kind: ResultKind
    problem: str | None = None
    literal: Resolved | None = None
    refs: tuple[str, ...] = ()
    grader: Any = None
    resolve_target: Any = None
    resolve_expected: Any = None
    time_limited: bool = True
    extra_refs: bool = False  # code:<key> or the matched tool_call:<i> ids join the refs
    check: Any = None  # (env) -> ExpectationResult, built by compile_plan


@dataclass(slots=True)
class _RulePlan:
    key: str
    scope: str
    rule: dict[str, Any]
    run: Callable[[Evidence, list[Task] | None], ExpectationResult]


@dataclass(slots=True)
class _JudgePlan:
    key: str
    text: str
    mode: str
    decl: Any
    context_from: list[str]
    reference_from: str | None


@dataclass(slots=True)
class _Plan:
    validators: list[_VPlan]
    rules: list[_RulePlan]
    has_rules: bool
    allowed_tools: list[str] | None
    allowed_hosts: list[str] | None
    shell_tools: frozenset[str]
    judges: list[_JudgePlan]
    checks: dict[str, Any]
    dims: list[DimPlan]
    scorecard: Any
    claims_gate: bool
    metric_collectors: dict[str, str]
    has_ground_truth: bool = False
    rules_need_tasks: bool = True
    # Verdicts by check outcomes, for plans whose verdict reads nothing else (_memoizable).
    verdicts: dict[Any, Any] | None = None


def _parse_ref(text: Any) -> tuple[Ref | None, str | None]:
    if text is None:
        return None, None
    try:
        return parse_reference(str(text)), None
    except ReferenceSyntaxError as exc:
        return None, str(exc)


def _compile_validator(v: Any) -> _VPlan:
    key = str(cfg(v, "key", ""))
    vtype = str(cfg(v, "type", ""))
    target_text = str(cfg(v, "target", "") or "")
    expected_text = cfg(v, "expected_from")
    config = _config_dict(cfg(v, "config"))
    target, t_err = _parse_ref(target_text) if vtype not in EVIDENCE_TYPES else (None, None)
    expected, e_err = _parse_ref(expected_text)
    label = cfg(v, "label")
    problem = None
    if vtype not in GRADERS:
        problem = f"{vtype!r} is not a supported validator type"
    elif t_err or e_err:
        problem = t_err or e_err
    elif vtype not in EVIDENCE_TYPES and target is None:
        problem = "target is required"
    literal = Resolved(value=expected.name) if expected is not None and expected.kind == "literal" else None
    refs = tuple(x for x in (target_text, None if expected_text is None else str(expected_text)) if x)
    plan = _VPlan(
        key=key,
        vtype=vtype,
        target_text=target_text,
        target=target,
        expected=expected,
        expected_text=None if expected_text is None else str(expected_text),
        config=config,
        text=str(label) if label else expectation_text(vtype, target_text, expected_text, config),
        threshold=threshold_of(vtype, config) if vtype in GRADERS else None,
        ground_truth=bool(cfg(v, "ground_truth", False)) or vtype in GROUND_TRUTH_TYPES,
        kind=ResultKind.TRAJECTORY if vtype in TRAJECTORY_TYPES else ResultKind.VALIDATOR,
        problem=problem,
        literal=literal,
        refs=refs,
        grader=_bind(GRADERS.get(vtype), config),
        time_limited=vtype not in _NO_TIME_LIMIT,
        extra_refs=vtype in ("code_execution", "tool_call_assertion"),
    )
    return plan


def _bind(grader: Any, config: dict[str, Any]) -> Any:
    """The grade function bound to its config: prepared once when the type supports it."""
    if grader is None:
        return None
    prepare = getattr(grader, "prepare", None)
    if prepare is not None:
        with contextlib.suppress(Exception):  # raised again per case below: that check's ERROR
            return prepare(config)  # type: ignore[no-any-return]

    def bound(actual: Any, expected: Any, env: Env) -> VResult:
        return grader(actual, expected, config, env)  # type: ignore[no-any-return]

    return bound


def _compile_rule(key: str, scope: str, rule: Any, shell_tools: frozenset[str]) -> _RulePlan:
    rule = _config_dict(rule)  # plain dict: no model attribute lookups per case
    try:
        run = prepare_rule(key, scope, rule, shell_tools=shell_tools)
    except Exception:  # a declaration prepare_rule cannot read: raised again per case, that rule's ERROR
        run = functools.partial(grade_rule, key, scope, rule)
    return _RulePlan(key, scope, rule, run)


def _judge_text(j: Any, key: str, mode: str, context_from: list[str]) -> str:
    label = cfg(j, "label")
    if label:
        return str(label)
    if mode == "assertion" and cfg(j, "assertion"):
        return str(cfg(j, "assertion"))
    return f"{mode} judge on {', '.join(context_from)}"


def _final_output(env: Env) -> Resolved:
    """One shared resolution per case: every validator on final_output reads the same text."""
    r = env.final
    if r is None:
        v = env.evidence.final_output_value
        r = env.final = Resolved(value="" if v is None else v, _text=env.evidence.final_output)
    return r


def _resolver(ref: Ref | None, checks: dict[str, Any]) -> Any:
    """A resolution function specialised for one reference (no dispatch per case). The
    common case-data shapes resolve inline; anything unusual (a missing key, a source chain,
    an asset) goes through ``resolve_reference``, which writes the messages."""
    if ref is None:
        return None
    if ref.kind == "final_output":
        return _final_output

    def resolve(env: Env) -> Resolved:
        return resolve_reference(ref, env.evidence, env.case, env.context, checks=checks)

    if ref.kind == "expectation" and not ref.path:
        name = ref.name

        def resolve_expectation(env: Env) -> Resolved:
            for e in env.case.expectations:
                if e.key == name:
                    if e.value is not MISSING:
                        return Resolved(e.value)
                    break
            return resolve(env)

        return resolve_expectation
    if ref.kind == "payload" and len(ref.path) == 1:
        field = ref.path[0]

        def resolve_payload_field(env: Env) -> Resolved:
            case = env.case
            payload = case.payload
            if not case.empty_case and type(payload) is dict and field in payload:
                return Resolved(payload[field])
            return resolve(env)

        return resolve_payload_field
    if ref.kind == "payload":
        path = ref.path

        def resolve_payload(env: Env) -> Resolved:
            case = env.case
            if not case.empty_case:
                found = walk(case.payload, path)
                if found is not MISSING:
                    return Resolved(found)
            return resolve(env)

        return resolve_payload
    return resolve


def compile_plan(spec: Any) -> _Plan:
    validators = [_compile_validator(v) for v in (cfg(spec, "validators", []) or [])]
    rules_spec = cfg(spec, "rules")
    rules: list[_RulePlan] = []
    shell_tools = frozenset(
        (cfg(rules_spec, "shell_tool_names", None) if rules_spec is not None else None) or DEFAULT_SHELL_TOOLS
    )
    if rules_spec is not None:
        for scope in ("job", "tasks"):
            for i, r in enumerate(cfg(rules_spec, scope, []) or []):
                rules.append(_compile_rule(f"rules.{scope}[{i}]", scope, r, shell_tools))
    judges = []
    for j in cfg(spec, "llm_judges", []) or []:
        key = str(cfg(j, "key", ""))
        mode = str(cfg(j, "mode", ""))
        ctx = [str(c) for c in (cfg(j, "context_from") or ["final_output"])]
        judges.append(_JudgePlan(key, _judge_text(j, key, mode, ctx), mode, j, ctx, cfg(j, "reference_from")))
    checks = {str(cfg(c, "key")): c for c in (cfg(spec, "post_execution_checks", []) or [])}
    for vp in validators:
        if vp.vtype not in EVIDENCE_TYPES:
            vp.resolve_target = _resolver(vp.target, checks)
        if vp.literal is None:
            vp.resolve_expected = _resolver(vp.expected, checks)
        vp.check = _make_check(vp)
    raw_scorecard = cfg(spec, "scorecard")
    scorecard = {
        "strategy": str(cfg(raw_scorecard, "strategy", "weighted") or "weighted"),
        "pass_threshold": as_float(cfg(raw_scorecard, "pass_threshold")),
    }
    allowed_tools = cfg(rules_spec, "allowed_tools") if rules_spec is not None else None
    allowed_hosts = cfg(rules_spec, "allowed_hosts") if rules_spec is not None else None
    has_rules = rules_spec is not None and bool(
        rules or allowed_tools is not None or allowed_hosts is not None
    )
    plan = _Plan(
        validators=validators,
        rules=rules,
        has_rules=has_rules,
        allowed_tools=None if allowed_tools is None else [str(x) for x in allowed_tools],
        allowed_hosts=None if allowed_hosts is None else [str(x) for x in allowed_hosts],
        shell_tools=shell_tools,
        rules_need_tasks=any(rule_needs_tasks(rp.rule) for rp in rules),
        judges=judges,
        checks=checks,
        dims=plan_dimensions(raw_scorecard, cfg(spec, "runtime_limits")),
        scorecard=scorecard,
        claims_gate=bool(cfg(cfg(spec, "claims"), "fail_on_contradicted", False)),
        metric_collectors={
            str(cfg(m, "key")): str(cfg(m, "collector", "")) for m in (cfg(spec, "metrics", []) or [])
        },
        has_ground_truth=any(vp.ground_truth for vp in validators),
    )
    if _memoizable(plan):
        plan.verdicts = {}
    return plan


_PLANS: OrderedDict[int, tuple[Any, _Plan]] = OrderedDict()
_PLAN_CACHE_SIZE = 64


def plan_for(spec: Any) -> _Plan:
    """The compiled plan of a spec object (cached by identity; the entry keeps the spec alive,
    so an id is never reused while cached)."""
    hit = _PLANS.get(id(spec))
    if hit is not None and hit[0] is spec:
        return hit[1]
    plan = compile_plan(spec)
    _PLANS[id(spec)] = (spec, plan)
    if len(_PLANS) > _PLAN_CACHE_SIZE:
        _PLANS.popitem(last=False)
    return plan


# ---------------------------------------------------------------------------
# The result document
# ---------------------------------------------------------------------------


# Enum member -> its plain str value (``.value`` on an enum member is a slow descriptor).
_VALUE: dict[Any, str] = {m: m.value for e in (Status, OutcomeClass, ResultKind, Validity) for m in e}
_PASSED_FLAG = {Status.PASSED: True, Status.FAILED: False}


def expectation_to_dict(r: ExpectationResult) -> dict[str, Any]:
    status = r.status
    return {
        "text": r.text,
        "passed": _PASSED_FLAG.get(status),
        "evidence": r.evidence,
        "key": r.key,
        "kind": _VALUE[r.kind],
        "status": _VALUE[status],
        "outcome_class": _VALUE[r.outcome_class],
        "reason_code": r.reason_code,
        "score": r.score,
        "threshold": r.threshold,
        "per_invocation_scores": r.per_invocation_scores,
        "gating": r.gating,
        "evidence_refs": list(r.evidence_refs),
        "details": r.details,
    }


def expectation_from_dict(d: Mapping[str, Any]) -> ExpectationResult:
    return ExpectationResult(
        key=str(d.get("key", "")),
        kind=ResultKind(d.get("kind", "validator")),
        text=str(d.get("text", "")),
        status=Status(d.get("status", "NOT_EVALUATED")),
        outcome_class=OutcomeClass(d.get("outcome_class", "unavailable")),
        evidence=str(d.get("evidence", "")) or "(no evidence)",
        score=d.get("score"),
        threshold=d.get("threshold"),
        reason_code=d.get("reason_code"),
        gating=bool(d.get("gating", False)),
        evidence_refs=list(d.get("evidence_refs") or []),
        per_invocation_scores=d.get("per_invocation_scores"),
        details=dict(d.get("details") or {}),
    )


def summarize(expectations: list[ExpectationResult]) -> dict[str, Any]:
    """Recomputed from the expectations on every write and read (grading.md §7)."""
    passed = failed = 0
    ungraded: dict[str, int] = {}
    for r in expectations:
        st = r.status
        if st is _PASSED:
            passed += 1
        elif st is _FAILED:
            failed += 1
        else:
            k = str(r.outcome_class)  # a StrEnum: its value
            ungraded[k] = ungraded.get(k, 0) + 1
    total = passed + failed
    return {
        "passed": passed,
        "failed": failed,
        "total": total,
        "pass_rate": round(passed / total, 4) if total else None,
        "ungraded": ungraded,
    }


def _empty_notes() -> dict[str, list[str]]:
    return {"uncertainties": [], "needs_review": [], "workarounds": []}


_Lazy = functools.partial


class _LazyField:
    """A ``CaseGrade`` field that may be set to a ``_Lazy`` (a ``functools.partial``): it is
    called on first read and its result kept. The value lives in the slot ``_<name>``."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.slot = "_" + name

    def __get__(self, obj: Any, objtype: type | None = None) -> Any:
        if obj is None:
            return self
        value = getattr(obj, self.slot)
        if type(value) is _Lazy:
            value = value()
            setattr(obj, self.slot, value)
        return value

    def __set__(self, obj: Any, value: Any) -> None:
        setattr(obj, self.slot, value)


class CaseGrade:
    """One case execution's grade (grading.json of grading.md §7 via ``to_dict``).

    Every verdict (statuses, outcome classes, scores, gates, validity) is computed by
    ``grade_case``. What only describes the execution (``execution_metrics``,
    ``user_notes_summary``, the scorecard's dict form, the claims ledger unless it gates) is
    built on first read from the evidence the grade keeps; the caller must not mutate that
    evidence afterwards.
    """

    __slots__ = (
        "case",
        "status",
        "outcome_class",
        "validity",
        "expectations",
        "reason_code",
        "_scorecard",
        "gates",
        "_claims",
        "eval_feedback",
        "judge_usage",
        "_execution_metrics",
        "_timing",
        "_user_notes_summary",
        "message",
        "_claims_fn",
        "_regate",
    )

    def __init__(
        self,
        case: dict[str, Any],
        status: Status,
        outcome_class: OutcomeClass,
        validity: Validity,
        expectations: list[ExpectationResult] | None = None,
        reason_code: str | None = None,
        scorecard: dict[str, Any] | _Lazy[dict[str, Any]] | None = None,
        gates: dict[str, Any] | None = None,
        _claims: list[dict[str, Any]] | None = None,
        eval_feedback: dict[str, Any] | None = None,
        judge_usage: JudgeUsage | None = None,
        execution_metrics: dict[str, Any] | _Lazy[dict[str, Any]] | None = None,
        timing: dict[str, float] | _Lazy[dict[str, float]] | None = None,
        user_notes_summary: dict[str, list[str]] | _Lazy[dict[str, list[str]]] | None = None,
        message: str | None = None,
        _claims_fn: Callable[[], list[dict[str, Any]]] | None = None,
    ) -> None:
        self.case = case
        self.status = status
        self.outcome_class = outcome_class
        self.validity = validity
        self.expectations: list[ExpectationResult] = [] if expectations is None else expectations
        self.reason_code = reason_code
        self._scorecard = {} if scorecard is None else scorecard
        self.gates: dict[str, Any] = {} if gates is None else gates
        # None with a _claims_fn: extracted on first read (claims change no verdict unless
        # fail_on_contradicted); None without one: no claims.
        self._claims = _claims if _claims is not None or _claims_fn is not None else []
        self.eval_feedback: dict[str, Any] = (
            {"suggestions": [], "overall": ""} if eval_feedback is None else eval_feedback
        )
        self.judge_usage = JudgeUsage() if judge_usage is None else judge_usage
        self._execution_metrics = {} if execution_metrics is None else execution_metrics
        self._timing = {} if timing is None else timing
        self._user_notes_summary = _empty_notes() if user_notes_summary is None else user_notes_summary
        self.message = message
        self._claims_fn = _claims_fn
        # With claims.fail_on_contradicted: re-decides the verdict for a new claims
        # expectation (``regate_claims``, after model claims are merged). None otherwise.
        self._regate: Callable[[ExpectationResult], Any] | None = None

    # Described by the execution, built on first read (see the class docstring).
    scorecard: dict[str, Any] = _LazyField()  # type: ignore[assignment]
    execution_metrics: dict[str, Any] = _LazyField()  # type: ignore[assignment]
    timing: dict[str, float] = _LazyField()  # type: ignore[assignment]
    user_notes_summary: dict[str, list[str]] = _LazyField()  # type: ignore[assignment]

    @property
    def claims(self) -> list[dict[str, Any]]:
        if self._claims is None:
            self._claims = self._claims_fn() if self._claims_fn is not None else []
            self._claims_fn = None
        return self._claims

    @claims.setter
    def claims(self, value: list[dict[str, Any]]) -> None:
        self._claims, self._claims_fn = value, None

    @property
    def summary(self) -> dict[str, Any]:
        return summarize(self.expectations)

    @property
    def overall_score(self) -> float | None:
        return self.scorecard.get("overall_score")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CaseGrade):
            return NotImplemented
        return self.to_dict() == other.to_dict()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (
            f"CaseGrade(case={self.case!r}, status={self.status!r}, outcome_class={self.outcome_class!r},"
            f" validity={self.validity!r}, expectations={self.expectations!r}, reason_code={self.reason_code!r})"
        )

    def to_dict(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "schema_version": SCHEMA_VERSION,
            "case": dict(self.case),
            "status": _VALUE[self.status],
            "outcome_class": _VALUE[self.outcome_class],
            "validity": _VALUE[self.validity],
            "reason_code": self.reason_code,
            "expectations": [expectation_to_dict(r) for r in self.expectations],
            "summary": summarize(self.expectations),
            "execution_metrics": dict(self.execution_metrics),
            "timing": dict(self.timing),
            "claims": list(self.claims),
            "user_notes_summary": {k: list(v) for k, v in self.user_notes_summary.items()},
            "eval_feedback": dict(self.eval_feedback),
            "judge_usage": self.judge_usage.to_doc(),
            "scorecard": dict(self.scorecard),
            "gates": dict(self.gates),
        }
        if self.message:
            doc["message"] = self.message
        return doc

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> CaseGrade:
        """Read a grading.json document; the incoming summary is never trusted."""
        ju = doc.get("judge_usage") or {}
        notes = doc.get("user_notes_summary") or {}
        return cls(
            case=dict(doc.get("case") or {}),
            status=Status(doc.get("status", "NOT_EVALUATED")),
            outcome_class=OutcomeClass(doc.get("outcome_class", "unavailable")),
            validity=Validity(doc.get("validity", "degraded")),
            expectations=[expectation_from_dict(e) for e in doc.get("expectations") or []],
            reason_code=doc.get("reason_code"),
            scorecard=dict(doc.get("scorecard") or {}),
            gates=dict(doc.get("gates") or {}),
            _claims=list(doc.get("claims") or []),
            eval_feedback=dict(doc.get("eval_feedback") or {"suggestions": [], "overall": ""}),
            judge_usage=JudgeUsage.from_doc(ju),
            execution_metrics=dict(doc.get("execution_metrics") or {}),
            timing=dict(doc.get("timing") or {}),
            user_notes_summary={
                k: list(notes.get(k) or []) for k in ("uncertainties", "needs_review", "workarounds")
            },
            message=doc.get("message"),
        )

    @classmethod
    def crashed(
        cls, case: CaseDef, context: GradeContext, exc: BaseException, *, what: str = "grading crashed"
    ) -> CaseGrade:
        """ERROR / evaluator_error grade of a case whose grading raised (grading.md §2: the
        evaluator crashed), or whose result could not be stored (``what`` says which): the
        last net, so one case never sinks a batch."""
        detail = str(exc)
        if len(detail) > 500:
            detail = detail[:500] + "…"
        grade = cls.no_result(case, context, "evaluator_error", f"{what}: {type(exc).__name__}: {detail}")
        grade.status, grade.outcome_class, grade.validity = (
            Status.ERROR,
            OutcomeClass.EVALUATOR_ERROR,
            Validity.INVALID,
        )
        return grade

    @classmethod
    def no_result(
        cls,
        case: CaseDef,
        context: GradeContext,
        reason_code: str = "no_result",
        message: str | None = None,
    ) -> CaseGrade:
        """UNAVAILABLE grade of a case that has no result line (or no evidence at all)."""
        msg = message or "no result was reported for this case"
        return cls(
            case=case_block(case, context),
            status=Status.UNAVAILABLE,
            outcome_class=OutcomeClass.UNAVAILABLE,
            validity=Validity.DEGRADED,
            reason_code=reason_code,
            scorecard={"strategy": None, "overall_score": None, "passed": None, "dimensions": []},
            gates={
                "compliance": Gate.NOT_GRADED.value,
                "resolution": Gate.NOT_GRADED.value,
                "guards": Gate.NOT_GRADED.value,
                "compliance_score": None,
            },
            eval_feedback={"suggestions": [], "overall": msg},
            # §7's fields are always there: nothing was executed, so every count is 0
            execution_metrics={
                "tool_calls": {},
                "total_tool_calls": 0,
                "total_steps": 0,
                "errors_encountered": 0,
                "output_chars": 0,
                "transcript_chars": 0,
            },
            timing={
                "executor_duration_seconds": 0.0,
                "grader_duration_seconds": 0.0,
                "total_duration_seconds": 0.0,
            },
            message=msg,
        )


def evidence_records(grade: CaseGrade) -> dict[str, str]:
    """The ``code:<key>`` records of a grade (grading.md §1.2), rebuilt from the expectation
    details so a stored grading.json resolves them too; pass to ``resolve_evidence_id``."""
    from .validators.code_execution import code_record

    out = {}
    for r in grade.expectations:
        d = r.details
        if "command" in d and "exit_code" in d:
            extra = f"\n{d['limit']} hit" if d.get("limit") else ""
            out[f"code:{r.key}"] = code_record(
                r.key,
                d["command"],
                d["exit_code"],
                d.get("counts"),
                d.get("stdout_tail", ""),
                d.get("stderr_tail", ""),
                extra,
            )
    return out


def case_block(case: CaseDef, context: GradeContext) -> dict[str, Any]:
    return {
        "run_id": context.run_id,
        "lane_id": context.lane_id,
        "deployment": context.deployment,
        "challenge_key": case.challenge_key or context.challenge_key,
        "case_key": case.case_key,
        "repetition": context.repetition,
        "attempt": context.attempt,
        "pack_version": context.pack_version,
    }


def execution_metrics(evidence: Evidence) -> dict[str, Any]:
    failed = sum(1 for c in evidence.tool_calls if c.status != "ok")
    assistant = sum(1 for m in evidence.messages if m.role == "assistant")
    return {
        "tool_calls": tool_call_counts(evidence),
        "total_tool_calls": len(evidence.tool_calls),
        "total_steps": assistant or len(evidence.invocations),
        "errors_encountered": failed + (1 if evidence.execution_error is not None else 0),
        "output_chars": len(evidence.final_output),
        "transcript_chars": sum(len(m.content) for m in evidence.messages),
    }


# ---------------------------------------------------------------------------
# Grading
# ---------------------------------------------------------------------------


def _side_problem(res: Resolved, side: str) -> VResult | None:
    st = res.state
    if st == REFERENCE_MISSING:
        return VResult(
            Status.NOT_EVALUATED,
            None,
            f"NOT_EVALUATED: {side}: {res.message}",
            REFERENCE_MISSING,
            OutcomeClass.PACK_ERROR,
        )
    if st == INVALID_CHAIN:
        return VResult(
            Status.NOT_EVALUATED,
            None,
            f"NOT_EVALUATED: {side}: {res.message}",
            INVALID_CHAIN,
            OutcomeClass.PACK_ERROR,
        )
    if st == NOT_APPLICABLE:
        return VResult(
            Status.NOT_EVALUATED,
            None,
            f"NOT_EVALUATED: {res.message}",
            "not_applicable",
            OutcomeClass.UNAVAILABLE,
        )
    return None


def _early(vp: _VPlan, actual: Resolved | None, expected: Resolved | None) -> VResult | None:
    """The status rules of grading.md §1.4 for sides that did not resolve plainly."""
    problem = (_side_problem(actual, "target") if actual is not None else None) or (
        _side_problem(expected, "expected_from") if expected is not None else None
    )
    if problem is not None:
        return problem
    for side in (actual, expected):
        if side is not None and side.state == CHANNEL_UNAVAILABLE:
            return VResult(
                Status.UNAVAILABLE,
                None,
                f"UNAVAILABLE: {side.message}",
                CHANNEL_UNAVAILABLE,
                OutcomeClass.UNAVAILABLE,
            )
    if actual is not None and actual.state == ABSENT and vp.vtype not in ABSENCE_TYPES:
        return VResult(Status.FAILED, 0.0, actual.message or f"file not returned: {actual.path}")
    if expected is not None and expected.state == ABSENT:
        return VResult(Status.FAILED, 0.0, expected.message)
    return None


def _run_validator(vp: _VPlan, plan: _Plan, env: Env) -> ExpectationResult:
    """One validator on one case (the plan's ``check`` closure does this faster)."""
    return _make_check(vp)(env)


def _make_check(vp: _VPlan) -> Callable[[Env], ExpectationResult]:
    """The validator's per-case function: resolve both sides, apply the status rules of
    grading.md §1.4, run the bound grade function under the time limit, build the result.
    Everything that does not change between cases is read here once."""
    key, kind, text, threshold, gating = vp.key, vp.kind, vp.text, vp.threshold, vp.ground_truth
    refs, grader, literal = vp.refs, vp.grader, vp.literal
    resolve_target, resolve_expected = vp.resolve_target, vp.resolve_expected
    time_limited, extra_refs = vp.time_limited, vp.extra_refs
    code_ref = f"code:{key}" if vp.vtype == "code_execution" else None

    def result(r: VResult, refs: list[str]) -> ExpectationResult:
        return ExpectationResult(  # positional: this runs once per check on the hot path
            key,
            kind,
            text,
            r.status,
            r.outcome_class or DEFAULT_CLASS[r.status],
            r.raw_evidence,  # rendered, defaulted and clipped on first read
            r.score,
            threshold,
            r.reason_code,
            gating,
            refs,
            r.per_invocation_scores,
            r.details,
        )

    if vp.problem is not None:
        message = f"NOT_EVALUATED: {vp.problem}"

        def problem(env: Env) -> ExpectationResult:
            return result(
                VResult(Status.NOT_EVALUATED, None, message, "invalid_config", OutcomeClass.PACK_ERROR),
                list(refs),
            )

        return problem

    target_final = resolve_target is _final_output

    def check(env: Env) -> ExpectationResult:
        start = _clock()
        if time_limited:
            env.deadline = start + VALIDATOR_TIME_LIMIT
        try:
            if target_final:
                actual = env.final or _final_output(env)
            else:
                actual = resolve_target(env) if resolve_target is not None else None
            expected = literal
            if expected is None and resolve_expected is not None:
                expected = resolve_expected(env)
            if (actual is not None and actual.state != OK) or (expected is not None and expected.state != OK):
                early = _early(vp, actual, expected)
                if early is not None:
                    return result(early, list(refs))
            r = grader(actual, expected, env)
            if type(r) is tuple:  # a plain verdict (status, score, evidence): built directly
                status, score, evidence = r
                if status is _PASSED or actual is None or not actual.truncated:
                    if time_limited and _clock() - start > VALIDATOR_TIME_LIMIT:
                        return result(_timeout_result(), list(refs))
                    return ExpectationResult(
                        key,
                        kind,
                        text,
                        status,
                        DEFAULT_CLASS[status],
                        evidence,
                        score,
                        threshold,
                        None,
                        gating,
                        list(refs),
                        None,
                        {},
                    )
                r = VResult(status, score, evidence)
            if r.status is not _PASSED:  # one test on the passing path, as before
                if r.status is _FAILED and actual is not None and actual.truncated:
                    r = VResult(
                        Status.UNAVAILABLE,
                        None,
                        f"UNAVAILABLE: capture {actual.path} was truncated, a failure on it is not trusted"
                        f" ({r.evidence})"[:1000],
                        "capture_truncated",
                        OutcomeClass.UNAVAILABLE,
                        r.details,
                    )
                elif r.reason_code == "invalid_pattern":
                    r = _pattern_source_named(r, key, vp.expected_text)
            if time_limited and _clock() - start > VALIDATOR_TIME_LIMIT:
                r = _timeout_result()
            ids = list(refs)
            if extra_refs:
                if code_ref is not None:
                    ids.append(code_ref)
                else:
                    ids += [f"tool_call:{i}" for i in r.details.get("matched_indices", [])[:20]]
            return ExpectationResult(  # result(r, ids), inline: the hot path
                key,
                kind,
                text,
                r.status,
                r.outcome_class or DEFAULT_CLASS[r.status],
                r.raw_evidence,
                r.score,
                threshold,
                r.reason_code,
                gating,
                ids,
                r.per_invocation_scores,
                r.details,
            )
        except ValidatorTimeout:
            return result(_timeout_result(), list(refs))
        except InputOverLimits as exc:
            return result(over_limits(exc), list(refs))
        except RecursionError:
            # Data nested deeper than the interpreter recurses (~600 levels on both sides of an
            # equality, a recursive schema): grading.md §2's input over limits, not a crash.
            return result(_too_deep_result(), list(refs))
        except Exception as exc:  # a crashing validator must not sink the case
            msg = f"ERROR: validator crashed: {type(exc).__name__}: {exc}"
            return result(
                VResult(Status.ERROR, None, clip(msg), "exception", OutcomeClass.EVALUATOR_ERROR), list(refs)
            )
        finally:
            env.deadline = _INF

    return check


_clock = time.perf_counter
_INF = float("inf")


def _pattern_source_named(r: VResult, key: str, expected_text: str | None) -> VResult:
    """A pattern RE2 refuses at grading time (grading.md §3.1: NOT_EVALUATED / pack_error)
    named by where the pack took it: the validator's key and its ``expected_from`` reference
    (a case expectation's field, say) or config field, as the publish checks name a path."""
    field = r.details.get("pattern_field", "expected_from")
    if field == "expected_from" and expected_text:
        ref = "(a literal)" if expected_text.lstrip().startswith("literal:") else expected_text.strip()
        field = f"expected_from {ref}"
    text = clip(f"validator {key!r}, {field}: {r.evidence}")
    return VResult(
        r.status, r.score, text, r.reason_code, r.outcome_class, r.details, r.per_invocation_scores
    )


def _too_deep_result() -> VResult:
    return VResult(
        Status.ERROR,
        None,
        f"ERROR: input over limits: the data is nested too deeply for this check (recursion limit"
        f" {sys.getrecursionlimit()})",
        "input_too_large",
        OutcomeClass.EVALUATOR_ERROR,
    )


def _timeout_result() -> VResult:
    return VResult(
        Status.ERROR,
        None,
        f"ERROR: validator exceeded {VALIDATOR_TIME_LIMIT:g} s",
        "timeout",
        OutcomeClass.EVALUATOR_ERROR,
    )


def _run_judge(
    jp: _JudgePlan, judge: Judge | None, plan: _Plan, env: Env, usage: JudgeUsage
) -> ExpectationResult:
    def ungraded(status: Status, klass: OutcomeClass, reason: str, ev: str) -> ExpectationResult:
        return ExpectationResult(
            jp.key, ResultKind.JUDGE, jp.text, status, klass, clip(ev), reason_code=reason
        )

    if jp.mode == "n_wise":
        if judge is None:
            return no_judge_result(jp.key, jp.text, jp.mode)
        ranked = getattr(judge, "ranked_result", None)  # the rank_case second pass, when re-grading
        done = ranked(jp.key) if ranked is not None else None
        if done is not None:
            return done
        return ungraded(
            Status.NOT_EVALUATED,
            OutcomeClass.UNAVAILABLE,
            "pending_rank",
            "NOT_EVALUATED: n_wise judges rank lanes in rank_case, once every lane has a final attempt",
        )
    # The case references first, with or without a judge provider: an unresolved one is the
    # pack's error (grading.md §1.4 rule 3, "the only status for an unresolved case
    # reference"), which a missing provider must not hide; then the provider; then channels.
    ev, case, ctx = env.evidence, env.case, env.context
    blocks: list[tuple[str, str]] = []
    unavailable: ExpectationResult | None = None
    for ref in jp.context_from:
        res = resolve_reference(ref, ev, case, ctx, checks=plan.checks)
        if res.state in (REFERENCE_MISSING, INVALID_CHAIN):
            return ungraded(
                Status.NOT_EVALUATED,
                OutcomeClass.PACK_ERROR,
                REFERENCE_MISSING,
                f"NOT_EVALUATED: context_from {res.message}",
            )
        if res.state == CHANNEL_UNAVAILABLE:
            unavailable = unavailable or ungraded(
                Status.UNAVAILABLE,
                OutcomeClass.UNAVAILABLE,
                CHANNEL_UNAVAILABLE,
                f"UNAVAILABLE: {res.message}",
            )
            continue
        blocks.append((ref, res.text if res.ok else res.message))
    reference = None
    if jp.reference_from:
        res = resolve_reference(str(jp.reference_from), ev, case, ctx, checks=plan.checks)
        if res.state == CHANNEL_UNAVAILABLE:  # §1.4 rule 4: the lane's evidence, not the pack
            unavailable = unavailable or ungraded(
                Status.UNAVAILABLE,
                OutcomeClass.UNAVAILABLE,
                CHANNEL_UNAVAILABLE,
                f"UNAVAILABLE: reference_from {res.message}",
            )
        elif not res.ok:
            return ungraded(
                Status.NOT_EVALUATED,
                OutcomeClass.PACK_ERROR,
                REFERENCE_MISSING,
                f"NOT_EVALUATED: reference_from {res.message or res.state}",
            )
        else:
            reference = res.text
    if judge is None:
        return no_judge_result(jp.key, jp.text, jp.mode)
    if unavailable is not None:
        return unavailable
    records = env.records
    request = JudgeRequest(
        key=jp.key,
        text=jp.text,
        declaration=jp.decl,
        evidence=ev,
        case=case,
        context=ctx,
        context_blocks=blocks,
        reference=reference,
        resolve_id=lambda eid: resolve_evidence_id(eid, ev, case, ctx, records, checks=plan.checks),
    )
    try:
        result = judge.evaluate(request)
    except Exception as exc:
        result = ungraded(
            Status.ERROR,
            OutcomeClass.EVALUATOR_ERROR,
            "exception",
            f"ERROR: judge crashed: {type(exc).__name__}: {exc}",
        )
    usage.add(request.usage)  # the charged amounts too: a resumed lane's budget is rebuilt from them
    return result


_LAZY: dict[str, Any] = {}


def _peer(module: str, name: str) -> Any:
    """A function of a peer module (claims, critique), imported once; None if absent."""
    key = f"{module}.{name}"
    if key not in _LAZY:
        try:
            mod = __import__(f"grading.engine.{module}", fromlist=[name])
            _LAZY[key] = getattr(mod, name)
        except (ImportError, AttributeError):
            _LAZY[key] = None
    return _LAZY[key]


def _claims(spec: Any, plan: _Plan, env: Env, code_details: dict[str, Any]) -> tuple[list[Claim], str | None]:
    extract_claims = _peer("claims", "extract_claims")
    if extract_claims is None:
        return [], None
    try:
        return extract_claims(env.evidence, spec, env.context, code_records=code_details), None
    except Exception as exc:
        return [], f"{type(exc).__name__}: {exc}"


def _claims_expectation(claims: list[Claim], failure: str | None) -> ExpectationResult:
    text = "no contradicted claims"
    if failure is not None:
        return ExpectationResult(
            "claims",
            ResultKind.CLAIMS,
            text,
            Status.ERROR,
            OutcomeClass.EVALUATOR_ERROR,
            clip(f"ERROR: claims extraction crashed: {failure}"),
            reason_code="exception",
            gating=True,
        )
    bad = [c for c in claims if c.verified is False]
    if bad:
        ev = "; ".join(f"{c.id} {c.claim[:120]!r} contradicted: {c.evidence[:200]}" for c in bad[:5])
        return ExpectationResult(
            "claims",
            ResultKind.CLAIMS,
            text,
            Status.FAILED,
            OutcomeClass.FAIL,
            clip(ev),
            score=0.0,
            gating=True,
            evidence_refs=[r for c in bad for r in c.evidence_refs][:20],
        )
    verified = sum(1 for c in claims if c.verified)
    return ExpectationResult(
        "claims",
        ResultKind.CLAIMS,
        text,
        Status.PASSED,
        OutcomeClass.PASS,
        f"{len(claims)} claim{'s' if len(claims) != 1 else ''}, none contradicted ({verified} verified, {len(claims) - verified} unverifiable)",
        score=1.0,
        gating=True,
    )


def _claim_dict(c: Claim) -> dict[str, Any]:
    return {
        "id": c.id,
        "claim": c.claim,
        "type": c.type,
        "kind": c.kind,
        "source": c.source,
        "verified": c.verified,
        "evidence": c.evidence,
        "span": list(c.span) if c.span is not None else None,
        "evidence_refs": list(c.evidence_refs),
    }


def _claim_from_dict(d: Mapping[str, Any]) -> Claim:
    span = d.get("span")
    return Claim(
        id=str(d.get("id") or ""),
        claim=str(d.get("claim") or ""),
        type=str(d.get("type") or ""),
        kind=str(d.get("kind") or ""),
        source=str(d.get("source") or ""),
        verified=d.get("verified"),
        evidence=str(d.get("evidence") or ""),
        span=(int(span[0]), int(span[1])) if isinstance(span, (list, tuple)) and len(span) == 2 else None,
        evidence_refs=[str(r) for r in d.get("evidence_refs") or []],
    )


def regate_claims(grade: CaseGrade) -> bool:
    """Re-decide the claims gate of a fresh ``grade_case`` grade over its current ``claims``
    (grading.md §8: with ``claims.fail_on_contradicted`` every contradicted claim counts,
    the model's (``source: llm``) included). Called after model claims are merged; updates
    the claims expectation, the scorecard, the gates and the case verdict in place. False
    (nothing changed) when the spec does not gate on claims, the deterministic extraction
    crashed (the ERROR stands) or the grade was read from a document (no plan to re-decide)."""
    regate = grade._regate
    if regate is None:
        return False
    idx = next((i for i, e in enumerate(grade.expectations) if e.kind is ResultKind.CLAIMS), None)
    if idx is None or grade.expectations[idx].status is Status.ERROR:
        return False
    new_exp = _claims_expectation([_claim_from_dict(d) for d in grade.claims], None)
    grade.expectations[idx] = new_exp
    sc, status, klass, validity_, resolution_gate, guards_gate = regate(new_exp)
    grade.status, grade.outcome_class, grade.validity = status, klass, validity_
    grade._scorecard = _Lazy(sc.to_dict)
    grade.gates = dict(grade.gates, resolution=resolution_gate, guards=guards_gate)
    grade.reason_code = (
        None if status is _PASSED or status is _FAILED else _case_reason(grade.expectations, klass)
    )
    return True


def _findings(spec: Any, case: CaseDef, context: GradeContext) -> list[Suggestion]:
    if context.case_findings is not None:
        return context.case_findings
    probe_case = _peer("critique", "probe_case")
    if probe_case is None:
        return []
    try:
        return list(probe_case(spec, case, context))
    except Exception:
        # The grade stands without the eval's self-critique; say why instead of hiding it.
        logger.exception("baseline probes of case %s/%s failed", case.challenge_key, case.case_key)
        return []


# The line counts findings by kind: the same kinds give the same line, and the cases of a
# pack repeat a few combinations (a Counter, a sort and a join per case otherwise).
_OVERALL_LINES: dict[tuple[str, ...], str] = {}
_OVERALL_LINES_SIZE = 256


def _overall_line(findings: list[Suggestion]) -> str:
    kinds = tuple(sorted(s.finding for s in findings)) if findings else ()
    line = _OVERALL_LINES.get(kinds)
    if line is None:
        line = _overall_line_uncached(findings)
        if len(_OVERALL_LINES) >= _OVERALL_LINES_SIZE:
            _OVERALL_LINES.clear()
        _OVERALL_LINES[kinds] = line
    return line


def _overall_line_uncached(findings: list[Suggestion]) -> str:
    overall_line = _peer("critique", "overall_line")
    try:
        return overall_line(findings)
    except Exception:
        logger.exception("critique.overall_line failed; the counts line is used instead")
        if not findings:
            return "No issues found in this case's assertions."
        counts: dict[str, int] = {}
        for s in findings:
            counts[s.finding] = counts.get(s.finding, 0) + 1
        return f"{len(findings)} findings: " + ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))


def _suggestion_dict(s: Suggestion) -> dict[str, Any]:
    d: dict[str, Any] = {"reason": s.reason, "finding": s.finding, "source": s.source}
    if s.assertion is not None:
        d = {"assertion": s.assertion, **d}
    return d


_GATE_OF = {Status.PASSED: Gate.PASSED.value, Status.FAILED: Gate.FAILED.value}


def _gate_from(status: Status) -> str:
    return _GATE_OF.get(status, _NOT_GRADED)


def _ground_truth_gate(plans: list[_VPlan], results: list[ExpectationResult]) -> GatingInput | None:
    gt = [r for vp, r in zip(plans, results, strict=True) if vp.ground_truth]
    if not gt:
        return None
    if any(r.status is Status.FAILED for r in gt):
        return GatingInput("resolution gate", Status.FAILED, OutcomeClass.FAIL)
    for st in (Status.ERROR, Status.UNAVAILABLE, Status.NOT_EVALUATED):
        r = next((x for x in gt if x.status is st), None)
        if r is not None:
            return GatingInput("resolution gate", st, r.outcome_class)
    return GatingInput("resolution gate", Status.PASSED, OutcomeClass.PASS)


def grade_case(
    evidence: Evidence,
    case: CaseDef,
    spec: Any,
    *,
    context: GradeContext,
    judge: Judge | None = None,
) -> CaseGrade:
    """Grade one case execution. Deterministic for the same inputs (timing aside)."""
    started = _clock()
    try:
        grade = _grade(evidence, case, spec, context, judge)
    except Exception as exc:  # the last net: never let one case sink a batch
        logger.exception("grading case %s/%s crashed", case.challenge_key, case.case_key)
        grade = CaseGrade.crashed(case, context, exc)
    grade._timing = _Lazy(_timing, evidence.timing, _clock() - started)  # built on first read
    return grade


def _timing(timing: Any, grader: float) -> dict[str, float]:
    executor = (
        float(getattr(timing, "executor_duration_seconds", 0.0) or 0.0) if isinstance(timing, Timing) else 0.0
    )
    return {
        "executor_duration_seconds": executor,
        "grader_duration_seconds": grader,
        "total_duration_seconds": executor + grader,
    }


def _grade(
    evidence: Evidence, case: CaseDef, spec: Any, context: GradeContext, judge: Judge | None
) -> CaseGrade:
    plan = plan_for(spec)
    env = Env(evidence, case, context, "", {}, _INF, plan.checks)
    expectations: list[ExpectationResult] = []

    guard_results = []
    if plan.allowed_tools is not None:
        guard_results.append(guards_mod.run_guard("rules.allowed_tools", plan.allowed_tools, evidence))
    if plan.allowed_hosts is not None:
        guard_results.append(guards_mod.run_guard("rules.allowed_hosts", plan.allowed_hosts, evidence))
    if guard_results:
        expectations.extend(guard_results)

    v_results: list[ExpectationResult] = []
    code_details: dict[str, Any] = {}
    for vp in plan.validators:
        env.key = vp.key
        r = vp.check(env)
        v_results.append(r)
        if vp.extra_refs and r.details and vp.vtype == "code_execution":
            code_details[vp.key] = r.details
    expectations += v_results

    rule_outcomes: list[ExpectationResult] = []
    if plan.rules:
        tasks = derive_tasks(evidence, context, plan.shell_tools) if plan.rules_need_tasks else None
        for rp in plan.rules:
            try:
                rule_outcomes.append(rp.run(evidence, tasks))
            except Exception as exc:
                required = bool(cfg(rp.rule, "required", True))
                rule_outcomes.append(
                    rule_result(
                        rp.key,
                        str(cfg(rp.rule, "label", rp.key)),
                        Status.ERROR,
                        OutcomeClass.EVALUATOR_ERROR,
                        clip(f"ERROR: rule crashed: {type(exc).__name__}: {exc}"),
                        None,
                        "exception",
                        required,
                    )
                )
        expectations.extend(rule_outcomes)

    usage = None
    judge_results: dict[str, ExpectationResult] = {}
    if plan.judges:
        usage = JudgeUsage()
        for jp in plan.judges:
            env.key = jp.key
            r = _run_judge(jp, judge, plan, env, usage)
            judge_results[jp.key] = r
            expectations.append(r)

    claims_exp = None
    claims_fn: Callable[[], list[dict[str, Any]]] | None = None
    if plan.claims_gate:
        claims, claims_failure = _claims(spec, plan, env, code_details)
        claims_exp = _claims_expectation(claims, claims_failure)
        expectations.append(claims_exp)
        claim_dicts: list[dict[str, Any]] | None = [_claim_dict(c) for c in claims]
    else:
        claim_dicts = None

        def claims_fn() -> list[dict[str, Any]]:
            found, _failure = _claims(spec, plan, env, code_details)
            return [_claim_dict(c) for c in found]

    # Scorecard (§10)
    compliance = compliance_of(rule_outcomes) if plan.has_rules else _NO_COMPLIANCE
    compliance_score, compliance_gate, c_status, c_class = compliance
    memo = plan.verdicts
    if memo is not None:  # the verdict reads only the check outcomes: look it up
        key = (
            tuple([(r.status, r.score, r.outcome_class) for r in v_results]),
            compliance_score,
            c_status,
            c_class,
        )
        found = memo.get(key)
        if found is None:
            found = _verdict(plan, evidence, v_results, judge_results, compliance, claims_exp, guard_results)
            if len(memo) < _VERDICTS_PER_PLAN:
                memo[key] = found
    else:
        found = _verdict(plan, evidence, v_results, judge_results, compliance, claims_exp, guard_results)
    sc, status, klass, validity_, resolution_gate, guards_gate = found

    findings = context.case_findings
    if findings is None:
        findings = _findings(spec, case, context)
    feedback: dict[str, Any] = {
        "suggestions": [_suggestion_dict(s) for s in findings],
        "overall": _overall_line(findings),
    }
    if context.eval_feedback_ref:
        feedback["run"] = context.eval_feedback_ref

    reason = None
    if status is not _PASSED and status is not _FAILED:
        reason = _case_reason(expectations, klass)
    # Every slot set directly: the constructor's defaulting is for callers, not this hot path.
    g = _new_grade(CaseGrade)
    g.case = case_block(case, context)
    g.status = status
    g.outcome_class = klass
    g.validity = validity_
    g.expectations = expectations
    g.reason_code = reason
    g._scorecard = _Lazy(sc.to_dict)
    g.gates = {
        "compliance": compliance_gate,
        "resolution": resolution_gate,
        "guards": guards_gate,
        "compliance_score": compliance_score,
    }
    g._claims = claim_dicts
    g.eval_feedback = feedback
    g.judge_usage = usage if usage is not None else JudgeUsage()
    g._execution_metrics = _Lazy(execution_metrics, evidence)
    g._timing = _NO_TIMING
    g._user_notes_summary = (
        _Lazy(user_notes_summary, evidence.user_notes)
        if evidence.channels.user_notes
        else _Lazy(_empty_notes)
    )
    g.message = None
    g._claims_fn = claims_fn
    g._regate = None
    if claims_exp is not None:

        def regate(new_claims_exp: ExpectationResult) -> _Verdict:
            return _verdict(
                plan, evidence, v_results, judge_results, compliance, new_claims_exp, guard_results
            )

        g._regate = regate
    return g


_new_grade = object.__new__
_NO_TIMING: _Lazy[dict[str, float]] = _Lazy(dict)  # replaced by grade_case


_NOT_GRADED = Gate.NOT_GRADED.value
_NO_COMPLIANCE: tuple[float | None, str, Status | None, OutcomeClass | None] = (None, _NOT_GRADED, None, None)
_VERDICTS_PER_PLAN = 1024
_MEMO_SOURCES = frozenset({"validators", "compliance"})


def _memoizable(plan: _Plan) -> bool:
    """Whether the case verdict is a function of the validator outcomes and the compliance
    figures alone (no guards, judges, claims gate; dimensions that read no evidence)."""
    return (
        not plan.judges
        and not plan.claims_gate
        and plan.allowed_tools is None
        and plan.allowed_hosts is None
        and all(d.source in _MEMO_SOURCES for d in plan.dims)
    )


_Verdict = tuple[ScorecardOutcome, Status, OutcomeClass, Validity, str, str]


def _verdict(
    plan: _Plan,
    evidence: Evidence,
    v_results: list[ExpectationResult],
    judge_results: dict[str, ExpectationResult],
    compliance: tuple[float | None, str, Status | None, OutcomeClass | None],
    claims_exp: ExpectationResult | None,
    guard_results: list[ExpectationResult],
) -> _Verdict:
    """Scorecard, gates and the case verdict (grading.md §5.4, §10.1-§10.2):
    (scorecard, status, outcome class, validity, resolution gate, guards gate)."""
    compliance_score, _gate, c_status, c_class = compliance
    dims, used = [], []
    for d in plan.dims:
        dr, members = evaluate_dimension(
            d, evidence, v_results, judge_results, compliance_score, plan.metric_collectors
        )
        dims.append(dr)
        used.extend(members)
    sc = run_scorecard(plan.scorecard, dims)
    inputs = list(sc.inputs)
    resolution_gate = _NOT_GRADED
    if plan.has_rules:
        assert c_status is not None
        inputs.append(GatingInput("compliance gate", c_status, c_class))
        gt = (plan.has_ground_truth and _ground_truth_gate(plan.validators, v_results)) or GatingInput(
            "resolution gate", c_status, c_class
        )
        inputs.append(gt)
        resolution_gate = _gate_from(gt.status)
    if claims_exp is not None:
        inputs.append(GatingInput("claims", claims_exp.status, claims_exp.outcome_class))
    guards_gate = _NOT_GRADED
    guard_failed = False
    if guard_results:
        guard_failed = any(g.status is Status.FAILED for g in guard_results)
        inputs.extend(
            GatingInput(g.key, g.status, g.outcome_class)
            for g in guard_results
            if g.status is not Status.PASSED
        )
        if guard_failed:
            guards_gate = Gate.FAILED.value
        elif all(g.status is Status.PASSED for g in guard_results):
            guards_gate = Gate.PASSED.value
    status, klass = verdict(inputs, guard_failed)
    if plan.has_rules and status is _PASSED and sc.passed is not True:
        # §5.4: a case with rules passes only when both gates pass *and the scorecard passes*.
        # Gates passed on their own (a passed guard, informational or not-applicable rules
        # only) with a scorecard that graded nothing (its validators pack errors, say) were a
        # PASSED case; it has no verdict (§10.2 step 3), as the same case without rules.
        status = Status.NOT_EVALUATED
        pack = any(i.outcome_class is OutcomeClass.PACK_ERROR for i in sc.inputs)
        klass = OutcomeClass.PACK_ERROR if pack else OutcomeClass.UNAVAILABLE
    return sc, status, klass, validity(dims, used), resolution_gate, guards_gate


def _case_reason(expectations: list[ExpectationResult], klass: OutcomeClass) -> str | None:
    for r in expectations:
        if r.outcome_class is klass and r.reason_code:
            return r.reason_code
    return None
