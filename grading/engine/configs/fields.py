"""Annotated field types shared by the evaluation-spec and config models.

Each value rule raises ``PydanticCustomError`` with the exact pack-format message, so
``check_model`` reports it verbatim, and states the same bound in the JSON Schema.
The JSON Schema is never stricter than the validator: string fields also admit numbers
and booleans (a YAML scalar reaching a string field keeps its text, ``007`` is "007"),
and boolean fields also admit the YAML 1.1 spellings (y, yes, on, n, no, off, each in lower,
capitalized or upper case).
"""

from __future__ import annotations

import math
import re
import typing
from collections.abc import Callable
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, JsonValue
from pydantic_core import PydanticCustomError

from grading.engine.modelcheck import YAML11_BOOLS, Trim
from grading.engine.refsyntax import REFERENCE_JSON_PATTERN

RULE = "spec_rule"  # error type of every value rule raised here


def fail(message: str) -> PydanticCustomError:
    return PydanticCustomError(RULE, message)


class Schema:
    """Annotated marker that merges keys into the generated JSON Schema."""

    def __init__(self, replace: dict[str, Any] | None = None, **extra: Any) -> None:
        self.replace = replace
        self.extra = extra

    def __get_pydantic_json_schema__(self, core: Any, handler: Any) -> dict[str, Any]:
        if self.replace is not None:
            return dict(self.replace)
        schema = dict(handler(core))
        schema.update(self.extra)
        return schema


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _fmt(number: float) -> str:
    return str(int(number)) if float(number).is_integer() else str(number)


def _range_rule(
    low: float | None, high: float | None, *, low_exclusive: bool = False
) -> Callable[[Any], Any]:
    if low is not None and high is not None:
        message = f"must be between {_fmt(low)} and {_fmt(high)}"
    elif low is not None:
        message = (
            f"must be greater than {_fmt(low)}"
            if low_exclusive
            else f"must be greater than or equal to {_fmt(low)}"
        )
    else:
        message = f"must be at most {_fmt(high)}"  # type: ignore[arg-type]

    def check(value: Any) -> Any:
        # an int is finite however large (math.isfinite raised OverflowError past a float)
        if not _is_number(value) or (isinstance(value, float) and not math.isfinite(value)):
            return value
        if low is not None and (value <= low if low_exclusive else value < low):
            raise fail(message)
        if high is not None and value > high:
            raise fail(message)
        return value

    return check


def _range_schema(low: float | None, high: float | None, low_exclusive: bool) -> Schema:
    extra: dict[str, Any] = {}
    if low is not None:
        extra["exclusiveMinimum" if low_exclusive else "minimum"] = low
    if high is not None:
        extra["maximum"] = high
    return Schema(**extra)


def Ranged(
    kind: type, low: float | None = None, high: float | None = None, *, low_exclusive: bool = False
) -> Any:
    """``int`` or ``float`` with inclusive bounds (or ``> low`` when ``low_exclusive``)."""
    return Annotated[
        kind,
        AfterValidator(_range_rule(low, high, low_exclusive=low_exclusive)),
        _range_schema(low, high, low_exclusive),
    ]


Unit = Ranged(float, 0, 1)  # "must be between 0 and 1"
PositiveFloat = Ranged(float, 0, low_exclusive=True)  # "must be greater than 0"
PositiveInt = Ranged(int, 0, low_exclusive=True)
NonNegativeFloat = Ranged(float, 0)  # "must be greater than or equal to 0"
NonNegativeInt = Ranged(int, 0)


def Choice(
    *values: str, message: str | None = None, special: dict[str, str] | None = None, trim: bool = False
) -> Any:
    """A string that must be one of ``values`` ("must be one of a, b, c" unless ``message``).

    ``special`` maps a rejected value to its own message (``pass_at_k``, ``confidence_calibration``).
    ``trim``: the value is trimmed first (pack-format §5.1 trims keys and sources), and the
    JSON Schema states the choices as a pattern that admits the surrounding whitespace.
    """
    default = message or "must be one of " + ", ".join(values)

    def check(value: str) -> str:
        if value in values:
            return value
        if special and value in special:
            raise fail(special[value])
        raise fail(default)

    if trim:
        pattern = r"^\s*(?:" + "|".join(re.escape(value) for value in values) + r")\s*$"
        return Annotated[
            str, Trim(), AfterValidator(check), Schema(replace={"type": "string", "pattern": pattern})
        ]
    return Annotated[str, AfterValidator(check), Schema(enum=list(values))]


