"""The validator type registry and every publish-time rule of the evaluation spec.

- ``VALIDATOR_TYPES``: per type, the config model, whether unknown config keys are only
  warnings, the ``expected_from`` and ``target`` policies, the publish ``check`` and the
  grade function.
- ``check_evaluation_spec(raw)``: the semantic rules of pack-format §7 (and §8 syntax,
  §9 static RE2, grading.md §4.2 and §5.1), on the cleaned data ``check_model`` returns.
  It never raises and skips a rule whose inputs have the wrong type or lie under
  ``bad_paths`` (the paths ``check_model`` already rejected), so nothing cascades.
- ``validate_evaluation_spec(raw)``: ``check_model`` + ``check_evaluation_spec`` (+ lint).
- Helpers the pack parser reuses for the per-case rules: ``static_patterns``,
  ``placeholders``, ``evidence_references``, ``lint_evaluation_spec`` (L3, L4, L6, L7, L8).

Issue paths are relative to the evaluation spec; the parser prefixes ``version.evaluation_spec``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

from jsonschema import Draft7Validator, Draft202012Validator
from jsonschema.exceptions import SchemaError

from grading.engine.configs import CONFIG_MODELS, LENIENT_TYPES, ConfigModel
from grading.engine.configs.checks import (
    CONFIG_CHECKS,
    MISSING,
    Checker,
    ConfigCheck,
    check_json_path_expectation,
    check_regex_fields,
    re2_error,
    re2_matches_empty,
)
from grading.engine.configs.fields import regex_fields
from grading.engine.modelcheck import Issue, Path, check_model
from grading.engine.refsyntax import EvidenceRef, RefKind, try_parse_reference
from grading.engine.spec import (
    DIMENSION_SOURCES,
    HIGHER_ONLY_SOURCES,
    JOB_FIELDS,
    JUDGE_METHODS,
    KNOWN_COLLECTORS,
    NORMALIZED_SOURCES,
    RULE_VALIDATORS,
    UNSUPPORTED_COLLECTORS,
    EvaluationSpec,
    judge_provider_for,
)
from grading.engine.validators.text import check_schema as check_re2_schema

SpecIssue = Issue  # the name grading/engine/README.md uses

__all__ = [
    "VALIDATOR_TYPES",
    "SpecIssue",
    "StaticPattern",
    "ValidatorType",
    "check_evaluation_spec",
    "check_json_path_expectation",
    "evidence_references",
    "lint_evaluation_spec",
    "placeholders",
    "re2_error",
    "re2_matches_empty",
    "static_patterns",
    "validate_evaluation_spec",
]

ExpectedFromPolicy = Literal["required", "optional", "omitted", "ignored"]
TargetPolicy = Literal["reference", "tool_calls", "file"]


@dataclass(frozen=True)
class ValidatorType:
    name: str
    config_model: type[ConfigModel]
    expected_from: ExpectedFromPolicy = "required"
    target: TargetPolicy = "reference"
    config_required: bool = False
    lenient_config: bool = False  # unknown config keys are unknown_key warnings
    file_check_always: bool = False  # file:<k> must name a declared check even when none is declared
    needs_file_capture: bool = False  # the check must be a file_capture
    ground_truth: bool = False  # a check of the resolution gate (grading.md §5.4)
    config_check: ConfigCheck | None = None

    @property
    def grade(self) -> Callable[..., Any] | None:
        """The grade function of ``grading.engine.validators`` (looked up lazily)."""
        from grading.engine.validators import GRADERS

        return GRADERS.get(self.name)

    def check(
        self, validator: Mapping[str, Any], path: Path = (), *, bad_paths: frozenset[Path] = frozenset()
    ) -> list[Issue]:
        """Publish rules of one declaration of this type: target and expected_from policies,
        reference syntax, config presence and the config rules that combine fields."""
        checker = Checker(bad_paths)
        self._check(checker, validator, path)
        return checker.issues

    def _check(self, c: Checker, validator: Mapping[str, Any], path: Path) -> None:
        self._check_target(c, validator, path)
        self._check_expected_from(c, validator, path)
        config = validator.get("config")
        if self.config_required and config is None and not c.bad(path + ("config",)):
            c.error(path + ("config",), "is required", anchor="parent")
        if not c.bad(path + ("config",)):
            if self.config_check is not None:
                self.config_check(c, validator, config if isinstance(config, Mapping) else None, path)
            check_regex_fields(c, self.config_model, config, path)

    def _check_target(self, c: Checker, validator: Mapping[str, Any], path: Path) -> None:
        target = c.text(validator, "target", path)
        if target is None:
            return
        tp = path + ("target",)
        if self.target == "tool_calls":
            if target != "tool_calls":
                c.error(tp, f'must be "tool_calls" for {self.name} validators')
        elif self.target == "file":
            if not target.startswith("file:"):
                c.error(tp, "must use file: prefix for file validators")
            else:
                c.reference(tp, target)
        else:
            c.reference(tp, target)

    def _check_expected_from(self, c: Checker, validator: Mapping[str, Any], path: Path) -> None:
        ep = path + ("expected_from",)
        if c.bad(ep) or self.expected_from == "ignored":
            return
        text = c.text(validator, "expected_from", path)
        if self.expected_from == "omitted":
            if text is not None:
                c.error(ep, f"must be omitted for {self.name} validators")
        elif text is None:
            if self.expected_from == "required":
                c.error(ep, "is required", anchor=c.anchor_for(validator, "expected_from"))
        else:
            c.reference(ep, text)


def _type(name: str, **flags: Any) -> ValidatorType:
    return ValidatorType(
        name,
        CONFIG_MODELS[name],
        lenient_config=name in LENIENT_TYPES,
        config_check=CONFIG_CHECKS.get(name),
        **flags,
    )


_FILE = {"target": "file"}
_TOOL_CALLS = {"target": "tool_calls"}

VALIDATOR_TYPES: dict[str, ValidatorType] = {
    vt.name: vt
    for vt in (
        _type("exact_match"),
        _type("contains"),
        _type("regex_match"),
        _type("boolean_assert"),
        _type("json_schema"),
        _type("json_path_match"),
        _type("fuzzy_match"),
        _type("numeric_match"),
        _type("normalized_match"),
        _type("token_f1"),
        _type("math_equivalence"),
        _type("bleu_score"),
        _type("rouge_score"),
        _type("chrf_score"),
        _type("file_exists", expected_from="ignored", **_FILE),
        _type("file_content_match", **_FILE),
        _type("file_json_schema", expected_from="ignored", **_FILE),
        _type("directory_structure", expected_from="ignored", **_FILE),
        _type(
            "code_execution",
            expected_from="ignored",
            file_check_always=True,
            needs_file_capture=True,
            ground_truth=True,
            **_FILE,
        ),
        _type(
            "postcondition",
            expected_from="omitted",
            config_required=True,
            file_check_always=True,
            ground_truth=True,
            **_FILE,
        ),
        _type("tool_call_assertion", expected_from="omitted", config_required=True, **_TOOL_CALLS),
        _type("tool_trajectory", expected_from="optional", **_TOOL_CALLS),
        _type("skills_trajectory", expected_from="omitted", config_required=True, **_TOOL_CALLS),
    )
}


# ---------------------------------------------------------------------------
# check_evaluation_spec
# ---------------------------------------------------------------------------

# Tests set this to surface bugs; in production a failing rule is skipped, never raised.
RAISE_INTERNAL_ERRORS = False


def _items(c: Checker, parent: Any, key: str, path: Path) -> Iterator[tuple[int, Mapping[str, Any], Path]]:
    entries = c.get(parent, key, path, list)
    for index, entry in enumerate(entries if entries is not MISSING else []):
        item_path = path + (key, index)
        if isinstance(entry, Mapping) and not c.bad(item_path):
            yield index, entry, item_path


@dataclass
class _Keys:
    """Declared keys of one kind, and whether every one of them could be read."""

    keys: dict[str, Mapping[str, Any]]
    complete: bool


def _unique_keys(c: Checker, raw: Mapping[str, Any], collection: str, path: Path = ()) -> _Keys:
    keys: dict[str, Mapping[str, Any]] = {}
    complete = not c.bad(path + (collection,)) and isinstance(raw.get(collection, []), (list, type(None)))
    for _, item, item_path in _items(c, raw, collection, path):
        key = c.text(item, "key", item_path)
        if key is None:
            complete = False
        elif key in keys:
            c.error(item_path + ("key",), "must be unique")
        else:
            keys[key] = item
    return _Keys(keys, complete)


def check_evaluation_spec(
    raw: Any, *, execution_mode: str = "native", bad_paths: frozenset[Path] = frozenset()
) -> list[Issue]:
    """Every semantic publish rule of the evaluation spec (pack-format §7, §8, §9).

    ``raw`` is the cleaned evaluation_spec mapping; ``bad_paths`` the error paths
    ``check_model`` reported (relative to the spec). ``execution_mode`` is accepted for the
    parser's convenience; no evaluation-spec rule depends on it in format v1.
    """
    if not isinstance(raw, Mapping):
        return []
    c = Checker(frozenset(bad_paths))
    sections: list[Callable[[Checker, Mapping[str, Any]], None]] = [
        _check_validators,
        _check_metrics_and_pricing,
        _check_behavioral,
        _check_judges,
        _check_scorecard,
        _check_rules,
    ]
    for section in sections:
        try:
            section(c, raw)
        except Exception:
            if RAISE_INTERNAL_ERRORS:
                raise
    return c.issues


def _check_validators(c: Checker, raw: Mapping[str, Any]) -> None:
    _unique_keys(c, raw, "validators")
    checks = _unique_keys(c, raw, "post_execution_checks")
    for _, validator, path in _items(c, raw, "validators", ()):
        vtype = VALIDATOR_TYPES.get(c.text(validator, "type", path) or "")
        if vtype is None:
            continue
        vtype._check(c, validator, path)
        _check_file_reference(c, vtype, validator, path, checks)


def _check_file_reference(
    c: Checker, vtype: ValidatorType, validator: Mapping[str, Any], path: Path, checks: _Keys
) -> None:
    target = c.text(validator, "target", path)
    ref = try_parse_reference(target) if target else None
    if ref is None or ref.kind is not RefKind.FILE or not checks.complete:
        return
    if not checks.keys and not vtype.file_check_always:
        return  # no checks declared: lint L5 when it does not resolve
    check = checks.keys.get(ref.name or "")
    if check is None:
        c.error(path + ("target",), f'references unknown post_execution_check key "{ref.name}"')
    elif vtype.needs_file_capture and check.get("type") != "file_capture":
        c.error(path + ("target",), "must reference a file_capture post_execution_check")


def _check_metrics_and_pricing(c: Checker, raw: Mapping[str, Any]) -> None:
    _unique_keys(c, raw, "metrics")
    for _, metric, path in _items(c, raw, "metrics", ()):
        collector = c.text(metric, "collector", path)
        if collector in UNSUPPORTED_COLLECTORS:
            c.error(path + ("collector",), UNSUPPORTED_COLLECTORS[collector])
    seen: set[tuple[str, str]] = set()
    pricing = c.get(raw, "pricing", (), Mapping)
    for _, model, path in _items(c, pricing if pricing is not MISSING else {}, "models", ("pricing",)):
        pair = (c.text(model, "provider_key", path), c.text(model, "provider_model_id", path))
        if None in pair:
            continue
        if pair in seen:
            c.error(path, "must be unique by provider_key and provider_model_id")
        seen.add(pair)  # type: ignore[arg-type]


def _check_behavioral(c: Checker, raw: Mapping[str, Any]) -> None:
    behavioral = c.get(raw, "behavioral", (), Mapping)
    if behavioral is MISSING:
        return
    _unique_keys(c, behavioral, "signals", ("behavioral",))
    for _, signal, path in _items(c, behavioral, "signals", ("behavioral",)):
        if signal.get("gate") is True and not c.present(signal, "pass_threshold"):
            c.error(path + ("pass_threshold",), "is required when the signal is gated", anchor="parent")


# --- judges (pack-format §7.3) -------------------------------------------------

_SECRET = re.compile(r"\$\{\s*secrets\s*\.")
_PROVIDER_MESSAGE = "must be inferable to a known judge provider (claude-*, gpt-*, gemini-*, grok-*, mistral-*, openrouter/* slugs)"
_MODE_TEXTS = {
    "rubric": ("rubric",),
    "reference": ("rubric", "reference_from"),
    "assertion": ("assertion",),
    "n_wise": ("prompt",),
}
_SCHEMA_DRAFTS = {
    "http://json-schema.org/draft-07/schema#": Draft7Validator,
    "https://json-schema.org/draft-07/schema#": Draft7Validator,
    "http://json-schema.org/draft-07/schema": Draft7Validator,
    "https://json-schema.org/draft-07/schema": Draft7Validator,
    "https://json-schema.org/draft/2020-12/schema": Draft202012Validator,
}


def json_schema_problem(schema: Any, *, re2_patterns: bool = False) -> str | None:
    """Why ``schema`` is not a draft-07 or 2020-12 JSON Schema (by ``$schema``), else None.
    ``re2_patterns``: its patterns are the engine's to run, so they must be RE2 (grading.md
    §3.1); a tool's parameter schema is the agent's, read with the meta-schema's own rule."""
    draft = schema.get("$schema") if isinstance(schema, Mapping) else None
    if draft is not None and (not isinstance(draft, str) or draft not in _SCHEMA_DRAFTS):
        return f"unsupported $schema {draft!r}: use draft-07 or 2020-12"
    validator = _SCHEMA_DRAFTS.get(draft or "", Draft202012Validator)
    try:
        if re2_patterns:
            check_re2_schema(validator, schema)
        else:
            validator.check_schema(schema)
    except SchemaError as exc:
        return exc.message
    return None


