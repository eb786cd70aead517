"""Pydantic models of a challenge pack document (spec/pack-format.md §2-§7).

``Bundle`` is the whole document; ``version.evaluation_spec`` embeds the grading engine's
``EvaluationSpec`` (one definition). Models are closed (``extra="forbid", strict=True``)
except the free-form fields (``dict[str, JsonValue]`` / ``JsonValue``). Raw YAML data is
checked with ``grading.engine.modelcheck.check_model`` (exact messages, one pass); rules
that combine fields or objects are the semantic checks of ``packs.bundle.checks``.

``Bundle.model_json_schema()`` is the published JSON Schema (pack-format §11, see
``packs.bundle.schema``). It is never stricter than the validator: outside
``version.evaluation_spec`` an unknown key is only a warning, so those objects do not
state ``additionalProperties: false``; text fields admit numbers and booleans (their YAML
text is taken), boolean fields admit the YAML 1.1 spellings, and every optional key
admits ``null`` (null means absent).
"""

from __future__ import annotations

import ipaddress
import re
import uuid
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    SerializerFunctionWrapHandler,
    model_serializer,
)

from grading.engine.configs.fields import (
    Bool,
    FreeForm,
    Key,
    NonNegativeInt,
    PositiveInt,
    Schema,
    Text,
    Trimmed,
    fail,
)
from grading.engine.modelcheck import Trim
from grading.engine.spec import EvaluationSpec

from . import limits

INT32_MAX = 2**31 - 1
INT32_MIN = -(2**31)

EXECUTION_MODES = ("native", "prompt_eval", "responses", "multi_turn")
TOOL_KINDS = ("browser", "build", "data", "file", "network", "terminal")
DIFFICULTIES = ("easy", "medium", "hard", "expert")
ACTORS = ("scripted", "llm", "human")
TRIGGERS = (
    "always",
    "on_assistant_mismatch",
    "on_validator_fail",
    "on_judge_below",
    "on_agent_loop",
    "on_max_llm_turns",
    "manual",
    "never",
)
BUILTIN_PRIMITIVES = (
    "submit",
    "read_file",
    "write_file",
    "list_files",
    "search_files",
    "search_text",
    "query_json",
    "query_sql",
    "http_request",
    "run_tests",
    "build",
    "exec",
)
SEVERITIES = ("low", "medium", "high", "critical")
SECRET_LOCATIONS = ("env", "file", "infisical-mock", "tool-output")
TRANSPORTS = ("text_sim", "webrtc", "sip", "pstn", "websocket")

_SCALAR_TEXT_SCHEMA = {"type": ["string", "number", "boolean"]}


def _open_schema(schema: dict[str, Any], _model: type) -> None:
    # Unknown keys outside version.evaluation_spec are warnings (pack-format §3): the
    # schema must not reject what the validator accepts.
    schema.pop("additionalProperties", None)


class Closed(BaseModel):
    """A closed object whose unknown keys are ``unknown_key`` warnings."""

    model_config = ConfigDict(extra="forbid", strict=True, json_schema_extra=_open_schema)


# ---------------------------------------------------------------------------
# Field types with pack-format messages
# ---------------------------------------------------------------------------


def _lower(value: str) -> str:
    return value.lower()


def _not_blank(value: str) -> str:
    if not value.strip():
        raise fail("is required")
    return value


# A pack slug is any non-empty text, as upstream accepts it (pack-format §1: a URL-safe rule
# would reject upstream packs, and it is not one of the listed improvements), at most the
# ``Pack.slug`` column's length (counted after trimming). The API's routes take it
# percent-encoded ("/" included), and download names sanitize it.
SLUG_MAX_LENGTH = limits.PACK_SLUG
SLUG_MESSAGE = limits.too_long(SLUG_MAX_LENGTH)
# The JSON Schema states "not blank": one character that ``str.strip`` keeps. The class lists
# the characters it removes (``str.isspace``) instead of ``\s``, whose ECMA-262 meaning also
# holds U+FEFF and would make the schema stricter than the validator. Like the other lengths,
# the 200 characters are not stated: counted before trimming, the schema would be stricter.
SLUG_JSON_PATTERN = r"[^\t-\r\x1c-\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]"


def _slug(value: str) -> str:
    if len(value) > SLUG_MAX_LENGTH:
        raise fail(SLUG_MESSAGE)
    return value


