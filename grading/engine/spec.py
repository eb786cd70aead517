"""Pydantic models of ``version.evaluation_spec`` (pack-format §7, grading.md §3-§10).

One definition, embedded by the pack parser (``packs/bundle/``) and read by the grading
engine. Models are closed (``extra="forbid"``, ``strict=True``); free-form values are
``dict[str, JsonValue]``. Single-field value rules raise ``PydanticCustomError`` with the
exact pack-format message; rules that combine fields or objects are publish checks in
``registry.check_evaluation_spec``. Validate raw YAML data with ``check_model`` (exact
messages, unknown keys, one pass), then build the instance the engine uses with
``EvaluationSpec.model_validate(cleaned)``: defaults of pack-format §5.4 are applied there.

Reading helpers for the grader: ``EvaluationSpec.validator_config(v)`` (the parsed, cached
config model of a validator), ``EvaluationSpec.dimensions`` (dimensions expanded from the
legacy forms, defaults applied), ``judge_provider_for(model)``.
"""

from __future__ import annotations

import contextlib
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, PrivateAttr, model_validator

from grading.engine.configs import (
    CONFIG_MODELS,
    LENIENT_TYPES,
    VALIDATOR_TYPE_NAMES,
    ConfigModel,
    config_model_for,
)
from grading.engine.configs.fields import (
    Bool,
    Choice,
    FreeForm,
    Key,
    NonEmptyList,
    NonNegativeFloat,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    Ranged,
    Ref,
    Schema,
    Text,
    Trimmed,
    Unit,
    fail,
    nullable_optionals,
)
from grading.engine.modelcheck import ConfigFor


class Closed(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, json_schema_extra=nullable_optionals)


def _not_blank(value: str) -> str:
    if not value.strip():
        raise fail("is required")
    return value


RequiredRef = Annotated[Ref, AfterValidator(_not_blank)]
RequiredText = Annotated[Text, AfterValidator(_not_blank)]


# ---------------------------------------------------------------------------
# Vocabularies
# ---------------------------------------------------------------------------

JUDGE_MODES = ("deterministic", "llm_judge", "hybrid")
METRIC_TYPES = ("numeric", "text", "boolean")
CHECK_TYPES = ("file_capture", "directory_listing")
KNOWN_COLLECTORS = (
    "run_total_latency_ms",
    "run_ttft_ms",
    "run_input_tokens",
    "run_output_tokens",
    "run_total_tokens",
    "run_agent_tokens",
    "run_race_context_tokens",
    "run_model_cost_usd",
    "run_completed_successfully",
    "run_failure_count",
    "run_tool_call_count",
    "behavioral_recovery_score",
    "behavioral_exploration_efficiency_score",
    "behavioral_error_cascade_score",
    "behavioral_scope_adherence_score",
    "validator_pass_rate",
)
UNSUPPORTED_COLLECTORS = {
    "behavioral_confidence_calibration_score": "is not supported until confidence reporting lands",
}
SIGNAL_KEYS = ("recovery_behavior", "exploration_efficiency", "error_cascade", "scope_adherence")
JUDGE_METHODS = ("rubric", "assertion", "n_wise", "reference")
NUMERIC_JUDGE_METHODS = ("rubric", "reference", "n_wise")
CONSENSUS_AGGREGATIONS = ("median", "mean", "majority_vote", "unanimous")
POSITION_DEBIASING = ("shuffle", "cyclic", "none")
STRATEGIES = ("weighted", "binary", "hybrid")
DIMENSION_SOURCES = (
    "validators",
    "metric",
    "reliability",
    "latency",
    "cost",
    "behavioral",
    "llm_judge",
    "human_preference",
    "compliance",
)
# Sources whose score is already a 0..1 quality signal: better_direction is always "higher".
HIGHER_ONLY_SOURCES = (
    "validators",
    "reliability",
    "behavioral",
    "llm_judge",
    "human_preference",
    "compliance",
)
# Sources normalised from a raw figure: better_direction is "higher" or "lower", no default.
NORMALIZED_SOURCES = ("metric", "latency", "cost")
LEGACY_DIMENSIONS = ("correctness", "reliability", "latency", "cost", "behavioral")
RULE_VALIDATORS = ("pattern_match", "job_resolution_status", "task_count")
TASK_FIELDS = (
    "executed_commands",
    "task_summary",
    "task_description",
    "task_plan",
    "agent_messages",
    "operational_rules",
)
JOB_FIELDS = ("job_resolution", "job_plan", "gateway_messages", "gateway_summary")
DEFAULT_SHELL_TOOL_NAMES = ("Bash", "bash", "shell", "exec", "run_command", "terminal")
DEFAULT_WRITE_TOOL_NAMES = ("Write", "write_file", "create_file", "Edit", "edit_file")
DEFAULT_JUDGE_SAMPLES = 3
MAX_JUDGE_SAMPLES = 10
DEFAULT_CAPTURE_BYTES = 1 << 20
GROUND_TRUTH_TYPES = ("code_execution", "postcondition")