def _check_judges(c: Checker, raw: Mapping[str, Any]) -> None:
    validators = _keys_quietly(c, raw, "validators")
    metrics = _keys_quietly(c, raw, "metrics")
    seen: set[str] = set()
    count = 0
    for _, judge, path in _items(c, raw, "llm_judges", ()):
        count += 1
        key = c.text(judge, "key", path)
        if key is not None:
            if key in seen:
                c.error(path + ("key",), "must be unique")
            elif key in validators:
                c.error(path + ("key",), f'collides with validator key "{key}"')
            elif key in metrics:
                c.error(path + ("key",), f'collides with metric key "{key}"')
            seen.add(key)
        mode = c.text(judge, "mode", path)
        mode = mode if mode in JUDGE_METHODS else None
        _check_judge_texts(c, judge, path, mode)
        _check_judge_models(c, judge, path, mode)
        _check_judge_references(c, judge, path)
        schema = judge.get("output_schema")
        if isinstance(schema, (Mapping, bool)) and not c.bad(path + ("output_schema",)):
            problem = json_schema_problem(schema, re2_patterns=True)
            if problem:
                c.error(path + ("output_schema",), "must be a valid JSON Schema", detail=problem)
    _check_judge_mode(c, raw, count)


def _keys_quietly(c: Checker, raw: Mapping[str, Any], collection: str, path: Path = ()) -> set[str]:
    keys = set()
    for _, item, item_path in _items(c, raw, collection, path):
        key = c.text(item, "key", item_path)
        if key is not None:
            keys.add(key)
    return keys


