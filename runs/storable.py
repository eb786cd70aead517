"""JSON that PostgreSQL can store, whatever an agent or a judge answered.

An agent's reply is parsed by ``json`` (it accepts what JSON allows and a little more), and
its text reaches the stored evidence, grade and attempt rows. Three things in it fail a write
on PostgreSQL, and a failed write fails the whole batch of results with it (before this
module, such an answer had its batch claimed again and again): the NUL character (``jsonb``
and ``text`` refuse it), lone UTF-16 surrogates (``jsonb`` refuses ``\\ud800``; orjson refuses
to encode them) and integers beyond 64 bits (orjson refuses them; PostgreSQL takes them).

What is stored instead, on every database so that a result reads the same on SQLite: NUL and
lone surrogates become U+FFFD, integers stay exact, NaN and infinities become null (as orjson
writes them), and containers nested more than ``MAX_DEPTH`` levels deep (orjson's own limit
is 254; a reply can parse about 1,000 deep) become a note saying so. For the result writer,
values without any of these, the common case, cost one orjson encoding and one search of its
bytes.
"""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from typing import Any

import orjson

from grading.engine.jsontext import UNSTORABLE_CHARS

_ESCAPED_NUL = b"\\u0000"
# One definition with the evidence reader, which reads these characters as stored (U+FFFD).
_UNSTORABLE_CHARS = UNSTORABLE_CHARS


# orjson writes documents up to 254 levels deep; the slow path keeps this many and writes
# deeper containers as a note (a reply can parse about 1,000 levels deep).
MAX_DEPTH = 250
TOO_DEEP = f"(nested more than {MAX_DEPTH} levels deep: not stored)"


def _clean(value: Any, depth: int = 0) -> Any:
    if isinstance(value, str):
        return _UNSTORABLE_CHARS.sub("\ufffd", value)
    if isinstance(value, dict | list | tuple):
        if depth >= MAX_DEPTH:
            return TOO_DEEP
        depth += 1
        if isinstance(value, dict):
            out: dict[str, Any] = {}
            for k, v in value.items():
                out[_clean(k if isinstance(k, str) else str(k))] = _clean(v, depth)
            return out
        items = []
        for v in value:  # a loop, not a comprehension: one frame per level
            items.append(_clean(v, depth))
        return items
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _encode_datetime(value: Any) -> str:
    if isinstance(value, datetime):
        return (value if value.tzinfo else value.replace(tzinfo=UTC)).isoformat()
    raise TypeError(f"{type(value).__name__} is not JSON")


def storable_json(value: Any, option: int = 0) -> bytes:
    """``value`` as JSON PostgreSQL can store (naive datetimes are UTC, as with
    ``orjson.OPT_NAIVE_UTC``)."""
    try:
        out = orjson.dumps(value, option=option)
    except orjson.JSONEncodeError:  # big integers, lone surrogates
        pass
    else:
        if _ESCAPED_NUL not in out:  # it also matches an escaped backslash before "u0000": harmless
            return out
    return json.dumps(
        _clean(value), ensure_ascii=False, separators=(",", ":"), default=_encode_datetime
    ).encode()


def storable(value: Any) -> Any:
    """``value`` cleaned as ``storable_json`` cleans it, for writes through the ORM (rescoring,
    judge passes: not per-item hot paths). It always walks the value: Django's encoder writes
    NaN and infinities as ``NaN`` and ``Infinity``, which orjson's bytes would not show."""
    return _clean(value)