def _uuid(value: str) -> str:
    try:
        return str(uuid.UUID(value))
    except ValueError:
        raise fail("must be a UUID") from None


def _positive_int32(value: int) -> int:
    if value <= 0:
        raise fail("must be greater than 0")
    if value > INT32_MAX:
        raise fail(f"must be at most {INT32_MAX}")
    return value


def _int32(value: int) -> int:
    if not INT32_MIN <= value <= INT32_MAX:
        raise fail(f"must be between {INT32_MIN} and {INT32_MAX}")
    return value


def _execution_mode(value: str) -> str:
    if not value:
        return "native"
    if value not in EXECUTION_MODES:
        raise fail('must be one of "native", "prompt_eval", "responses", "multi_turn"')
    return value


def _tool_kind(value: str) -> str:
    lowered = value.lower()
    if lowered not in TOOL_KINDS:
        raise fail("must be one of " + ", ".join(TOOL_KINDS))
    return lowered


def _cidr(value: str) -> str:
    try:
        if "/" not in value:
            raise ValueError(value)
        ipaddress.ip_network(value, strict=False)
    except ValueError:
        raise fail("must be a valid CIDR (e.g. 10.0.0.0/8)") from None
    return value


_APT_NAME = re.compile(r"[a-z0-9][a-z0-9.+\-]+\Z")


def _apt_package(value: str) -> str:
    if not _APT_NAME.match(value):
        raise fail("must be a valid apt package name")
    return value


def _lower_choice(values: tuple[str, ...]) -> Any:
    message = "must be one of " + ", ".join(values)

    def check(value: str) -> str:
        lowered = value.lower()
        if lowered not in values:
            raise fail(message)
        return lowered

    return check


def _scalar_text(*validators: Any, **schema: Any) -> Any:
    """Trimmed text with extra validators; YAML numbers and booleans keep their text."""
    return Annotated[
        str,
        Trim(),
        *(AfterValidator(v) for v in validators),
        Schema(replace={**_SCALAR_TEXT_SCHEMA, **schema}),
    ]


Lower = _scalar_text(_lower)
RequiredLower = _scalar_text(_not_blank, _lower)
RequiredText = Annotated[Text, AfterValidator(_not_blank)]
Slug = _scalar_text(_not_blank, _slug, pattern=SLUG_JSON_PATTERN)
UUIDText = _scalar_text(_uuid, format="uuid")
VersionNumber = Annotated[int, AfterValidator(_positive_int32), Schema(exclusiveMinimum=0, maximum=INT32_MAX)]
Int32 = Annotated[int, AfterValidator(_int32), Schema(minimum=INT32_MIN, maximum=INT32_MAX)]
ExecutionMode = Annotated[
    str,
    Trim(),
    AfterValidator(_execution_mode),
    Schema(replace={"type": "string", "pattern": r"^\s*(?:" + "|".join(EXECUTION_MODES) + r")?\s*$"}),
]
ToolKind = _scalar_text(_tool_kind)
Cidr = _scalar_text(_cidr)
AptPackage = _scalar_text(_apt_package)
Severity = _scalar_text(_lower_choice(SEVERITIES))


def _choice(values: tuple[str, ...]) -> Any:
    message = "must be one of " + ", ".join(values)

    def check(value: str) -> str:
        if value not in values:
            raise fail(message)
        return value

    return check


def _trigger_default(value: str) -> str:
    return value or "always"


def _trimmed_enum(values: tuple[str, ...]) -> Schema:
    """The enum as a pattern that admits the surrounding whitespace the validator trims."""
    return Schema(replace={"type": "string", "pattern": r"^\s*(?:" + "|".join(values) + r")\s*$"})


# Trimmed, then exact (pack-format §5.1: difficulty is trimmed, "exact lower case").
Difficulty = Annotated[str, Trim(), AfterValidator(_choice(DIFFICULTIES)), _trimmed_enum(DIFFICULTIES)]
Actor = Annotated[str, Trim(), AfterValidator(_choice(ACTORS)), _trimmed_enum(ACTORS)]
Trigger = _scalar_text(_trigger_default)

DEFAULT_TOOL_PARAMETERS: dict[str, JsonValue] = {"type": "object", "additionalProperties": False}


# ---------------------------------------------------------------------------
# version (pack-format §4)
# ---------------------------------------------------------------------------