def NonEmptyList(item: Any, message: str) -> Any:
    """A list that must hold at least one item; ``message`` when empty (or absent, with validate_default)."""

    def check(value: list[Any]) -> list[Any]:
        if not value:
            raise fail(message)
        return value

    return Annotated[list[item], AfterValidator(check), Schema(minItems=1)]  # type: ignore[valid-type]


def _not_blank(value: str) -> str:
    if not value.strip():
        raise fail("is required")
    return value


_SCALAR_TEXT_SCHEMA = {"type": ["string", "number", "boolean"]}

# Free text: a YAML number or boolean in the field keeps its text.
Text = Annotated[str, Schema(replace=_SCALAR_TEXT_SCHEMA)]
# Trimmed text (keys, collectors, models, paths: pack-format §5.1).
Trimmed = Annotated[str, Trim(), Schema(replace=_SCALAR_TEXT_SCHEMA)]
# A required key: trimmed, and "is required" when blank.
Key = Annotated[str, Trim(), AfterValidator(_not_blank), Schema(replace=_SCALAR_TEXT_SCHEMA)]
# An evidence reference (pack-format §8): trimmed, syntax stated in the schema, checked in the registry.
Ref = Annotated[str, Trim(), Schema(type="string", pattern=REFERENCE_JSON_PATTERN)]


def _yaml11_bool(value: Any) -> Any:
    if isinstance(value, str) and value in YAML11_BOOLS:
        return YAML11_BOOLS[value]
    return value


# A boolean; the YAML 1.1 spellings are accepted as upstream (pack-format §2.1).
Bool = Annotated[
    bool,
    BeforeValidator(_yaml11_bool),
    Schema(
        replace={
            "anyOf": [
                {"type": "boolean"},
                {"type": "string", "pattern": "^(?:" + "|".join(YAML11_BOOLS) + ")$"},
            ]
        }
    ),
]

FreeForm = dict[str, JsonValue]


class RegexMarker:
    """Annotated marker: the config field holds an RE2 pattern, compiled at publish (pack-format §9)."""


# A config field holding an RE2 pattern; ``registry`` compiles it at publish.
RegexText = Annotated[str, RegexMarker(), Schema(type="string")]


def _marked(annotation: Any) -> bool:
    if typing.get_origin(annotation) is Annotated and any(
        isinstance(m, RegexMarker) for m in annotation.__metadata__
    ):
        return True
    return any(_marked(arg) for arg in typing.get_args(annotation))


def regex_fields(model: type) -> list[str]:
    """The keys of a model's fields marked ``RegexText`` (also inside ``| None``)."""
    fields = getattr(model, "model_fields", {})
    return [
        info.alias or name
        for name, info in fields.items()
        if any(isinstance(m, RegexMarker) for m in info.metadata) or _marked(info.annotation)
    ]


def _allows_null(prop: dict[str, Any]) -> bool:
    kind = prop.get("type")
    if not prop or kind == "null" or (isinstance(kind, list) and "null" in kind):
        return True
    if str(prop.get("$ref", "")).endswith("/JsonValue"):
        return True
    return any(_allows_null(branch) for branch in prop.get("anyOf", []) if isinstance(branch, dict))


_META_KEYS = ("title", "default", "description")


def nullable_optionals(schema: dict[str, Any], _model: type | None = None) -> None:
    """``json_schema_extra``: let every optional property be ``null``.

    A YAML ``null`` means absent (pack-format §2.1), so ``label:`` left empty is valid;
    the schema must not be stricter than that.
    """
    required = set(schema.get("required", []))
    properties = schema.get("properties", {})
    for name, prop in list(properties.items()):
        if name in required or not isinstance(prop, dict) or _allows_null(prop):
            continue
        if "anyOf" in prop:
            properties[name] = {**prop, "anyOf": [*prop["anyOf"], {"type": "null"}]}
            continue
        meta = {key: prop[key] for key in _META_KEYS if key in prop}
        inner = {key: value for key, value in prop.items() if key not in _META_KEYS}
        properties[name] = {"anyOf": [inner, {"type": "null"}], **meta}
