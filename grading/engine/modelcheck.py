"""Check raw data (built from a YAML node tree) against a pydantic model (pack-format §2.1, §3).

``check_model`` walks the data along the model's fields and reports every problem of the
document in one pass, with the pack-format messages: unknown keys (with a suggestion),
missing keys, wrong types, non-finite numbers; then it runs the model's own validators on
the cleaned data so value rules (``PydanticCustomError`` raised by a field or model
validator) keep their exact message. Problems already reported by the walk are not
reported again by the validation pass (no cascades).

Markers understood in ``Annotated`` metadata:

- ``Trim()``: the string is trimmed (pack-format §5.1), in ``cleaned`` and by pydantic.
- ``ConfigFor(...)``: a free-form ``dict`` field whose shape depends on a sibling
  discriminator (``ValidatorSpec.config`` keyed by ``type``): it is checked against the
  model the resolver returns; unknown keys of lenient types are warnings.
"""

from __future__ import annotations

import difflib
import json
import math
import re
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Union

from pydantic import BaseModel, JsonValue, TypeAdapter, ValidationError
from pydantic_core import core_schema

Path = tuple[str | int, ...]
Severity = Literal["error", "warning"]
Anchor = Literal["value", "key", "parent"]


@dataclass
class Issue:
    path: Path  # relative to the checked root, e.g. ("validators", 0, "config", "mode")
    message: str  # the pack-format predicate: "is required", "must be a number", ...
    detail: str | None = None  # engine text (RE2, JSON Schema), never needed to read the message
    severity: Severity = "error"
    rule: str | None = None  # "unknown_key" and the lint names, for warnings
    anchor: Anchor = "value"  # YAML position: the value, the key (unknown keys), the parent (missing keys)

    def field(self, prefix: str = "") -> str:
        return format_path(self.path, prefix)


@dataclass
class CheckResult:
    instance: Any | None  # the validated model when there is no error-severity issue
    cleaned: Any  # the data with unknown keys removed and coercions applied
    issues: list[Issue] = field(default_factory=list)

    @property
    def errors(self) -> list[Issue]:
        return [issue for issue in self.issues if issue.severity == "error"]

    @property
    def error_paths(self) -> frozenset[Path]:
        return frozenset(issue.path for issue in self.errors)


_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*\Z")


def format_path(path: Path, prefix: str = "") -> str:
    """``("input_sets", 0, "cases", 2, "case_key")`` -> ``input_sets[0].cases[2].case_key``.

    A name that is not an identifier is written ``["name"]``.
    """
    out = prefix
    for element in path:
        if isinstance(element, int) and not isinstance(element, bool):
            out += f"[{element}]"
        elif _IDENT.match(str(element)):
            out += ("." if out else "") + str(element)
        else:
            out += "[" + json.dumps(str(element), ensure_ascii=False) + "]"
    return out


def path_is_under(path: Path, roots: frozenset[Path] | set[Path]) -> bool:
    """True when ``path`` equals one of ``roots`` or lies below one of them. The pack checks
    ask this for every field they read: with many roots (a pack with thousands of rejected
    values) its prefixes are looked up instead of every root compared (linear, not quadratic)."""
    if not roots:
        return False
    if len(roots) <= len(path):
        return any(path[: len(root)] == root for root in roots)
    return any(path[:n] in roots for n in range(len(path) + 1))


# ---------------------------------------------------------------------------
# Markers
# ---------------------------------------------------------------------------


class Trim:
    """Annotated marker: the string is trimmed before any other rule applies."""

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> core_schema.CoreSchema:
        return core_schema.no_info_after_validator_function(str.strip, handler(source))

    def __repr__(self) -> str:
        return "Trim()"


@dataclass(frozen=True)
class ConfigFor:
    """Annotated marker for a free-form dict whose model depends on a sibling key.

    ``resolve(discriminator_value)`` returns the model (or None: left free-form);
    ``lenient(discriminator_value)`` says whether unknown keys are warnings.
    """

    discriminator: str
    resolve: Callable[[str], type[BaseModel] | None]
    lenient: Callable[[str], bool] = lambda _value: False


# ---------------------------------------------------------------------------
# Suggestions for unknown keys (pack-format §3)
# ---------------------------------------------------------------------------


def suggest_key(key: str, allowed: list[str]) -> str | None:
    """The allowed key an unknown ``key`` most likely meant, by rules (a)-(c) of §3."""
    lowered = key.lower()
    for candidate in allowed:
        if candidate.lower() == lowered:
            return candidate
    close = difflib.get_close_matches(key, allowed, n=1, cutoff=0.6)
    if close:
        return close[0]
    holders = [candidate for candidate in allowed if key in candidate.split("_")]
    if len(holders) == 1:
        return holders[0]
    return None