# Judge model name prefixes (lower case) -> provider (pack-format §7.3); any "/" is openrouter.
_PROVIDER_PREFIXES = (
    ("claude-", "anthropic"),
    ("gpt-", "openai"),
    ("o1", "openai"),
    ("o3", "openai"),
    ("o4", "openai"),
    ("text-embedding", "openai"),
    ("gemini-", "gemini"),
    ("grok-", "xai"),
    ("mistral-", "mistral"),
)


def judge_provider_for(model: str) -> str | None:
    """The provider a judge model name implies: anthropic, openai, gemini, xai, mistral,
    openrouter; None when it cannot be inferred."""
    name = model.strip().lower()
    if not name:
        return None
    for prefix, provider in _PROVIDER_PREFIXES:
        if name.startswith(prefix):
            return provider
    if "/" in name:
        return "openrouter"
    return None


# ---------------------------------------------------------------------------
# Validators
# ---------------------------------------------------------------------------


def _inline_schema(model: type[BaseModel], *, lenient: bool) -> dict[str, Any]:
    """A config model's schema with its ``$defs`` inlined, so it can be embedded anywhere."""
    schema = model.model_json_schema()
    defs = schema.pop("$defs", {})

    def resolve(node: Any) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                target = resolve(defs.get(ref[len("#/$defs/") :], {}))
                rest = {k: resolve(v) for k, v in node.items() if k != "$ref"}
                return {**target, **rest} if rest else target
            return {k: resolve(v) for k, v in node.items()}
        if isinstance(node, list):
            return [resolve(item) for item in node]
        return node

    schema = resolve(schema)
    if lenient:
        schema["additionalProperties"] = True  # unknown keys are warnings, never errors
    return schema


def _validator_schema_extra(schema: dict[str, Any], _model: type) -> None:
    # The config depends on `type`: one if/then per type (never stricter than the checks,
    # since the lenient file configs stay open).
    nullable_optionals(schema)
    schema["allOf"] = [
        {
            "if": {"properties": {"type": {"const": name}}, "required": ["type"]},
            "then": {
                "properties": {
                    "config": {
                        "anyOf": [_inline_schema(model, lenient=name in LENIENT_TYPES), {"type": "null"}]
                    }
                }
            },
        }
        for name, model in CONFIG_MODELS.items()
    ]


ValidatorType = Choice(*VALIDATOR_TYPE_NAMES, message="is not a supported validator type")


class ValidatorSpec(Closed):
    model_config = ConfigDict(extra="forbid", strict=True, json_schema_extra=_validator_schema_extra)

    key: Key
    type: ValidatorType  # type: ignore[valid-type]
    target: RequiredRef
    expected_from: Ref | None = None
    config: Annotated[FreeForm | None, ConfigFor("type", config_model_for, lambda t: t in LENIENT_TYPES)] = (
        None
    )
    label: Text | None = None
    ground_truth: Bool = False

    _parsed_config: ConfigModel | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _parse_config_once(self) -> ValidatorSpec:
        # Parse the config while the spec is validated, so grading never does; a config
        # the publish checks reject stays unparsed (parsed_config then raises).
        with contextlib.suppress(ValueError):
            self._spell_out_defaults(self.parsed_config())
        return self

    def _spell_out_defaults(self, parsed: ConfigModel) -> None:
        """Write the config's §5.4 defaults into ``config`` (so the manifest states them,
        like judge ``samples``). An absent config stays absent: code_execution without one
        is lint L8, not a config missing its test_command."""
        if self.config is None:
            return
        missing = {k: v for k, v in parsed.stored_defaults().items() if k not in self.config}
        if missing:
            self.config = {**self.config, **missing}

    def parsed_config(self) -> ConfigModel:
        """The config as this type's config model (defaults applied), parsed once.

        Unknown keys of the lenient file configs are ignored. Raises ``ValueError``
        (pydantic ``ValidationError``) only for a spec that did not pass publish checks.
        """
        if self._parsed_config is None:
            model = CONFIG_MODELS[self.type]
            data = dict(self.config or {})
            if self.type in LENIENT_TYPES:
                allowed = {info.alias or name for name, info in model.model_fields.items()}
                data = {k: v for k, v in data.items() if k in allowed}
            self._parsed_config = model.model_validate(data)
        return self._parsed_config

    @property
    def is_ground_truth(self) -> bool:
        """A ground-truth check of the resolution gate (grading.md §5.4)."""
        return self.ground_truth or self.type in GROUND_TRUTH_TYPES