def _check_judge_texts(c: Checker, judge: Mapping[str, Any], path: Path, mode: str | None) -> None:
    for name in _MODE_TEXTS.get(mode or "", ()):
        if c.text(judge, name, path) is None and not c.bad(path + (name,)):
            c.error(path + (name,), f"is required for {mode} mode", anchor=c.anchor_for(judge, name))
    for name in ("rubric", "assertion", "prompt"):
        text = c.get(judge, name, path, str)
        if text is not MISSING and _SECRET.search(text):
            c.error(
                path + (name,),
                "must not contain ${secrets.*} references; secrets are not allowed in judge prompt text",
            )


def _check_judge_models(c: Checker, judge: Mapping[str, Any], path: Path, mode: str | None) -> None:
    if c.bad(path + ("model",)) or c.bad(path + ("models",)):
        return
    model = c.text(judge, "model", path)
    models = c.get(judge, "models", path, list)
    models = models if models is not MISSING else []
    if model is None and not models:
        c.error(
            path + ("model",), "must set exactly one of model or models", anchor=c.anchor_for(judge, "model")
        )
    elif model is not None and models:
        c.error(path + ("models",), "must set exactly one of model or models, not both")
    elif model is not None and judge_provider_for(model) is None:
        c.error(path + ("model",), _PROVIDER_MESSAGE)
    for index, name in enumerate(models if model is None else []):
        if not isinstance(name, str) or not name.strip():
            c.error(path + ("models", index), "must be a non-empty model identifier")
        elif judge_provider_for(name) is None:
            c.error(path + ("models", index), _PROVIDER_MESSAGE)
    if c.bad(path + ("consensus",)):
        return
    consensus = judge.get("consensus")
    if len(models) > 1 and model is None:
        if consensus is None:
            c.error(path + ("consensus",), "is required when multiple models are declared", anchor="parent")
        elif isinstance(consensus, Mapping):
            _check_consensus(c, consensus, path + ("consensus",), mode)
    elif consensus is not None:
        c.error(path + ("consensus",), "is only valid when multiple models are declared")