def unknown_key_message(suggestion: str | None, *, quoted: bool = True) -> str:
    if not suggestion:
        return "is not an allowed key"
    shown = f'"{suggestion}"' if quoted else suggestion
    return f"is not an allowed key; did you mean {shown}?"


# ---------------------------------------------------------------------------
# The walk
# ---------------------------------------------------------------------------

# The YAML 1.1 boolean spellings besides true/false (https://yaml.org/type/bool.html), exactly
# the ones upstream's yaml.v3 takes into a bool field: ``yEs`` is none of them.
YAML11_BOOLS: dict[str, bool] = {
    **dict.fromkeys(("y", "Y", "yes", "Yes", "YES", "on", "On", "ON"), True),
    **dict.fromkeys(("n", "N", "no", "No", "NO", "off", "Off", "OFF"), False),
}
_UNION_TYPES = (Union, types.UnionType)


def _unwrap(annotation: Any) -> tuple[Any, tuple[Any, ...]]:
    metadata: tuple[Any, ...] = ()
    while typing.get_origin(annotation) is typing.Annotated:
        args = typing.get_args(annotation)
        annotation, metadata = args[0], metadata + tuple(args[1:])
    return annotation, metadata


def _is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def _is_freeform(annotation: Any) -> bool:
    return annotation is JsonValue or annotation is Any or annotation is object


def _kind_name(annotation: Any) -> str:
    annotation, _ = _unwrap(annotation)
    origin = typing.get_origin(annotation)
    if annotation is bool:
        return "a boolean"
    if annotation is int:
        return "an integer"
    if annotation is float:
        return "a number"
    if annotation is str or origin is Literal:
        return "a string"
    if origin is list:
        return "a list"
    if _is_model(annotation) or origin is dict:
        return "an object"
    return "a value"


def _branch_for(args: list[Any], data: Any) -> Any | None:
    """The union member a value of this Python type can only mean."""

    def first(predicate: Callable[[Any], bool]) -> Any | None:
        for arg in args:
            bare, _ = _unwrap(arg)
            if predicate(bare):
                return arg
        return None

    if any(_is_freeform(_unwrap(arg)[0]) for arg in args):
        return JsonValue
    if isinstance(data, bool):
        return first(lambda a: a is bool)
    if isinstance(data, int):
        return first(lambda a: a is int) or first(lambda a: a is float)
    if isinstance(data, float):
        return first(lambda a: a is float)
    if isinstance(data, str):
        return first(lambda a: a is str or typing.get_origin(a) is Literal)
    if isinstance(data, Mapping):
        return first(lambda a: _is_model(a) or typing.get_origin(a) is dict)
    if isinstance(data, list):
        return first(lambda a: typing.get_origin(a) is list)
    return None


@dataclass(frozen=True, slots=True)
class _Field:
    """A model field as the walk reads it, worked out once per model (not per value)."""

    annotation: Any  # Annotated unwrapped
    metadata: tuple[Any, ...]
    config_for: Any  # a ConfigFor marker, or None
    freeform: bool
    required: bool
    plain_str: bool  # a bare ``str``: empty after trimming counts as absent


_FIELD_TABLES: dict[type[BaseModel], dict[str, _Field]] = {}


def _field_table(model: type[BaseModel]) -> dict[str, _Field]:
    table = _FIELD_TABLES.get(model)
    if table is None:
        table = {}
        for name, info in model.model_fields.items():
            annotation, metadata = _unwrap(info.annotation)
            metadata = metadata + tuple(info.metadata)
            table[info.alias or name] = _Field(
                annotation=annotation,
                metadata=metadata,
                config_for=next((m for m in metadata if isinstance(m, ConfigFor)), None),
                freeform=_is_freeform(annotation),
                required=info.is_required(),
                plain_str=annotation is str,
            )
        _FIELD_TABLES[model] = table
    return table


# What ``_Walker.value`` does with an annotation: (kind, annotation, metadata, type args).
_Shape = tuple[str, Any, tuple[Any, ...], tuple[Any, ...]]
_SHAPES: dict[Any, _Shape] = {}
_SCALAR_KINDS = {str: "str", bool: "bool", int: "int", float: "float"}