# ---------------------------------------------------------------------------
# Metrics, behavioral signals, checks, pricing, limits (pack-format §7.2)
# ---------------------------------------------------------------------------


class MetricSpec(Closed):
    key: Key
    type: Choice(*METRIC_TYPES, message="is not a supported metric type")  # type: ignore[valid-type]
    collector: Key
    unit: Trimmed | None = None


class BehavioralSignal(Closed):
    key: Choice(  # type: ignore[valid-type]
        *SIGNAL_KEYS,
        special={"confidence_calibration": "is not supported until confidence reporting lands"},
        trim=True,
    )
    weight: PositiveFloat
    gate: Bool = False
    pass_threshold: Unit | None = None  # "is required when the signal is gated" (registry)


class BehavioralSpec(Closed):
    signals: NonEmptyList(BehavioralSignal, "must contain at least one signal") = Field(  # type: ignore[valid-type]
        default_factory=list, validate_default=True
    )


class PostExecutionCheck(Closed):
    key: Key
    type: Choice(*CHECK_TYPES, message="must be file_capture or directory_listing")  # type: ignore[valid-type]
    path: Key
    recursive: Bool = False
    max_size_bytes: NonNegativeInt = 0  # 0 means 1 MiB

    @property
    def effective_max_size_bytes(self) -> int:
        return self.max_size_bytes or DEFAULT_CAPTURE_BYTES


class ModelPricing(Closed):
    provider_key: Key
    provider_model_id: Key
    input_cost_per_million_tokens: NonNegativeFloat = 0.0
    output_cost_per_million_tokens: NonNegativeFloat = 0.0


class PricingSpec(Closed):
    models: list[ModelPricing] = []


class RuntimeLimits(Closed):
    max_total_tokens: PositiveInt | None = None
    max_cost_usd: PositiveFloat | None = None
    max_duration_ms: PositiveInt | None = None
    max_iterations: Ranged(int, 1, 1000) | None = None  # type: ignore[valid-type]


# ---------------------------------------------------------------------------
# LLM judges (pack-format §7.3, grading.md §6.1)
# ---------------------------------------------------------------------------


class ScoreScale(Closed):
    min: float
    max: float

    @model_validator(mode="after")
    def _ordered(self) -> ScoreScale:
        if self.min >= self.max:
            raise fail("min must be strictly less than max")
        return self


class Consensus(Closed):
    aggregation: Choice(*CONSENSUS_AGGREGATIONS)  # type: ignore[valid-type]
    min_agreement_threshold: Unit | None = None
    flag_on_disagreement: Bool = False


def _samples(value: int) -> int:
    if value < 0:
        raise fail("must be greater than or equal to 0")
    if value > MAX_JUDGE_SAMPLES:
        raise fail(f"must be at most {MAX_JUDGE_SAMPLES}")
    return value or DEFAULT_JUDGE_SAMPLES


def _debiasing(value: bool | str) -> str:
    if value is True:
        return "shuffle"
    if value is False:
        return "none"
    if value in POSITION_DEBIASING:
        return value
    raise fail("must be one of shuffle, cyclic, none")


def _context(value: list[str]) -> list[str]:
    return value or ["final_output"]


Samples = Annotated[int, AfterValidator(_samples), Schema(minimum=0, maximum=MAX_JUDGE_SAMPLES)]
# Upstream's bool is accepted: true = shuffle, false = none. The validated value is a string.
PositionDebiasing = Annotated[
    bool | str,
    AfterValidator(_debiasing),
    Schema(replace={"anyOf": [{"type": "boolean"}, {"enum": list(POSITION_DEBIASING)}]}),
]


class JudgeSpec(Closed):
    key: Key
    label: Text | None = None
    mode: Choice(*JUDGE_METHODS)  # type: ignore[valid-type]
    model: Trimmed | None = None
    models: list[Trimmed] | None = None
    samples: Samples = DEFAULT_JUDGE_SAMPLES  # 0 means 3
    consensus: Consensus | None = None
    min_agreement_threshold: Unit | None = None  # agreement across one model's samples
    rubric: Text | None = None
    assertion: Text | None = None
    expect: Bool = True
    prompt: Text | None = None
    position_debiasing: PositionDebiasing = "shuffle"
    reference_from: Ref | None = None
    context_from: Annotated[list[Ref], AfterValidator(_context)] = ["final_output"]
    output_schema: FreeForm | bool | None = None
    score_scale: ScoreScale = Field(default_factory=lambda: ScoreScale(min=1, max=5))
    threshold: Unit = 0.5  # PASSED threshold of the numeric modes
    max_retries: Ranged(int, 0, 10) = 3  # type: ignore[valid-type]
    timeout_ms: PositiveInt = 60000
    anti_gaming_clauses: list[Text] = []

    @property
    def model_names(self) -> list[str]:
        """The declared models: ``[model]`` or ``models``, blanks left out."""
        if self.model:
            return [self.model]
        return [name for name in self.models or [] if name]

    @property
    def is_numeric(self) -> bool:
        return self.mode in NUMERIC_JUDGE_METHODS