def _check_consensus(c: Checker, consensus: Mapping[str, Any], path: Path, mode: str | None) -> None:
    aggregation = c.text(consensus, "aggregation", path)
    if mode is None or aggregation is None:
        return
    if aggregation in ("median", "mean") and mode == "assertion":
        c.error(
            path + ("aggregation",),
            f'"{aggregation}" aggregation is only valid for numeric modes (rubric, reference, n_wise)',
        )
    if aggregation == "majority_vote" and mode != "assertion":
        c.error(path + ("aggregation",), "majority_vote aggregation is only valid for assertion mode")


def _check_judge_references(c: Checker, judge: Mapping[str, Any], path: Path) -> None:
    reference = c.text(judge, "reference_from", path)
    if reference is not None:
        c.reference(path + ("reference_from",), reference)
    context = c.get(judge, "context_from", path, list)
    for index, entry in enumerate(context if context is not MISSING else []):
        if isinstance(entry, str) and not c.bad(path + ("context_from", index)):
            c.reference(path + ("context_from", index), entry)


def _check_judge_mode(c: Checker, raw: Mapping[str, Any], count: int) -> None:
    mode = c.text(raw, "judge_mode", ())
    if c.bad(("llm_judges",)) or mode is None:
        return
    if mode == "deterministic" and count:
        c.error(("llm_judges",), "must be empty when judge_mode is deterministic")
    elif mode in ("llm_judge", "hybrid") and not count and not raw.get("llm_judges"):
        c.error(
            ("llm_judges",),
            f"must contain at least one judge when judge_mode is {mode}",
            anchor=c.anchor_for(raw, "llm_judges"),
        )


# --- scorecard (pack-format §7.4) ---------------------------------------------

_LEGACY_SOURCES = {
    "correctness": "validators",
    "reliability": "reliability",
    "latency": "latency",
    "cost": "cost",
    "behavioral": "behavioral",
}
_LEGACY_NORMALIZATION = {
    # dimension: (block, target key, max key, runtime limit)
    "latency": ("latency", "target_ms", "max_ms", "max_duration_ms"),
    "cost": ("cost", "target_usd", "max_usd", "max_cost_usd"),
}


@dataclass
class _ScorecardContext:
    raw: Mapping[str, Any]
    scorecard: Mapping[str, Any]
    strategy: str | None
    validators: _Keys
    metrics: _Keys
    judges: set[str]
    judges_complete: bool
    behavioral_reported: bool = False