def _shape_of(annotation: Any) -> _Shape:
    bare, more = _unwrap(annotation)
    origin = typing.get_origin(bare)
    if _is_freeform(bare):
        kind = "freeform"
    elif origin in _UNION_TYPES:
        kind = "union"
    elif _is_model(bare):
        kind = "model"
    elif origin is list:
        kind = "list"
    elif origin is dict:
        kind = "dict"
    elif origin is Literal:
        kind = "literal"
    else:
        kind = _SCALAR_KINDS.get(bare, "other") if isinstance(bare, type) else "other"
    return kind, bare, more, typing.get_args(bare)


def _shape(annotation: Any) -> _Shape:
    try:
        return _SHAPES[annotation]
    except KeyError:
        shape = _SHAPES[annotation] = _shape_of(annotation)
        return shape
    except TypeError:  # unhashable metadata
        return _shape_of(annotation)


class _Walker:
    def __init__(
        self,
        unknown_key_severity: Callable[[Path], Severity],
        scalar_text: Callable[[Path], str | None] | None,
        suggest: Callable[[Path, str, list[str]], str | None] | None,
    ) -> None:
        self.unknown_key_severity = unknown_key_severity
        self.scalar_text = scalar_text
        self.suggest = suggest
        self.issues: list[Issue] = []
        self.lenient = False
        self.validated_roots: set[Path] = set()

    def report(self, path: Path, message: str, **kwargs: Any) -> None:
        self.issues.append(Issue(path, message, **kwargs))

    # -- models -------------------------------------------------------------

    def model(self, model: type[BaseModel], data: Any, path: Path) -> Any:
        if not isinstance(data, Mapping):
            self.report(path, "must be an object")
            return data
        fields = _field_table(model)
        out: dict[str, Any] = {}
        for raw_key, value in data.items():
            key = raw_key if isinstance(raw_key, str) else self._key_text(raw_key, path)
            spec = fields.get(key)
            if spec is None:
                self.unknown_key(path, key, list(fields))
                continue
            if value is None and not spec.freeform:
                continue  # null means absent
            if spec.config_for is not None:
                out[key] = self.config(spec.config_for, data, value, path + (key,))
            else:
                out[key] = self.value(spec.annotation, value, path + (key,), spec.metadata)
        for name, spec in fields.items():
            if not spec.required:
                continue
            if name not in out:
                self.report(path + (name,), "is required", anchor="parent")
            elif spec.plain_str and isinstance(out[name], str) and not out[name].strip():
                # Empty after trimming is absent (pack-format §2.1): placed like a missing key.
                self.report(path + (name,), "is required", anchor="parent")
        return out

    def _key_text(self, key: Any, path: Path) -> str:
        if isinstance(key, bool):
            return "true" if key else "false"
        return str(key)

    def unknown_key(self, path: Path, key: str, allowed: list[str]) -> None:
        key_path = path + (key,)
        severity: Severity = "warning" if self.lenient else self.unknown_key_severity(key_path)
        hit = suggest_key(key, allowed)
        message = unknown_key_message(hit)
        if hit is None and self.suggest is not None:
            extra = self.suggest(path, key, allowed)
            if extra:
                message = unknown_key_message(extra, quoted=False)
        self.report(
            key_path,
            message,
            severity=severity,
            rule="unknown_key" if severity == "warning" else None,
            anchor="key",
        )

    def config(self, marker: ConfigFor, parent: Mapping[str, Any], value: Any, path: Path) -> Any:
        discriminator = parent.get(marker.discriminator)
        model = marker.resolve(discriminator) if isinstance(discriminator, str) else None
        if model is None:
            return self.value(dict[str, JsonValue], value, path, ())
        saved = self.lenient
        self.lenient = saved or marker.lenient(discriminator)  # type: ignore[arg-type]
        try:
            cleaned = self.model(model, value, path)
        finally:
            self.lenient = saved
        if isinstance(cleaned, dict):
            self.validate(model, cleaned, path)
        return cleaned

    # -- values -------------------------------------------------------------

    def value(self, annotation: Any, data: Any, path: Path, metadata: tuple[Any, ...]) -> Any:
        kind, annotation, more, type_args = _shape(annotation)
        if more:
            metadata = metadata + more
        if kind == "model":
            return self.model(annotation, data, path)
        if kind == "str":
            return self.string(data, path, metadata)
        if kind == "freeform":
            return self.freeform(data, path)
        if kind == "union":
            args = [arg for arg in type_args if arg is not type(None)]
            if data is None:
                return None
            if len(args) == 1:
                return self.value(args[0], data, path, metadata)
            branch = _branch_for(args, data)
            if branch is None:
                names = list(dict.fromkeys(_kind_name(arg) for arg in args))
                self.report(path, "must be " + " or ".join(names))
                return data
            return self.union_member(branch, data, path, metadata)
        if kind == "list":
            return self.list(type_args, data, path)
        if kind == "dict":
            return self.dict(type_args, data, path)
        if kind == "literal":
            return self.literal(type_args, data, path)
        if kind == "bool":
            return self.boolean(data, path)
        if kind == "int":
            return self.integer(data, path)
        if kind == "float":
            return self.number(data, path)
        return data

    def union_member(self, branch: Any, data: Any, path: Path, metadata: tuple[Any, ...]) -> Any:
        # Pydantic reports a failing union value once per member; validate only the member
        # the data's type selects, and keep the whole-document pass quiet below this path.
        before = len(self.issues)
        cleaned = self.value(branch, data, path, metadata)
        self.validated_roots.add(path)
        if not any(issue.severity == "error" for issue in self.issues[before:]):
            annotation = typing.Annotated[(branch, *metadata)] if metadata else branch
            self.validate(_adapter(annotation), cleaned, path)
        return cleaned

    def list(self, args: tuple[Any, ...], data: Any, path: Path) -> Any:
        if not isinstance(data, list):
            self.report(path, "must be a list")
            return data
        item = args[0] if args else JsonValue
        return [self.value(item, entry, path + (index,), ()) for index, entry in enumerate(data)]

    def dict(self, args: tuple[Any, ...], data: Any, path: Path) -> Any:
        if not isinstance(data, Mapping):
            self.report(path, "must be an object")
            return data
        item = args[1] if len(args) > 1 else JsonValue
        out = {}
        for raw_key, value in data.items():
            key = raw_key if isinstance(raw_key, str) else self._key_text(raw_key, path)
            out[key] = self.value(item, value, path + (key,), ())
        return out

    def literal(self, choices: tuple[Any, ...], data: Any, path: Path) -> Any:
        if data not in choices or isinstance(data, bool) != isinstance(choices[0], bool):
            self.report(path, "must be one of " + ", ".join(str(choice) for choice in choices))
        return data

    def string(self, data: Any, path: Path, metadata: tuple[Any, ...]) -> Any:
        if isinstance(data, (Mapping, list)):
            self.report(path, "must be a string")
            return data
        if data is None:
            # Only an item of a list or a map value gets here (a null field is absent): a
            # null is empty text whatever its spelling (``null``, ``~``, nothing), as
            # upstream's zero value, never the word "null".
            return ""
        if not isinstance(data, str):
            text = self.scalar_text(path) if self.scalar_text is not None else None
            if text is None:
                text = ("true" if data else "false") if isinstance(data, bool) else str(data)
            data = text
        if any(isinstance(m, Trim) for m in metadata):
            data = data.strip()
        return data

    def boolean(self, data: Any, path: Path) -> Any:
        if isinstance(data, bool):
            return data
        if isinstance(data, str) and data in YAML11_BOOLS:
            return YAML11_BOOLS[data]
        self.report(path, "must be a boolean")
        return data

    def integer(self, data: Any, path: Path) -> Any:
        if isinstance(data, int) and not isinstance(data, bool):
            return data
        self.report(path, "must be an integer")
        return data

    def number(self, data: Any, path: Path) -> Any:
        if isinstance(data, bool) or not isinstance(data, (int, float)):
            self.report(path, "must be a number")
        elif isinstance(data, float) and not math.isfinite(data):
            self.report(path, "must be a finite number")
        return data

    def freeform(self, data: Any, path: Path) -> Any:
        if isinstance(data, float) and not math.isfinite(data):
            self.report(path, "must be a finite number")
            return data
        if isinstance(data, Mapping):
            out = {}
            for raw_key, value in data.items():
                key = raw_key if isinstance(raw_key, str) else self._key_text(raw_key, path)
                out[key] = self.freeform(value, path + (key,))
            return out
        if isinstance(data, (list, tuple)):
            return [self.freeform(value, path + (index,)) for index, value in enumerate(data)]
        if data is None or isinstance(data, (str, int, float, bool)):
            return data
        return str(data)  # dates and other YAML 1.1 leftovers keep their text

    # -- the validation pass -------------------------------------------------

    def validate(self, model: type[BaseModel] | TypeAdapter[Any], cleaned: Any, path: Path) -> Any | None:
        try:
            if isinstance(model, TypeAdapter):
                return model.validate_python(cleaned, strict=True)
            return model.model_validate(cleaned)
        except ValidationError as exc:
            reported = {issue.path for issue in self.issues if issue.severity == "error"}
            # Every reported path and all its ancestors: an error at or above a reported path
            # is a cascade (looked up, not compared with each reported path: a pack with
            # thousands of rejected values was quadratic here, 5 s at 6,000 cases).
            above = {r[:n] for r in reported for n in range(len(r) + 1)}
            quiet = {root for root in self.validated_roots if root[: len(path)] == path and root != path}
            for error in exc.errors():
                rel, exists = _locate(cleaned, error["loc"])
                full = path + rel
                if full in above or path_is_under(full, reported) or path_is_under(full, quiet):
                    continue
                self.report(full, _message(error), anchor="value" if exists else "parent")
                reported.add(full)
                above.update(full[:n] for n in range(len(full) + 1))
            return None