# ---------------------------------------------------------------------------
# Scorecard (pack-format §7.4, grading.md §10)
# ---------------------------------------------------------------------------


class DimensionNormalization(Closed):
    target: float | None = None
    max: float | None = None


class DimensionSpec(Closed):
    key: Key
    source: (
        Choice(  # type: ignore[valid-type]
            *DIMENSION_SOURCES, message="must be one of " + ", ".join(DIMENSION_SOURCES), trim=True
        )
        | None
    ) = None
    validators: list[Trimmed] | None = None  # empty or absent: all validators
    metric: Trimmed | None = None
    better_direction: Text | None = None  # checked against the source at publish
    normalization: DimensionNormalization | None = None
    weight: NonNegativeFloat = 1.0
    judge_key: Trimmed | None = None
    gate: Bool = False
    pass_threshold: Unit | None = None


# A legacy dimension is its key: trimmed like every evaluation-spec key (pack-format §5.1).
LegacyDimension = Choice(*LEGACY_DIMENSIONS, message="is not a supported scorecard dimension", trim=True)


class LatencyNormalization(Closed):
    target_ms: float | None = None
    max_ms: float | None = None


class CostNormalization(Closed):
    target_usd: float | None = None
    max_usd: float | None = None


class LegacyNormalization(Closed):
    latency: LatencyNormalization | None = None
    cost: CostNormalization | None = None


class JudgeLimits(Closed):
    max_samples_per_judge: Ranged(int, 0, MAX_JUDGE_SAMPLES) = 0  # type: ignore[valid-type]  # 0: unset
    max_calls_usd: NonNegativeFloat = 0.0  # 0: unset
    max_tokens: NonNegativeInt = 0  # 0: unset


class ScorecardSpec(Closed):
    dimensions: NonEmptyList(  # type: ignore[valid-type]
        LegacyDimension | DimensionSpec, "must contain at least one dimension"
    ) = Field(default_factory=list, validate_default=True)
    strategy: Choice(*STRATEGIES) = "weighted"  # type: ignore[valid-type]
    pass_threshold: Unit | None = None
    normalization: LegacyNormalization | None = None
    judge_limits: JudgeLimits | None = None


# ---------------------------------------------------------------------------
# Rules, claims, critique (grading.md §5, §8, §9)
# ---------------------------------------------------------------------------


class RuleSpec(Closed):
    label: RequiredText
    validator: Choice(*RULE_VALIDATORS)  # type: ignore[valid-type]
    where: Choice(*TASK_FIELDS, *JOB_FIELDS) | None = None  # type: ignore[valid-type]
    pattern: Text | None = None  # RE2
    min: NonNegativeInt | None = None
    max: NonNegativeInt | None = None
    required: Bool = True
    negate: Bool = False


class RulesSpec(Closed):
    allowed_tools: list[Trimmed] | None = None  # absent: no guard; empty: nothing allowed
    allowed_hosts: list[Trimmed] | None = None
    shell_tool_names: list[Trimmed] = list(DEFAULT_SHELL_TOOL_NAMES)
    job: list[RuleSpec] = []
    tasks: list[RuleSpec] = []


class ClaimsSpec(Closed):
    fail_on_contradicted: Bool = False
    write_tool_names: list[Trimmed] = list(DEFAULT_WRITE_TOOL_NAMES)


class CritiqueSpec(Closed):
    probe_judges: Bool = False
    unavailable_share_max: Unit = 0.5
    judge_agreement_min: Unit = 0.75


# ---------------------------------------------------------------------------
# The evaluation spec
# ---------------------------------------------------------------------------