def _check_scorecard(c: Checker, raw: Mapping[str, Any]) -> None:
    scorecard = c.get(raw, "scorecard", (), Mapping)
    if scorecard is MISSING:
        return
    if not c.present(scorecard, "strategy"):
        strategy: str | None = "weighted"
    else:
        strategy = c.text(scorecard, "strategy", ("scorecard",))
    quiet = Checker(c.bad_paths)  # key collection only; uniqueness is reported elsewhere
    ctx = _ScorecardContext(
        raw,
        scorecard,
        strategy,
        _unique_keys(quiet, raw, "validators"),
        _unique_keys(quiet, raw, "metrics"),
        _keys_quietly(c, raw, "llm_judges"),
        not c.bad(("llm_judges",))
        and all(c.text(j, "key", p) for _, j, p in _items(c, raw, "llm_judges", ())),
    )
    dims = c.get(scorecard, "dimensions", ("scorecard",), list)
    dims = dims if dims is not MISSING else []
    seen: set[str] = set()
    gated = False
    for index, dim in enumerate(dims):
        path: Path = ("scorecard", "dimensions", index)
        if c.bad(path):
            gated = True  # unknown: never claim "no gate"
            continue
        if isinstance(dim, str):
            key: str | None = dim
            key_path: Path = path
            _check_legacy_dimension(c, ctx, dim, path)
        elif isinstance(dim, Mapping):
            key, key_path = c.text(dim, "key", path), path + ("key",)
            gated = gated or dim.get("gate") is True or c.bad(path + ("gate",))
            _check_dimension(c, ctx, dim, path)
        else:
            continue
        if key is not None:
            if key in seen:
                c.error(key_path, "must be unique")
            seen.add(key)
    _check_strategy(c, scorecard, ctx.strategy, gated, bool(dims))


def _check_strategy(
    c: Checker, scorecard: Mapping[str, Any], strategy: str | None, gated: bool, any_dims: bool
) -> None:
    if (
        strategy == "binary"
        and c.present(scorecard, "pass_threshold")
        and not c.bad(("scorecard", "pass_threshold"))
    ):
        c.error(
            ("scorecard", "pass_threshold"),
            "must not be set for binary strategy; use per-dimension pass_threshold instead",
        )
    if strategy == "hybrid" and not gated and any_dims and not c.bad(("scorecard", "dimensions")):
        c.error(("scorecard", "strategy"), "hybrid strategy requires at least one gated dimension")


def _require_behavioral(c: Checker, ctx: _ScorecardContext) -> None:
    if ctx.behavioral_reported or ctx.raw.get("behavioral") is not None or c.bad(("behavioral",)):
        return
    ctx.behavioral_reported = True
    c.error(("behavioral",), "is required when a scorecard dimension uses source behavioral", anchor="parent")


def _check_legacy_dimension(c: Checker, ctx: _ScorecardContext, name: str, path: Path) -> None:
    if name in _LEGACY_NORMALIZATION:
        _check_legacy_normalization(c, ctx, name)
    if name == "behavioral":
        _require_behavioral(c, ctx)
    if ctx.strategy == "binary" and name in _LEGACY_SOURCES:
        c.error(
            path + ("pass_threshold",),
            "is required when the dimension is gated or strategy is binary",
            anchor="parent",
        )


def _check_legacy_normalization(c: Checker, ctx: _ScorecardContext, name: str) -> None:
    block, target_key, max_key, limit_key = _LEGACY_NORMALIZATION[name]
    base = ("scorecard", "normalization")
    if c.bad(base + (block,)):
        return
    normalization = ctx.scorecard.get("normalization")
    section = normalization.get(block) if isinstance(normalization, Mapping) else None
    if not isinstance(section, Mapping):
        c.error(base + (block,), f"is required when the {name} dimension is enabled", anchor="parent")
        return
    path = base + (block,)
    target = c.number(section, target_key, path)
    if target is None and not c.bad(path + (target_key,)):
        c.error(path + (target_key,), "is required", anchor="parent")
    elif target is not None and target < 0:
        c.error(path + (target_key,), "must be greater than or equal to 0")
    if c.bad(path + (max_key,)):
        return
    high = c.number(section, max_key, path)
    if high is None:
        limits = ctx.raw.get("runtime_limits")
        high = c.number(limits, limit_key, ("runtime_limits",)) if isinstance(limits, Mapping) else None
    if high is None:
        c.error(path + (max_key,), f"is required when runtime_limits.{limit_key} is not set", anchor="parent")
    elif high <= 0:
        c.error(path + (max_key,), "must be greater than 0")
    elif target is not None and high <= target:
        c.error(path + (max_key,), f"must be greater than {target_key}")


def _check_dimension(c: Checker, ctx: _ScorecardContext, dim: Mapping[str, Any], path: Path) -> None:
    if c.bad(path + ("source",)):
        return
    source = c.text(dim, "source", path)
    key = c.text(dim, "key", path)
    legacy = source is None and key in _LEGACY_SOURCES
    if source is None and not legacy:
        if key is not None:
            c.error(path + ("source",), "is required", anchor="parent")
        return
    if legacy:
        source = _LEGACY_SOURCES[key]  # type: ignore[index]
    if source not in DIMENSION_SOURCES:
        return
    _check_dimension_source(c, ctx, dim, path, source, legacy)
    _check_direction(c, dim, path, source, legacy)
    gate = dim.get("gate") is True
    if (
        (gate or ctx.strategy == "binary")
        and not c.present(dim, "pass_threshold")
        and not c.bad(path + ("pass_threshold",))
    ):
        c.error(
            path + ("pass_threshold",),
            "is required when the dimension is gated or strategy is binary",
            anchor="parent",
        )