_ADAPTERS: dict[Any, TypeAdapter[Any]] = {}


def _adapter(annotation: Any) -> TypeAdapter[Any]:
    try:
        return _ADAPTERS[annotation]
    except KeyError:
        adapter = _ADAPTERS[annotation] = TypeAdapter(annotation)
        return adapter
    except TypeError:  # unhashable metadata
        return TypeAdapter(annotation)


def _has_step(current: Any, element: Any) -> bool:
    if isinstance(current, Mapping):
        return element in current
    return isinstance(current, list) and isinstance(element, int) and 0 <= element < len(current)


_TYPE_TAGS = frozenset({"str", "int", "float", "bool", "list", "dict", "none", "json-or-python"})


def _is_field_name(element: Any) -> bool:
    """A field name, as opposed to a union member or function tag of a pydantic ``loc``."""
    return (
        isinstance(element, str)
        and element.isidentifier()
        and not element[0].isupper()
        and element not in _TYPE_TAGS
    )


def _locate(data: Any, loc: tuple[Any, ...]) -> tuple[Path, bool]:
    """Map a pydantic ``loc`` onto data keys and indexes, skipping union/function tags."""
    out: list[str | int] = []
    current = data
    exists = True
    for position, element in enumerate(loc):
        if _has_step(current, element):
            out.append(element)
            current = current[element]
        elif position == len(loc) - 1 and isinstance(current, Mapping) and _is_field_name(element):
            out.append(element)  # a missing key, or an absent key validated by default
            exists = False
    return tuple(out), exists