class PackMeta(Closed):
    slug: Slug  # type: ignore[valid-type]
    name: Key
    family: RequiredLower  # type: ignore[valid-type]
    description: Text | None = None


class ToolPolicy(Closed):
    allowed_tool_kinds: list[ToolKind] | None = None  # type: ignore[valid-type]
    allow_shell: Bool = False
    allow_network: Bool = False
    max_tool_calls: NonNegativeInt | None = None


class Filesystem(Closed):
    working_directory: Trimmed | None = None
    readable_roots: list[Trimmed] | None = None
    writable_roots: list[Trimmed] | None = None
    max_workspace_bytes: NonNegativeInt | None = None


class Sandbox(Closed):
    network_access: Bool = False
    network_allowlist: list[Cidr] | None = None  # type: ignore[valid-type]
    env_vars: dict[str, Text] | None = None  # keys checked by the semantic pass
    additional_packages: list[AptPackage] | None = None  # type: ignore[valid-type]
    sandbox_template_id: Trimmed | None = None


class DeploymentDefaults(Closed):
    aliases: dict[str, Trimmed] | None = None  # name -> selector (names trimmed at normalization)
    lineups: dict[str, list[Trimmed]] | None = None  # name -> [selector]


class Asset(Closed):
    key: Key
    path: Key
    kind: Trimmed | None = None
    media_type: Trimmed | None = None
    artifact_id: UUIDText | None = None  # type: ignore[valid-type]


class Version(Closed):
    number: VersionNumber
    execution_mode: ExecutionMode = "native"
    tool_policy: ToolPolicy = Field(default_factory=ToolPolicy)
    filesystem: Filesystem = Field(default_factory=Filesystem)
    sandbox: Sandbox | None = None
    deployment_defaults: DeploymentDefaults | None = None
    evaluation_spec: EvaluationSpec
    assets: list[Asset] = []


# ---------------------------------------------------------------------------
# challenges (§4.1)
# ---------------------------------------------------------------------------


class ArtifactRef(Closed):
    key: Key


class Challenge(Closed):
    key: Key
    title: Key
    category: Key
    difficulty: Difficulty  # type: ignore[valid-type]
    instructions: Trimmed | None = None
    definition: FreeForm = {}
    assets: list[Asset] = []
    artifact_refs: list[ArtifactRef] = []


# ---------------------------------------------------------------------------
# inputs, expectations, cases, input sets (§4.2, §4.3)
# ---------------------------------------------------------------------------