def _check_dimension_source(
    c: Checker, ctx: _ScorecardContext, dim: Mapping[str, Any], path: Path, source: str, legacy: bool
) -> None:
    if source == "validators":
        _check_dimension_validators(c, ctx, dim, path)
    elif source == "metric":
        metric = c.text(dim, "metric", path)
        if metric is None and not c.bad(path + ("metric",)):
            c.error(
                path + ("metric",), "is required when source is metric", anchor=c.anchor_for(dim, "metric")
            )
        elif metric is not None and ctx.metrics.complete and metric not in ctx.metrics.keys:
            c.error(path + ("metric",), f'references unknown metric key "{metric}"')
    elif source == "behavioral":
        _require_behavioral(c, ctx)
    if (
        source in NORMALIZED_SOURCES
        and not c.present(dim, "normalization")
        and not c.bad(path + ("normalization",))
    ):
        if legacy:
            _check_legacy_normalization(c, ctx, source)
        else:
            c.error(path + ("normalization",), f"is required when source is {source}", anchor="parent")
    judge_key = c.text(dim, "judge_key", path)
    if source == "llm_judge":
        if judge_key is None and not c.bad(path + ("judge_key",)):
            c.error(
                path + ("judge_key",),
                "is required when source is llm_judge",
                anchor=c.anchor_for(dim, "judge_key"),
            )
        elif judge_key is not None and ctx.judges_complete and judge_key not in ctx.judges:
            c.error(path + ("judge_key",), f'references unknown judge key "{judge_key}"')
    elif judge_key is not None:
        c.error(path + ("judge_key",), "must be empty unless source is llm_judge")


def _check_dimension_validators(
    c: Checker, ctx: _ScorecardContext, dim: Mapping[str, Any], path: Path
) -> None:
    listed = c.get(dim, "validators", path, list)
    if listed is MISSING or not ctx.validators.complete:
        return
    for index, name in enumerate(listed):
        if (
            isinstance(name, str)
            and name.strip() not in ctx.validators.keys
            and not c.bad(path + ("validators", index))
        ):
            c.error(path + ("validators", index), f'references unknown validator key "{name.strip()}"')


def _check_direction(c: Checker, dim: Mapping[str, Any], path: Path, source: str, legacy: bool) -> None:
    bp = path + ("better_direction",)
    if c.bad(bp):
        return
    direction = c.get(dim, "better_direction", path, str)
    direction = None if direction is MISSING else direction
    if source in HIGHER_ONLY_SOURCES:
        if direction is not None and direction != "higher":
            c.error(bp, f'must be "higher" for {source} source (got "{direction}")')
        return
    if legacy and direction is None:
        direction = "lower"
    if direction not in ("higher", "lower"):
        c.error(bp, "must be higher or lower", anchor=c.anchor_for(dim, "better_direction"))
        return
    normalization = dim.get("normalization")
    np = path + ("normalization",)
    if not isinstance(normalization, Mapping) or c.bad(np):
        return
    target, high = c.number(normalization, "target", np), c.number(normalization, "max", np)
    for name, value in (("target", target), ("max", high)):
        if value is None and not c.bad(np + (name,)):
            c.error(np + (name,), "is required", anchor="parent")
    if target is None or high is None:
        return
    if direction == "lower" and high <= target:
        c.error(np + ("max",), "must be greater than target when better_direction is lower")
    if direction == "higher" and high >= target:
        c.error(np + ("max",), "must be less than target when better_direction is higher")


# --- rules (grading.md §5.1, §5.2) ----------------------------------------------------

_TASK_LEVEL_MESSAGE = (
    "must be a task-level field in tasks rules (executed_commands, task_summary, task_description, "
    "task_plan, agent_messages, operational_rules)"
)


def _check_rules(c: Checker, raw: Mapping[str, Any]) -> None:
    rules = c.get(raw, "rules", (), Mapping)
    if rules is MISSING:
        return
    for scope in ("job", "tasks"):
        for _, rule, path in _items(c, rules, scope, ("rules",)):
            validator = c.text(rule, "validator", path)
            if validator in RULE_VALIDATORS:
                _check_rule(c, rule, path, scope, validator)  # type: ignore[arg-type]


def _check_rule(c: Checker, rule: Mapping[str, Any], path: Path, scope: str, validator: str) -> None:
    if validator != "pattern_match" and scope == "tasks":
        c.error(path + ("validator",), "is only valid in job rules")
    if validator in ("pattern_match", "job_resolution_status"):
        pattern = c.get(rule, "pattern", path, str)
        if pattern is MISSING and not c.bad(path + ("pattern",)):
            c.error(
                path + ("pattern",),
                f"is required for {validator} rules",
                anchor=c.anchor_for(rule, "pattern"),
            )
        elif pattern is not MISSING:
            c.regex(path + ("pattern",), pattern if validator == "pattern_match" else f"^(?:{pattern})$")
    if validator == "pattern_match" and not c.bad(path + ("where",)):
        where = c.text(rule, "where", path)
        if where is None:
            c.error(
                path + ("where",), "is required for pattern_match rules", anchor=c.anchor_for(rule, "where")
            )
        elif scope == "tasks" and where in JOB_FIELDS:
            c.error(path + ("where",), _TASK_LEVEL_MESSAGE)
    if validator == "task_count":
        low, high = c.number(rule, "min", path), c.number(rule, "max", path)
        if low is None and high is None and not c.bad(path + ("min",)) and not c.bad(path + ("max",)):
            c.error(path, "must set min or max for task_count rules")
        elif low is not None and high is not None and low > high:
            c.error(path + ("min",), "must be less than or equal to max")


