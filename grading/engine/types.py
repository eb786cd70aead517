"""Core typed data of the grading engine (spec/grading.md §1, §2, §7).

Plain dataclasses with slots: these objects are built once per case execution on the hot
path, so they stay cheap. Pydantic is used for the evaluation spec (validated once per
pack version), not here. Nothing in ``grading.engine`` imports Django.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

# Scores are computed in binary floating point: weights 0.3 and 0.1 over scores 1 and 0 give
# 0.7499999999999999 for an exact 0.75, a cost of 0.02 against a max of 0.1 gives
# 0.7999999999999999 for 0.8, and the mean of 0.3 and 0.6 is 0.44999999999999996. A score
# within this distance of its threshold meets it (§2, §10.2: thresholds are inclusive); real
# differences in [0, 1] are far larger.
THRESHOLD_TOLERANCE = 1e-9


def meets(score: float, threshold: float) -> bool:
    """``score >= threshold``, inclusive up to floating-point rounding: the one comparison of
    a computed score or agreement with its threshold (scorecard, validators, judges, health)."""
    return score >= threshold - THRESHOLD_TOLERANCE


class Status(StrEnum):
    PASSED = "PASSED"
    FAILED = "FAILED"
    NOT_EVALUATED = "NOT_EVALUATED"
    UNAVAILABLE = "UNAVAILABLE"
    ERROR = "ERROR"


class OutcomeClass(StrEnum):
    PASS = "pass"
    FAIL = "fail"
    UNAVAILABLE = "unavailable"
    INFRA_ERROR = "infra_error"
    PACK_ERROR = "pack_error"
    EVALUATOR_ERROR = "evaluator_error"


class ResultKind(StrEnum):
    VALIDATOR = "validator"
    TRAJECTORY = "trajectory"
    RULE = "rule"
    GUARD = "guard"
    JUDGE = "judge"
    CLAIMS = "claims"


class Validity(StrEnum):
    VALID = "valid"
    DEGRADED = "degraded"
    INVALID = "invalid"


class Gate(StrEnum):
    PASSED = "passed"
    FAILED = "failed"
    NOT_GRADED = "not_graded"


# The statuses that carry a verdict about the agent.
GRADED_STATUSES = frozenset({Status.PASSED, Status.FAILED})


# ---------------------------------------------------------------------------
# Canonical text of JSON values (grading.md §1.4 rule 7)
# ---------------------------------------------------------------------------


def _canonical_numbers(value: Any) -> Any:
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            # NaN and infinities are not JSON; Python's json reads them (NaN, 1e400) from
            # agents' replies. null, as the stored evidence has them (runs.storable).
            return None
        if value.is_integer():
            return int(value)
        return value
    if isinstance(value, dict):
        return {str(k): _canonical_numbers(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_canonical_numbers(v) for v in value]
    return value


def canonical_json(value: Any) -> str:
    """Canonical JSON: sorted keys, no insignificant whitespace, non-ASCII kept,
    integral numbers without ``.0``, other floats in shortest round-trip form."""
    return json.dumps(
        _canonical_numbers(value),
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        allow_nan=False,
    )


def as_text(value: Any) -> str:
    """A value as text: strings verbatim, everything else canonical JSON."""
    if isinstance(value, str):
        return value
    return canonical_json(value)


# ---------------------------------------------------------------------------
# Evidence (grading.md §1.1)
# ---------------------------------------------------------------------------


@dataclass(slots=True)
class Message:
    index: int
    role: str  # system | user | assistant | tool
    content: str
    origin: str = "agent"  # agent | gateway
    attributes: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class ToolCall:
    index: int  # 0-based over the whole case
    name: str
    args: dict[str, Any] = field(default_factory=dict)
    id: str | None = None
    result: Any = None
    status: str = "ok"  # ok | error
    started_at: str | None = None
    ended_at: str | None = None
    attributes: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class Invocation:
    id: str
    user_content: str | None = None
    tool_call_indexes: list[int] = field(default_factory=list)
    final_response: str | None = None


@dataclass(slots=True)
class FileEntry:
    path: str  # normalised, relative to the working directory
    content: str | None  # UTF-8 text (None when the bytes are not text)
    size: int
    sha256: str
    truncated: bool = False
    content_bytes: bytes | None = None  # raw bytes when the file is binary


@dataclass(slots=True)
class Task:
    description: str = ""
    plan: str = ""
    summary: str = ""
    executed_commands: list[str] = field(default_factory=list)


@dataclass(slots=True)
class Resolution:
    status: str | None = None
    summary: str | None = None
    plan: str | None = None
    gateway_summary: str | None = None


@dataclass(slots=True)
class Metrics:
    input_tokens: int | None = None
    output_tokens: int | None = None
    total_tokens: int | None = None
    cost_usd: float | None = None
    latency_ms: float | None = None
    ttft_ms: float | None = None
    model: str | None = None


@dataclass(slots=True)
class Timing:
    started_at: str | None = None
    ended_at: str | None = None
    executor_duration_seconds: float = 0.0


@dataclass(slots=True)
class RenderedPrompt:
    system: str | None = None
    instructions: str = ""
    tool_policy: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class Channels:
    """Which evidence channels the executor reported (grading.md §1.1 "Channels").

    A channel that is False is *unavailable*: checks that need it are UNAVAILABLE,
    reason ``channel_unavailable``; its evidence is never fabricated.
    """

    messages: bool = True
    tool_calls: bool = True
    files: bool = True
    tasks: bool = True
    resolution: bool = True
    metrics: bool = True
    user_notes: bool = True


@dataclass(slots=True)
class Evidence:
    """One case execution's evidence (the successful attempt of one repetition)."""

    final_output: str = ""  # text; a JSON value is stored as its canonical text
    final_output_value: Any = ""  # the value as reported (str or JSON)
    messages: list[Message] = field(default_factory=list)
    invocations: list[Invocation] = field(default_factory=list)
    tool_calls: list[ToolCall] = field(default_factory=list)
    files: dict[str, FileEntry] = field(default_factory=dict)
    tasks: list[Task] | None = None  # None: not reported, derive (grading.md §5.2)
    resolution: Resolution | None = None  # None: not reported, derive (§5.3)
    user_notes: str = ""
    metrics: Metrics = field(default_factory=Metrics)
    timing: Timing = field(default_factory=Timing)
    rendered_prompt: RenderedPrompt = field(default_factory=RenderedPrompt)
    channels: Channels = field(default_factory=Channels)
    execution_error: str | None = None
    limit_hit: bool = False
    attempt_ok: bool = True
    raw: dict[str, Any] = field(default_factory=dict)  # the response as received