class EvaluationSpec(Closed):
    name: Key
    version_number: PositiveInt
    judge_mode: Choice(*JUDGE_MODES)  # type: ignore[valid-type]
    validators: NonEmptyList(ValidatorSpec, "must contain at least one validator") = Field(  # type: ignore[valid-type]
        default_factory=list, validate_default=True
    )
    metrics: list[MetricSpec] = []
    behavioral: BehavioralSpec | None = None
    llm_judges: list[JudgeSpec] = []
    post_execution_checks: list[PostExecutionCheck] = []
    runtime_limits: RuntimeLimits = Field(default_factory=RuntimeLimits)
    pricing: PricingSpec = Field(default_factory=PricingSpec)
    scorecard: ScorecardSpec
    rules: RulesSpec | None = None
    claims: ClaimsSpec = Field(default_factory=ClaimsSpec)
    critique: CritiqueSpec = Field(default_factory=CritiqueSpec)

    _dimensions: list[DimensionSpec] | None = PrivateAttr(default=None)

    # -- lookups ------------------------------------------------------------

    def validator(self, key: str) -> ValidatorSpec | None:
        return next((v for v in self.validators if v.key == key), None)

    def judge(self, key: str) -> JudgeSpec | None:
        return next((j for j in self.llm_judges if j.key == key), None)

    def metric(self, key: str) -> MetricSpec | None:
        return next((m for m in self.metrics if m.key == key), None)

    def check(self, key: str) -> PostExecutionCheck | None:
        return next((c for c in self.post_execution_checks if c.key == key), None)

    def validator_config(self, validator: ValidatorSpec) -> ConfigModel:
        """The validator's config model instance, defaults applied, parsed once and cached."""
        return validator.parsed_config()

    # -- dimensions ---------------------------------------------------------

    @property
    def dimensions(self) -> list[DimensionSpec]:
        """Scorecard dimensions with the legacy forms expanded and defaults applied.

        Legacy ``correctness`` = validators (all); ``reliability`` and ``behavioral`` are
        their own source; ``latency`` and ``cost`` are lower-is-better with normalization
        from ``scorecard.normalization`` (missing max from ``runtime_limits``). An object
        without ``source`` whose key is a legacy name expands the same way. Sources whose
        score is a quality signal default ``better_direction`` to "higher".
        """
        if self._dimensions is None:
            self._dimensions = [self._expand(d) for d in self.scorecard.dimensions]
        return self._dimensions

    def _expand(self, declared: str | DimensionSpec) -> DimensionSpec:
        dim = DimensionSpec(key=declared) if isinstance(declared, str) else declared.model_copy(deep=True)
        if dim.source is None:
            self._expand_legacy(dim)
        if dim.better_direction is None and dim.source in HIGHER_ONLY_SOURCES:
            dim.better_direction = "higher"
        return dim

    def _expand_legacy(self, dim: DimensionSpec) -> None:
        legacy = self.scorecard.normalization or LegacyNormalization()
        limits = self.runtime_limits
        if dim.key == "correctness":
            dim.source = "validators"
        elif dim.key in ("reliability", "behavioral"):
            dim.source = dim.key
        elif dim.key == "latency":
            dim.source, dim.better_direction = "latency", dim.better_direction or "lower"
            if dim.normalization is None and legacy.latency is not None:
                high = legacy.latency.max_ms
                if high is None and limits.max_duration_ms is not None:
                    high = float(limits.max_duration_ms)
                dim.normalization = DimensionNormalization(target=legacy.latency.target_ms, max=high)
        elif dim.key == "cost":
            dim.source, dim.better_direction = "cost", dim.better_direction or "lower"
            if dim.normalization is None and legacy.cost is not None:
                high = legacy.cost.max_usd
                if high is None and limits.max_cost_usd is not None:
                    high = limits.max_cost_usd
                dim.normalization = DimensionNormalization(target=legacy.cost.target_usd, max=high)

    def validators_of(self, dimension: DimensionSpec) -> list[ValidatorSpec]:
        """The validators a validators-source dimension averages (all when its list is empty)."""
        if not dimension.validators:
            return list(self.validators)
        wanted = set(dimension.validators)
        return [v for v in self.validators if v.key in wanted]


__all__ = [
    "CONFIG_MODELS",
    "BehavioralSignal",
    "BehavioralSpec",
    "ClaimsSpec",
    "Consensus",
    "CostNormalization",
    "CritiqueSpec",
    "DimensionNormalization",
    "DimensionSpec",
    "EvaluationSpec",
    "JudgeLimits",
    "JudgeSpec",
    "LatencyNormalization",
    "LegacyNormalization",
    "MetricSpec",
    "ModelPricing",
    "PostExecutionCheck",
    "PricingSpec",
    "RuleSpec",
    "RulesSpec",
    "RuntimeLimits",
    "ScoreScale",
    "ScorecardSpec",
    "ValidatorSpec",
    "config_model_for",
    "judge_provider_for",
]