# ---------------------------------------------------------------------------
# Standalone validation
# ---------------------------------------------------------------------------


def validate_evaluation_spec(
    raw: Any, *, execution_mode: str = "native", lint: bool = True
) -> tuple[EvaluationSpec | None, list[Issue]]:
    """``check_model`` + ``check_evaluation_spec`` (+ ``lint_evaluation_spec``), for
    standalone use and tests. The spec is returned only when there is no error."""
    result = check_model(EvaluationSpec, raw)
    issues = list(result.issues)
    bad = result.error_paths
    issues += check_evaluation_spec(result.cleaned, execution_mode=execution_mode, bad_paths=bad)
    if lint:
        issues += lint_evaluation_spec(result.cleaned, bad_paths=bad)
    if any(issue.severity == "error" for issue in issues):
        return None, issues
    return result.instance, issues


# ---------------------------------------------------------------------------
# Helpers for the per-case rules of the pack parser, and lint (pack-format §10)
# ---------------------------------------------------------------------------


class StaticPattern(NamedTuple):
    """An RE2 pattern of the spec: ``ref`` is ``literal:<pattern>`` or a ``case.*`` /
    ``artifact.*`` reference to resolve and compile per case. Postcondition values and
    rule patterns come as ``literal:`` (job_resolution_status already anchored)."""

    path: Path
    ref: str


_PER_CASE = (
    RefKind.CASE_PAYLOAD,
    RefKind.CASE_INPUT,
    RefKind.CASE_EXPECTATION,
    RefKind.ARTIFACT,
    RefKind.LITERAL,
)


def static_patterns(spec: Any) -> list[StaticPattern]:
    """Every RE2 pattern known at publish (pack-format §9), with the path to report it at."""
    c = Checker()
    out: list[StaticPattern] = []
    if not isinstance(spec, Mapping):
        return out
    for _, validator, path in _items(c, spec, "validators", ()):
        vtype, config = validator.get("type"), validator.get("config")
        config = config if isinstance(config, Mapping) else {}
        if vtype == "regex_match" or (vtype == "file_content_match" and config.get("match_mode") == "regex"):
            text = c.text(validator, "expected_from", path)
            ref = try_parse_reference(text) if text else None
            if ref is not None and ref.kind in _PER_CASE:
                flags = config.get("flags") if vtype == "regex_match" else None
                if (
                    ref.kind is RefKind.LITERAL
                    and isinstance(flags, str)
                    and flags
                    and set(flags) <= set("ims")
                ):
                    out.append(
                        StaticPattern(
                            path + ("expected_from",),
                            f"literal:(?{''.join(sorted(set(flags)))}){ref.literal}",
                        )
                    )
                else:
                    out.append(StaticPattern(path + ("expected_from",), ref.text))
        model = CONFIG_MODELS.get(vtype) if isinstance(vtype, str) else None
        for key in regex_fields(model) if model is not None else []:
            if isinstance(config.get(key), str):
                out.append(StaticPattern(path + ("config", key), "literal:" + config[key]))
        if (
            vtype == "postcondition"
            and config.get("condition") == "regex_match"
            and isinstance(config.get("value"), str)
        ):
            out.append(StaticPattern(path + ("config", "value"), "literal:" + config["value"]))
    rules = spec.get("rules")
    for scope in ("job", "tasks"):
        for _, rule, path in _items(c, rules if isinstance(rules, Mapping) else {}, scope, ("rules",)):
            pattern = rule.get("pattern")
            if isinstance(pattern, str) and rule.get("validator") == "pattern_match":
                out.append(StaticPattern(path + ("pattern",), "literal:" + pattern))
            elif isinstance(pattern, str) and rule.get("validator") == "job_resolution_status":
                out.append(StaticPattern(path + ("pattern",), f"literal:^(?:{pattern})$"))
    return out


# ``{{`` + text without braces + ``}}``, the name being that text stripped. Not
# ``\{\{\s*([^{}]*?)\s*\}\}``: its lazy group and the two ``\s*`` split a run of spaces in
# every way, cubic on an unclosed ``{{`` (1,500 spaces took seconds).
_PLACEHOLDER = re.compile(r"\{\{([^{}]*)\}\}")


def placeholders(text: str) -> list[str]:
    """The ``{{name}}`` / ``{{a.b}}`` placeholders of a template, in order, each once."""
    if not isinstance(text, str):
        return []
    return list(dict.fromkeys(name for name in (m.strip() for m in _PLACEHOLDER.findall(text)) if name))


def evidence_references(spec: Any) -> list[tuple[Path, EvidenceRef]]:
    """Every parseable evidence reference of the spec (validator targets and expected_from,
    judge reference_from and context_from), for lint L1 and L5 of the pack parser."""
    c = Checker()
    out: list[tuple[Path, EvidenceRef]] = []
    if not isinstance(spec, Mapping):
        return out
    for _, validator, path in _items(c, spec, "validators", ()):
        for name in ("target", "expected_from"):
            ref = try_parse_reference(validator.get(name))
            if ref is not None:
                out.append((path + (name,), ref))
    for _, judge, path in _items(c, spec, "llm_judges", ()):
        ref = try_parse_reference(judge.get("reference_from"))
        if ref is not None:
            out.append((path + ("reference_from",), ref))
        context = judge.get("context_from")
        for index, entry in enumerate(context if isinstance(context, list) else []):
            ref = try_parse_reference(entry)
            if ref is not None:
                out.append((path + ("context_from", index), ref))
    return out