# ---------------------------------------------------------------------------
# The case being graded and the run context
# ---------------------------------------------------------------------------

MISSING: Any = type("Missing", (), {"__repr__": lambda self: "MISSING", "__bool__": lambda self: False})()


@dataclass(slots=True)
class AssetRef:
    key: str
    path: str
    kind: str = ""
    media_type: str = ""
    scope: str = "version"  # version | challenge | case
    artifact_id: str | None = None
    sha256: str | None = None
    size: int | None = None
    has_file: bool = False  # a stored file exists (content can be loaded)


@dataclass(slots=True)
class CaseInput:
    key: str
    kind: str = ""
    value: Any = MISSING  # MISSING when the input declares no value
    artifact_key: str | None = None
    path: str | None = None


@dataclass(slots=True)
class CaseExpectation:
    key: str
    kind: str = ""
    value: Any = MISSING
    source: str | None = None  # "input:<k>" | "artifact:<a>"
    artifact_key: str | None = None


@dataclass(slots=True)
class CaseDef:
    challenge_key: str
    case_key: str
    payload: dict[str, Any] = field(default_factory=dict)
    inputs: list[CaseInput] = field(default_factory=list)
    expectations: list[CaseExpectation] = field(default_factory=list)
    assets: list[AssetRef] = field(default_factory=list)  # case-scoped assets
    artifact_keys: list[str] = field(default_factory=list)  # version assets the case names
    empty_case: bool = False  # the one empty case of a run without an input set
    # case_timeout_seconds: each attempt's timeout for this case instead of the deployment's
    # (pack-format §4.2); 0 = no override.
    timeout_seconds: int = 0
    content_hash: str | None = None