class _KeepsValue(Closed):
    """``value: null`` is a value (free-form); an absent ``value`` is no value."""

    @model_serializer(mode="wrap")
    def _keep_null_value(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        out = handler(self)
        if "value" in self.model_fields_set and "value" not in out:
            out["value"] = None
        return out

    @property
    def has_value(self) -> bool:
        return "value" in self.model_fields_set


class Input(_KeepsValue):
    key: Key
    kind: Key
    value: JsonValue = None
    artifact_key: Trimmed | None = None
    path: Trimmed | None = None


class Expectation(_KeepsValue):
    key: Key
    kind: Key
    value: JsonValue = None
    artifact_key: Trimmed | None = None
    source: Trimmed | None = None


class Turn(Closed):
    message: Text | None = None
    expects: list[Expectation] = []


class Phase(Closed):
    id: Key
    actor: Actor  # type: ignore[valid-type]
    trigger: Trigger = "always"  # type: ignore[valid-type]
    turns: list[Turn] = []
    persona: Text | None = None
    max_turns: NonNegativeInt | None = None
    until: list[Text] = []
    timeout_ms: NonNegativeInt | None = None
    on_timeout: Trimmed | None = None
    model: Trimmed | None = None


class Calibration(Closed):
    enabled: Bool = False
    sample_rate: float | None = None


ARENA_COMPARISONS = ("pairwise",)


def _arena_comparison(value: str) -> str:
    return value or ARENA_COMPARISONS[0]  # blank is the default, as upstream


class Arena(Closed):
    enabled: Bool = False
    # Checked only when the arena is enabled, as upstream checks it (``checks.py``).
    comparison: _scalar_text(_arena_comparison) = ARENA_COMPARISONS[0]  # type: ignore[valid-type]


class PostRun(Closed):
    arena: Arena | None = None


class UserSimulator(Closed):
    schema_version: int | None = None  # "must be 1" (semantic pass)
    kind: Trimmed | None = None  # 'must be "hybrid"' (semantic pass)
    max_turns: NonNegativeInt | None = None
    phases: list[Phase] = []
    calibration: Calibration | None = None
    post_run: PostRun | None = None


class Case(Closed):
    challenge_key: Key
    case_key: Trimmed | None = None
    item_key: Trimmed | None = None
    payload: FreeForm = {}
    inputs: list[Input] = []
    expectations: list[Expectation] = []
    user_simulator: UserSimulator | None = None
    artifacts: list[ArtifactRef] = []
    assets: list[Asset] = []
    case_timeout_seconds: Int32 = 0

    @property
    def effective_key(self) -> str:
        """Upstream ``EffectiveKey``: case_key wins when both are set."""
        return (self.case_key or "").strip() or (self.item_key or "").strip()


class Item(Closed):
    """A legacy input-set item; it becomes a case (pack-format §4.2)."""

    challenge_key: Key
    item_key: Key
    payload: FreeForm = {}
    assets: list[Asset] = []


class InputSet(Closed):
    key: Key
    name: Key
    description: Text | None = None
    cases: list[Case] = []
    items: list[Item] = []


# ---------------------------------------------------------------------------
# tools, security, voice (§4.6)
# ---------------------------------------------------------------------------


class Implementation(Closed):
    type: Trimmed | None = None
    primitive: Trimmed | None = None
    args: FreeForm | None = None


class CustomTool(Closed):
    name: Key
    description: Text | None = None
    parameters: FreeForm = Field(default_factory=lambda: dict(DEFAULT_TOOL_PARAMETERS))
    implementation: Implementation | None = None


class Tools(Closed):
    custom: list[CustomTool] = []


class PlantedSecret(Closed):
    name: Key
    value: RequiredText
    location: Annotated[str, Trim(), AfterValidator(_lower_choice(SECRET_LOCATIONS))] | None = None
    file_path: Trimmed | None = None
    severity: Severity | None = None  # type: ignore[valid-type]


class ForbiddenOutput(Closed):
    description: Text | None = None
    pattern: Text | None = None  # RE2
    substring: Text | None = None
    severity: Severity | None = None  # type: ignore[valid-type]


class ForbiddenEgress(Closed):
    description: Text | None = None
    host: RequiredLower  # type: ignore[valid-type]
    allow: list[Lower] = []  # type: ignore[valid-type]
    severity: Severity | None = None  # type: ignore[valid-type]


class AdversarialPrompt(Closed):
    name: Key
    text: RequiredText
    strategy: Lower | None = None  # type: ignore[valid-type]
    expected_refusal_pattern: Text | None = None  # RE2
    severity: Severity | None = None  # type: ignore[valid-type]


class Security(Closed):
    planted_secrets: list[PlantedSecret] = []
    forbidden_outputs: list[ForbiddenOutput] = []
    forbidden_egress: list[ForbiddenEgress] = []
    adversarial_prompts: list[AdversarialPrompt] = []
    default_severity: Severity | None = None  # type: ignore[valid-type]


class InterfaceSpec(Closed):
    transports: list[_scalar_text(_lower_choice(TRANSPORTS))] = []  # type: ignore[valid-type]
    channel_profile: Key
    supports_barge_in: Bool = False


class Scenario(Closed):
    persona: Text | None = None
    language: Key
    max_turns: PositiveInt | None = None  # type: ignore[valid-type]
    max_duration_ms: PositiveInt | None = None  # type: ignore[valid-type]


# ---------------------------------------------------------------------------
# The document
# ---------------------------------------------------------------------------


def _non_empty(message: str) -> Any:
    def check(value: list[Any]) -> list[Any]:
        if not value:
            raise fail(message)
        return value

    return check


class Bundle(Closed):
    """A challenge pack document (format v1)."""

    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        json_schema_extra=_open_schema,
        title="AgentClash challenge pack (format v1)",
    )

    pack: PackMeta
    version: Version
    challenges: Annotated[
        list[Challenge],
        AfterValidator(_non_empty("must contain at least one challenge")),
        Schema(minItems=1),
    ] = Field(default_factory=list, validate_default=True)
    input_sets: list[InputSet] = []
    tools: Tools | None = None
    security: Security | None = None
    modality: Lower | None = None  # type: ignore[valid-type]
    interface_spec: InterfaceSpec | None = None
    scenario: Scenario | None = None