def _warning(path: Path, message: str, rule: str) -> Issue:
    return Issue(path, message, severity="warning", rule=rule)


def lint_evaluation_spec(raw: Any, *, bad_paths: frozenset[Path] = frozenset()) -> list[Issue]:
    """Lint warnings that need no case (pack-format §10): L3 regex_matches_empty on static
    literal patterns, L4 unused_grader, L6 implicit_threshold, L7 unknown_collector,
    L8 incomplete_config."""
    if not isinstance(raw, Mapping):
        return []
    c = Checker(frozenset(bad_paths))
    out: list[Issue] = []
    try:
        out += _lint_empty_patterns(c, raw)
        out += _lint_unused_graders(c, raw)
        out += _lint_threshold_collectors_and_configs(c, raw)
    except Exception:
        if RAISE_INTERNAL_ERRORS:
            raise
    return out


def _lint_empty_patterns(c: Checker, raw: Mapping[str, Any]) -> list[Issue]:
    out = []
    for path, ref in static_patterns(raw):
        if (
            c.bad(path)
            or not ref.startswith("literal:")
            or path[-1] == "pattern"
            and not _searching_rule(raw, path)
        ):
            continue
        if re2_matches_empty(ref[len("literal:") :]):
            out.append(
                _warning(path, "matches the empty string, so it accepts any output", "regex_matches_empty")
            )
    return out


def _searching_rule(raw: Mapping[str, Any], path: Path) -> bool:
    """A pattern_match rule that is not negated (a negated one never accepts everything)."""
    rule: Any = raw
    for step in path[:-1]:
        rule = rule[step]
    return rule.get("validator") == "pattern_match" and rule.get("negate") is not True


def _lint_unused_graders(c: Checker, raw: Mapping[str, Any]) -> list[Issue]:
    scorecard = raw.get("scorecard")
    dims = scorecard.get("dimensions") if isinstance(scorecard, Mapping) else None
    if not isinstance(dims, list) or c.bad(("scorecard",)):
        return []
    all_validators = False
    validators: set[str] = set()
    judges: set[str] = set()
    for dim in dims:
        if dim == "correctness":
            all_validators = True
        elif isinstance(dim, Mapping):
            key = dim.get("key")
            source = dim.get("source") or (_LEGACY_SOURCES.get(key.strip()) if isinstance(key, str) else None)
            listed = dim.get("validators")
            if source == "validators" and not listed:
                all_validators = True
            elif source == "validators" and isinstance(listed, list):
                validators.update(name.strip() for name in listed if isinstance(name, str))
            elif source == "llm_judge" and isinstance(dim.get("judge_key"), str):
                judges.add(dim["judge_key"].strip())
    out = []
    with_rules = raw.get("rules") is not None
    for _, validator, path in _items(c, raw, "validators", ()):
        key = c.text(validator, "key", path)
        ground_truth = validator.get("ground_truth") is True or validator.get("type") in (
            "code_execution",
            "postcondition",
        )
        if (
            key is not None
            and not all_validators
            and key not in validators
            and not (with_rules and ground_truth)
        ):
            out.append(_warning(path, "is not used by any scorecard dimension", "unused_grader"))
    for _, judge, path in _items(c, raw, "llm_judges", ()):
        key = c.text(judge, "key", path)
        if key is not None and key not in judges:
            out.append(_warning(path, "is not used by any scorecard dimension", "unused_grader"))
    return out


def _lint_threshold_collectors_and_configs(c: Checker, raw: Mapping[str, Any]) -> list[Issue]:
    out = []
    scorecard = raw.get("scorecard")
    if isinstance(scorecard, Mapping) and not c.bad(("scorecard",)):
        dims = scorecard.get("dimensions")
        gated = (
            any(isinstance(d, Mapping) and d.get("gate") is True for d in dims)
            if isinstance(dims, list)
            else True
        )
        strategy = scorecard.get("strategy", "weighted")
        if strategy == "weighted" and not gated and scorecard.get("pass_threshold") is None:
            out.append(
                _warning(
                    ("scorecard",),
                    "has no gate and no pass_threshold, so a case passes only with an overall score of 1.0",
                    "implicit_threshold",
                )
            )
    for _, metric, path in _items(c, raw, "metrics", ()):
        collector = c.text(metric, "collector", path)
        if (
            collector is not None
            and collector not in KNOWN_COLLECTORS
            and collector not in UNSUPPORTED_COLLECTORS
        ):
            out.append(
                _warning(
                    path + ("collector",),
                    "is not a known collector and will fail at grading",
                    "unknown_collector",
                )
            )
    for _, validator, path in _items(c, raw, "validators", ()):
        vtype, config = validator.get("type"), validator.get("config")
        if vtype in ("code_execution", "file_json_schema", "directory_structure") and config is None:
            out.append(_warning(path, "will fail at grading", "incomplete_config"))
        elif vtype == "file_json_schema" and isinstance(config, Mapping) and config.get("schema") is None:
            out.append(_warning(path + ("config",), "will fail at grading", "incomplete_config"))
    return out