@dataclass(slots=True)
class GradeContext:
    """Everything outside the evidence and the case that grading reads."""

    run_id: str = "offline"
    lane_id: str = "default"
    deployment: str = "default"
    repetition: int = 1
    attempt: int = 1
    pack_slug: str = ""
    pack_version: int = 0
    challenge_key: str = ""
    challenge_instructions: str = ""  # the raw template
    rendered_instructions: str = ""
    version_assets: dict[str, AssetRef] = field(default_factory=dict)
    challenge_assets: dict[str, AssetRef] = field(default_factory=dict)
    challenge_artifact_keys: list[str] = field(default_factory=list)
    # Loads an asset's bytes; returns None when no file is stored.
    asset_loader: Callable[[AssetRef], bytes | None] | None = None
    working_directory: str = "/workspace"
    execution_mode: str = "native"
    tool_policy: dict[str, Any] = field(default_factory=dict)
    evidence_level: str = "structured"
    deployment_kind: str = "hosted_http"
    seed: int = 0
    # Run-level eval feedback id/link, filled by the runs app.
    eval_feedback_ref: str | None = None
    # Precomputed baseline-probe findings (grading.md §9a) for this case; None: grade_case
    # computes them with critique.probe_case. Probes pass [] so grading does not recurse.
    case_findings: list[Suggestion] | None = None


# ---------------------------------------------------------------------------
# Results (grading.md §2, §7)
# ---------------------------------------------------------------------------


MAX_EVIDENCE = 1000

# An evidence text, a function that renders it, or a deferred call ``(function, *arguments)``
# that renders it: graders on the hot path defer their human-readable text (quoting, number
# formatting, joins) until someone reads it. The tuple form is the cheap one: a closure's
# captured variables are cells that its enclosing grade function allocates on every call.
EvidenceText = str | Callable[[], str] | tuple[Any, ...]


def render_evidence(evidence: EvidenceText, status: Status) -> str:
    """The evidence as stored: rendered, never empty, at most ``MAX_EVIDENCE`` characters.
    Rendering never raises: a failing renderer is reported in the text (the verdict stands)."""
    if isinstance(evidence, str):
        text = evidence
    else:
        try:
            text = evidence[0](*evidence[1:]) if type(evidence) is tuple else evidence()
        except Exception as exc:
            text = f"{status.value}: (evidence text failed to render: {type(exc).__name__}: {exc})"
    if not text:
        return f"{status.value}: (no detail)"
    if len(text) > MAX_EVIDENCE:
        return text[: MAX_EVIDENCE - 1] + "\u2026"
    return text


class ExpectationResult:
    """One expectation's result (grading.md §2, §7). Every verdict field is set when the
    result is built; ``evidence`` may be given as a function and is rendered (then kept) on
    first read, so grading a case does not pay for text nobody reads."""

    __slots__ = (
        "key",
        "kind",
        "text",
        "status",
        "outcome_class",
        "_evidence",
        "score",
        "threshold",
        "reason_code",
        "gating",
        "evidence_refs",
        "per_invocation_scores",
        "details",
    )

    def __init__(
        self,
        key: str,
        kind: ResultKind,
        text: str,
        status: Status,
        outcome_class: OutcomeClass,
        evidence: EvidenceText,  # never empty, at most 1,000 characters once rendered
        score: float | None = None,
        threshold: float | None = None,
        reason_code: str | None = None,
        gating: bool = False,
        evidence_refs: list[str] | None = None,
        per_invocation_scores: list[float | None] | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        self.key = key
        self.kind = kind
        self.text = text
        self.status = status
        self.outcome_class = outcome_class
        self._evidence = evidence
        self.score = score
        self.threshold = threshold
        self.reason_code = reason_code
        self.gating = gating
        self.evidence_refs: list[str] = [] if evidence_refs is None else evidence_refs
        self.per_invocation_scores = per_invocation_scores
        self.details: dict[str, Any] = {} if details is None else details

    @property
    def evidence(self) -> str:
        ev = self._evidence
        if type(ev) is not str or not ev or len(ev) > MAX_EVIDENCE:
            ev = self._evidence = render_evidence(ev, self.status)
        return ev

    @evidence.setter
    def evidence(self, value: EvidenceText) -> None:
        self._evidence = value

    @property
    def passed(self) -> bool | None:
        if self.status is Status.PASSED:
            return True
        if self.status is Status.FAILED:
            return False
        return None

    def _fields(self) -> tuple[Any, ...]:
        return (
            self.key,
            self.kind,
            self.text,
            self.status,
            self.outcome_class,
            self.evidence,
            self.score,
            self.threshold,
            self.reason_code,
            self.gating,
            self.evidence_refs,
            self.per_invocation_scores,
            self.details,
        )

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        assert isinstance(other, ExpectationResult)
        return self._fields() == other._fields()

    __hash__ = None  # type: ignore[assignment]  # mutable, like the dataclass it replaces

    def __repr__(self) -> str:
        names = [n.lstrip("_") for n in self.__slots__]
        return (
            "ExpectationResult("
            + ", ".join(f"{n}={v!r}" for n, v in zip(names, self._fields(), strict=True))
            + ")"
        )


@dataclass(slots=True)
class DimensionResult:
    key: str
    source: str
    score: float | None
    status: Status
    gate: bool = False
    pass_threshold: float | None = None
    weight: float = 1.0
    outcome_class: OutcomeClass | None = None


@dataclass(slots=True)
class Claim:
    id: str
    claim: str
    type: str  # factual | process | quality
    kind: str  # tests_ran | tests_pass | file_saved | files_created_count | command_ran | llm
    source: str  # deterministic | llm
    verified: bool | None
    evidence: str
    span: tuple[int, int] | None = None
    evidence_refs: list[str] = field(default_factory=list)


@dataclass(slots=True)
class Suggestion:
    reason: str
    finding: str  # no_discrimination | mostly_unavailable | pack_error | judge_disagreement |
    # unstable_across_repeats | budget_exhausted | trivially_satisfied | fails_on_reference | llm
    source: str = "deterministic"  # deterministic | llm
    assertion: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.assertion is not None:
            out["assertion"] = self.assertion
        out["reason"] = self.reason
        out["finding"] = self.finding
        out["source"] = self.source
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Suggestion:
        return cls(
            reason=str(data.get("reason", "")),
            finding=str(data.get("finding", "llm")),
            source=str(data.get("source", "deterministic")),
            assertion=data.get("assertion"),
        )


@dataclass(slots=True)
class EvalFeedback:
    """The ``eval_feedback`` object (grading.md §7, §9): suggestions plus a one-line overall."""

    suggestions: list[Suggestion] = field(default_factory=list)
    overall: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"suggestions": [s.to_dict() for s in self.suggestions], "overall": self.overall}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EvalFeedback:
        return cls(
            suggestions=[Suggestion.from_dict(s) for s in data.get("suggestions") or []],
            overall=str(data.get("overall", "")),
        )


