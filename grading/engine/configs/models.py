"""Per-validator-type config models (grading.md §3-§4 is the single source of keys and defaults).

Every config is closed (``extra="forbid"``); the four file validators upstream decodes
leniently (``LENIENT_TYPES``) report unknown keys as ``unknown_key`` warnings instead
(``check_model`` drops them). Single-field value rules live here; rules that combine
fields (tool_call_assertion counts, postcondition value/json_path, numeric_match legacy
mixing, normalized_match steps...) are publish checks in ``registry.py``.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, JsonValue, model_validator

from grading.engine.configs.fields import (
    Bool,
    Choice,
    FreeForm,
    NonNegativeFloat,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    Text,
    Trimmed,
    Unit,
    fail,
    nullable_optionals,
)


class ConfigModel(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, json_schema_extra=nullable_optionals)

    # Defaults the normalized (stored) spec spells out (pack-format §5.4).
    STORED_DEFAULTS: ClassVar[tuple[str, ...]] = ()

    def stored_defaults(self) -> dict[str, Any]:
        """The ``STORED_DEFAULTS`` as this config resolved them (None: no default applies)."""
        values = {name: getattr(self, name) for name in self.STORED_DEFAULTS}
        return {name: value for name, value in values.items() if value is not None}


# --- text and structure (grading.md §3.2) ---------------------------------


class ExactMatchConfig(ConfigModel):
    """exact_match: no config keys; byte-exact comparison."""


class ContainsConfig(ConfigModel):
    case_insensitive: Bool = False  # full case folding


def _flags(value: str) -> str:
    if any(char not in "ims" for char in value):
        raise fail("must contain only the flags i, m and s")
    return value


class RegexMatchConfig(ConfigModel):
    flags: Annotated[Text, AfterValidator(_flags)] = ""  # any of i, m, s

    @property
    def inline_flags(self) -> str:
        """``(?ims)`` prefix for the pattern, or ``""``."""
        letters = "".join(sorted(set(self.flags)))
        return f"(?{letters})" if letters else ""


class BooleanAssertConfig(ConfigModel):
    """boolean_assert: no config keys."""


class JsonSchemaConfig(ConfigModel):
    extract_markdown_fence: Bool = False


class JsonPathMatchConfig(ConfigModel):
    """json_path_match: no config keys; the expectation comes from expected_from."""


# --- similarity (grading.md §3.3) -----------------------------------------


class FuzzyMatchConfig(ConfigModel):
    threshold: Unit = 0.8
    case_insensitive: Bool = False
    normalize: Bool = False


class TokenF1Config(ConfigModel):
    # Upstream clamps thresholds of the similarity scores into [0, 1] at grading instead of
    # rejecting them at publish; so do we (only fuzzy_match's is range-checked, as upstream).
    threshold: float = 0.5
    normalize: Bool = False  # trim, fold, collapse
    remove_articles: Bool = False
    remove_punctuation: Bool = False


class BleuScoreConfig(ConfigModel):
    threshold: float = 0.3
    max_ngram: PositiveInt = 4
    smoothing: Choice("none", "method1") = "none"  # type: ignore[valid-type]
    case_insensitive: Bool = False
    normalize: Bool = False


class RougeScoreConfig(ConfigModel):
    threshold: float = 0.3
    variant: Choice("rouge-l", "rouge-1", "rouge-2") = "rouge-l"  # type: ignore[valid-type]
    beta: PositiveFloat = 1.0
    case_insensitive: Bool = False
    normalize: Bool = False


class ChrfScoreConfig(ConfigModel):
    threshold: float = 0.3
    char_order: PositiveInt = 6
    beta: PositiveFloat = 2.0
    case_insensitive: Bool = False
    normalize: Bool = False


# --- numeric, normalized, math (grading.md §3.4) ---------------------------

NORMALIZATION_STEPS = (
    "trim",
    "lowercase",
    "collapse_whitespace",
    "strip_punctuation",
    "strip_currency",
    "strip_formatting",
    "normalize_unicode",
    "remove_articles",
    "sort_words",
    "sort_lines",
)
DEFAULT_PIPELINE = ("trim", "lowercase", "collapse_whitespace")
LEGACY_DEFAULT_TOLERANCE = 0.001


class NumericMatchConfig(ConfigModel):
    absolute_tolerance: NonNegativeFloat | None = None
    relative_tolerance: NonNegativeFloat | None = None
    extract_number: Bool = False
    significant_digits: PositiveInt | None = None
    # Legacy pair, never mixed with the two tolerances above (checked at publish).
    tolerance: float | None = None
    tolerance_mode: Choice("absolute", "relative") | None = None  # type: ignore[valid-type]

    def tolerances(self) -> tuple[float | None, float | None]:
        """(absolute, relative) after the legacy rules; (None, None) means an exact comparison.

        Legacy: ``tolerance`` alone is relative; ``tolerance_mode`` without ``tolerance``
        uses 0.001.
        """
        if self.tolerance is None and self.tolerance_mode is None:
            return self.absolute_tolerance, self.relative_tolerance
        value = LEGACY_DEFAULT_TOLERANCE if self.tolerance is None else self.tolerance
        if self.tolerance_mode == "absolute":
            return value, None
        return None, value


class NormalizedMatchConfig(ConfigModel):
    pipeline: list[Trimmed] | None = None
    normalizations: list[Trimmed] | None = None  # legacy alias, never together with pipeline

    @property
    def steps(self) -> list[str]:
        """The steps to apply: pipeline, else normalizations, else the default."""
        return list(self.pipeline or self.normalizations or DEFAULT_PIPELINE)


class MathEquivalenceConfig(ConfigModel):
    comparison_mode: Choice("symbolic", "numeric") = "symbolic"  # type: ignore[valid-type]
    tolerance: NonNegativeFloat = 1e-6
    extract_answer: Bool = False
    answer_delimiter: Text | None = None
    numeric_fallback: Bool = False  # accepted for compatibility, no effect


# --- files and postconditions (grading.md §3.5) ----------------------------


class FileExistsConfig(ConfigModel):
    must_exist: Bool = True


class FileContentMatchConfig(ConfigModel):
    match_mode: Choice("contains", "exact", "regex", "not_contains", "json_equal") = "contains"  # type: ignore[valid-type]
    ignore_whitespace: Bool = False


class FileJsonSchemaConfig(ConfigModel):
    # Required at grading (absent: the validator fails, lint L8); upstream accepts a
    # config without it at publish.
    schema_: FreeForm | bool | None = Field(default=None, alias="schema")


class DirectoryStructureConfig(ConfigModel):
    required_files: list[Trimmed] = []
    forbidden_files: list[Trimmed] = []
    required_directories: list[Trimmed] = []


POSTCONDITION_CONDITIONS = (
    "exists",
    "not_exists",
    "contains",
    "not_contains",
    "regex_match",
    "json_path_match",
    "equals",
)


class PostconditionConfig(ConfigModel):
    condition: Choice(*POSTCONDITION_CONDITIONS)  # type: ignore[valid-type]
    value: JsonValue = None  # presence matters: check "value" in model_fields_set
    json_path: Trimmed | None = None

    @property
    def has_value(self) -> bool:
        return "value" in self.model_fields_set


# --- code_execution (grading.md §3.7) -------------------------------------


class CodeExecutionConfig(ConfigModel):
    STORED_DEFAULTS = ("scoring", "timeout_ms")

    test_command: Text  # "is required" when config is present
    timeout_ms: PositiveInt = 30000
    memory_mb: PositiveInt = 512
    scoring: Choice(  # type: ignore[valid-type]
        "fraction_passed",
        "all_or_nothing",
        message="must be one of fraction_passed, all_or_nothing, pass_at_k",
        special={"pass_at_k": "pass_at_k requires multi-sample execution and is not supported yet"},
    ) = "fraction_passed"
    pass_threshold: Unit = 1.0


# --- tool_call_assertion (grading.md §3.6) --------------------------------


class ToolCallAssertionConfig(ConfigModel):
    STORED_DEFAULTS = ("order_mode",)  # subsequence when ordered_tools is set

    tool_name: Trimmed | None = None
    arguments_contain: FreeForm | None = None
    must_call: Bool | None = None
    count: NonNegativeInt | None = None
    min_count: NonNegativeInt | None = None
    max_count: NonNegativeInt | None = None
    ordered_tools: list[Trimmed] | None = None
    order_mode: Choice("subsequence", "exact") | None = None  # type: ignore[valid-type]
    include_failed: Bool = False

    @model_validator(mode="after")
    def _default_order_mode(self) -> ToolCallAssertionConfig:
        if self.order_mode is None and self.ordered_tools:
            self.order_mode = "subsequence"
        return self

    @property
    def has_count_bound(self) -> bool:
        return self.count is not None or self.min_count is not None or self.max_count is not None

    @property
    def effective_must_call(self) -> bool | None:
        """must_call as graded: explicit, else true when tool_name or arguments_contain is set
        and no count bound is, else None (no presence assertion)."""
        if self.must_call is not None:
            return self.must_call
        if not self.has_count_bound and (self.tool_name or self.arguments_contain):
            return True
        return None


# --- trajectory matchers (grading.md §4) ----------------------------------

TRAJECTORY_MATCH_TYPES = ("EXACT", "IN_ORDER", "ANY_ORDER")


class ToolTrajectoryConfig(ConfigModel):
    expected: list[JsonValue] | None = None  # or expected_from
    match_type: Text = "EXACT"  # case-insensitive; checked at publish
    args_match: Choice("subset", "exact") = "subset"  # type: ignore[valid-type]
    ignore_args: Bool = False
    include_failed: Bool = False
    threshold: Unit = 0.5

    @property
    def match_type_normalized(self) -> str:
        return self.match_type.strip().upper()


class SkillsTrajectoryConfig(ConfigModel):
    skills: list[JsonValue]  # entries checked at publish (grading.md §4.2)
    match_type: Text = "ANY_ORDER"  # case-insensitive; checked at publish
    skill_tool_names: list[Text] = ["Skill", "activate_skill", "load_skill"]
    read_tool_names: list[Text] = ["Read", "read_file", "view", "cat"]
    count_tool_names: Bool = True
    strip_plugin_prefix: Bool = False
    include_failed: Bool = False
    threshold: Unit = 0.5

    @property
    def match_type_normalized(self) -> str:
        return self.match_type.strip().upper()


# --- the table ------------------------------------------------------------

CONFIG_MODELS: dict[str, type[ConfigModel]] = {
    "exact_match": ExactMatchConfig,
    "contains": ContainsConfig,
    "regex_match": RegexMatchConfig,
    "boolean_assert": BooleanAssertConfig,
    "json_schema": JsonSchemaConfig,
    "json_path_match": JsonPathMatchConfig,
    "fuzzy_match": FuzzyMatchConfig,
    "numeric_match": NumericMatchConfig,
    "normalized_match": NormalizedMatchConfig,
    "token_f1": TokenF1Config,
    "math_equivalence": MathEquivalenceConfig,
    "bleu_score": BleuScoreConfig,
    "rouge_score": RougeScoreConfig,
    "chrf_score": ChrfScoreConfig,
    "file_exists": FileExistsConfig,
    "file_content_match": FileContentMatchConfig,
    "file_json_schema": FileJsonSchemaConfig,
    "directory_structure": DirectoryStructureConfig,
    "code_execution": CodeExecutionConfig,
    "postcondition": PostconditionConfig,
    "tool_call_assertion": ToolCallAssertionConfig,
    "tool_trajectory": ToolTrajectoryConfig,
    "skills_trajectory": SkillsTrajectoryConfig,
}

VALIDATOR_TYPE_NAMES: tuple[str, ...] = tuple(CONFIG_MODELS)

# Upstream decodes these configs leniently: an unknown key is an unknown_key warning.
LENIENT_TYPES = frozenset({"file_exists", "file_content_match", "file_json_schema", "directory_structure"})


def config_model_for(validator_type: object) -> type[ConfigModel] | None:
    """The config model of a validator type, or None for an unknown type."""
    return CONFIG_MODELS.get(validator_type) if isinstance(validator_type, str) else None


def is_lenient(validator_type: object) -> bool:
    return validator_type in LENIENT_TYPES
