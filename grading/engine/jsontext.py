"""JSON text from agents, judges and users: one ``loads`` that fails the way callers expect.

``json.loads`` raises ``RecursionError``, not ``ValueError``, for a document nested more
deeply than the interpreter's recursion limit (about 1,000 levels, fewer on a deep stack).
Code that treats ``ValueError`` as "not JSON" let it through: one agent answer of nested
brackets, a tool call's arguments or an upload took down a whole lane dispatcher slice (or
answered 500). Here such a document is a ``ValueError`` like any other text that is not JSON.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any


class JSONTooDeep(ValueError):
    """The document is nested too deeply to parse."""


def loads(text: str | bytes | bytearray) -> Any:
    """``json.loads(text)``; raises ``ValueError`` (``JSONTooDeep`` when nested too deeply)."""
    try:
        return json.loads(text)
    except RecursionError:
        raise JSONTooDeep("the JSON is nested too deeply to read") from None


# A reply parses about 1,000 levels deep, and walking such a value in Python (canonical JSON,
# the derived task plan, a guard's URL search, deep equality) goes past the interpreter's
# recursion limit: the whole case was graded ERROR. Evidence keeps this many levels (below
# runs.storable's 250, counted from the stored document's root, so a re-grade of the stored
# response reads the same value) and holds a note in place of any deeper container.
MAX_DEPTH = 200
TOO_DEEP = f"(nested more than {MAX_DEPTH} levels deep: not graded)"

# Characters PostgreSQL cannot store (NUL: jsonb and text refuse it; lone UTF-16 surrogates:
# jsonb refuses them, UTF-8 has no form for them). runs.storable writes each as U+FFFD, so the
# evidence reads them so too: a live grade and the re-grade of the stored response agree.
UNSTORABLE_CHARS = re.compile("[\x00\ud800-\udfff]")
REPLACEMENT = "\ufffd"


def bounded(value: Any) -> Any:
    """``value`` as evidence keeps it, which is how runs.storable stores it: containers nested
    deeper than ``MAX_DEPTH`` become the ``TOO_DEEP`` note, NaN and infinities None (JSON has
    neither; the stored evidence holds null), NUL and lone surrogates in strings and keys
    U+FFFD. The value itself when nothing changes, the common case."""
    return _bounded(value, 0) if _needs_bounding(value, 0) else value


def _needs_bounding(value: Any, depth: int) -> bool:
    if isinstance(value, str):
        return _unstorable(value)
    if isinstance(value, dict | list):
        if depth >= MAX_DEPTH:
            return True
        if isinstance(value, dict):
            for k in value:
                if isinstance(k, str) and _unstorable(k):
                    return True
        # A loop, not any(generator): one frame per level, not two.
        for v in value.values() if isinstance(value, dict) else value:
            if _needs_bounding(v, depth + 1):
                return True
        return False
    return isinstance(value, float) and not math.isfinite(value)


def _bounded(value: Any, depth: int) -> Any:
    if isinstance(value, str):
        return _sub(REPLACEMENT, value)
    if isinstance(value, dict | list):
        if depth >= MAX_DEPTH:
            return TOO_DEEP
        if isinstance(value, dict):
            out: dict[Any, Any] = {}
            for k, v in value.items():
                out[_sub(REPLACEMENT, k) if isinstance(k, str) else k] = _bounded(v, depth + 1)
            return out
        items = []
        for v in value:
            items.append(_bounded(v, depth + 1))
        return items
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


_sub = UNSTORABLE_CHARS.sub


def _unstorable(text: str) -> bool:
    # Not a regex search: it cost a reply's evidence about 3x its build time without any such
    # character. ``in`` finds NUL at memchr speed, an ASCII string (an O(1) flag) holds no
    # surrogate, and a lone surrogate is the one str UTF-8 cannot encode.
    if "\x00" in text:
        return True
    if text.isascii():
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False