@dataclass(slots=True)
class JudgeUsage:
    """Judge spend. ``input_tokens``, ``output_tokens`` and ``cost_usd`` are what the
    provider reported (cost None: unknown); ``charged_tokens`` and ``charged_usd`` are what
    the calls counted against ``judge_limits`` (grading.md §6.4): the reported usage, or for a
    call whose usage was not reported, its reservation. A resumed lane's budget is rebuilt
    from the charged amounts; they are never shown as cost."""

    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = 0.0
    charged_tokens: int = 0
    charged_usd: float = 0.0

    def add(self, part: JudgeUsage) -> None:
        self.calls += part.calls
        self.input_tokens += part.input_tokens
        self.output_tokens += part.output_tokens
        if self.cost_usd is not None:
            self.cost_usd = None if part.cost_usd is None else self.cost_usd + part.cost_usd
        self.charged_tokens += part.charged_tokens
        self.charged_usd += part.charged_usd

    def charged(self) -> tuple[int, float]:
        """The tokens and USD charged, never less than the reported usage (a judge that fills
        in only the reported fields, like the seam's test doubles, is charged those)."""
        return (
            max(self.charged_tokens, self.input_tokens + self.output_tokens),
            max(self.charged_usd, self.cost_usd or 0.0),
        )

    @property
    def charged_as_reported(self) -> bool:
        """True when the charge is exactly the reported usage (every call reported it)."""
        return self.cost_usd is not None and self.charged() == (
            self.input_tokens + self.output_tokens,
            self.cost_usd,
        )

    def to_doc(self) -> dict[str, Any]:
        """The ``judge_usage`` document; the charged amounts only when they differ from the
        reported usage (they default to it when read back)."""
        doc: dict[str, Any] = {
            "calls": self.calls,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cost_usd": self.cost_usd,
        }
        if not self.charged_as_reported:
            doc["charged_tokens"], doc["charged_usd"] = self.charged()
        return doc

    @classmethod
    def from_doc(cls, doc: Any) -> JudgeUsage:
        doc = doc if isinstance(doc, dict) else {}
        tokens_in, tokens_out = int(doc.get("input_tokens") or 0), int(doc.get("output_tokens") or 0)
        cost = doc.get("cost_usd", 0.0)
        return cls(
            calls=int(doc.get("calls") or 0),
            input_tokens=tokens_in,
            output_tokens=tokens_out,
            cost_usd=cost,
            charged_tokens=int(doc.get("charged_tokens", tokens_in + tokens_out) or 0),
            charged_usd=float(doc.get("charged_usd", cost or 0.0) or 0.0),
        )
