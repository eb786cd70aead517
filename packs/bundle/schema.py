"""The published JSON Schema of a pack document (pack-format §11).

Generated from the pydantic models (``Bundle.model_json_schema()``) and checked in at
``packs/schemas/challenge-pack.v1.json``; ``tests/packs/test_schema.py`` fails when
regenerating changes it. Regenerate with::

    python manage.py pack schema > packs/schemas/challenge-pack.v1.json

It is never stricter than the validator: every optional key also admits ``null`` (null
means absent), so does an item of a text list or map (it is empty text), and objects
outside ``version.evaluation_spec`` stay open (an unknown key there is a warning, see
``packs.bundle.models``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .models import Bundle

SCHEMA_ID = "https://agentclash.dev/schemas/challenge-pack.v1.json"
SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"
SCHEMA_PATH = Path(__file__).resolve().parent.parent / "schemas" / "challenge-pack.v1.json"
_META = ("title", "description", "default", "examples")


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    if schema.get("type") == "null" or schema == {}:
        return schema
    options = schema.get("anyOf")
    if isinstance(options, list):
        if not any(option.get("type") == "null" for option in options if isinstance(option, dict)):
            schema = {**schema, "anyOf": [*options, {"type": "null"}]}
        return schema
    meta = {key: schema[key] for key in _META if key in schema}
    inner = {key: value for key, value in schema.items() if key not in _META}
    return {"anyOf": [inner, {"type": "null"}], **meta}


def _optional_nulls(node: Any) -> Any:
    """Every key that is not required also admits null (pack-format §2.1: null means absent)."""
    if isinstance(node, list):
        return [_optional_nulls(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {key: _optional_nulls(value) for key, value in node.items()}
    properties = out.get("properties")
    if isinstance(properties, dict):
        required = set(out.get("required", []))
        out["properties"] = {
            name: value if name in required or not isinstance(value, dict) else _nullable(value)
            for name, value in properties.items()
        }
    return out


_TEXT = ["string", "number", "boolean"]  # a text value: a YAML scalar keeps its text


def _null_text_items(node: Any) -> Any:
    """An item of a text list, or a value of a text map, also admits null: the validator
    takes a null there as empty text (pack-format §2.1), and so must the schema."""
    if isinstance(node, list):
        return [_null_text_items(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {key: _null_text_items(value) for key, value in node.items()}
    for key in ("items", "additionalProperties"):
        inner = out.get(key)
        if isinstance(inner, dict) and inner.get("type") == _TEXT:
            out[key] = {**inner, "type": [*_TEXT, "null"]}
    return out


def pack_json_schema() -> dict[str, Any]:
    """The pack JSON Schema (draft 2020-12) as a dict."""
    schema = _null_text_items(_optional_nulls(Bundle.model_json_schema()))
    return {"$schema": SCHEMA_DIALECT, "$id": SCHEMA_ID, **schema}


def render_schema() -> str:
    """The schema exactly as checked in: sorted keys, two-space indent, final newline."""
    return json.dumps(pack_json_schema(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


if __name__ == "__main__":  # pragma: no cover
    import sys

    sys.stdout.write(render_schema())