_TYPE_MESSAGES = {
    "missing": "is required",
    "string_type": "must be a string",
    "int_type": "must be an integer",
    "int_parsing": "must be an integer",
    "int_from_float": "must be an integer",
    "float_type": "must be a number",
    "float_parsing": "must be a number",
    "finite_number": "must be a finite number",
    "bool_type": "must be a boolean",
    "bool_parsing": "must be a boolean",
    "dict_type": "must be an object",
    "model_type": "must be an object",
    "model_attributes_type": "must be an object",
    "list_type": "must be a list",
    "extra_forbidden": "is not an allowed key",
}


def _message(error: Any) -> str:
    kind = error["type"]
    if kind in _TYPE_MESSAGES:
        return _TYPE_MESSAGES[kind]
    if kind == "literal_error":
        expected = str(error.get("ctx", {}).get("expected", ""))
        return "must be one of " + expected.replace("'", "").replace(" or ", ", ")
    return str(error["msg"])


def check_model(
    model: type[BaseModel],
    data: Any,
    *,
    path: Path = (),
    unknown_key_severity: Callable[[Path], Severity] = lambda _path: "error",
    scalar_text: Callable[[Path], str | None] | None = None,
    suggest: Callable[[Path, str, list[str]], str | None] | None = None,
) -> CheckResult:
    """Check ``data`` against ``model`` and report every issue of the document.

    ``path`` prefixes every issue path (and is what the callbacks receive).
    ``unknown_key_severity(path_of_the_key)`` decides error or warning for unknown keys
    (lenient ``ConfigFor`` models always warn); ``scalar_text(path)`` gives the YAML text of
    a scalar that reaches a string field; ``suggest(mapping_path, key, allowed)`` is the last
    resort suggestion, used verbatim (``top-level "tools"``).
    """
    walker = _Walker(unknown_key_severity, scalar_text, suggest)
    cleaned = walker.model(model, data, path)
    instance = walker.validate(model, cleaned, path) if isinstance(cleaned, dict) else None
    if any(issue.severity == "error" for issue in walker.issues):
        instance = None
    return CheckResult(instance, cleaned, walker.issues)
