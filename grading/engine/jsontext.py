"""JSON text from agents, judges and users: one ``loads`` that fails the way callers expect.

``json.loads`` raises ``RecursionError``, not ``ValueError``, for a document nested more
deeply than the interpreter's recursion limit (about 1,000 levels, fewer on a deep stack).
Code that treats ``ValueError`` as "not JSON" let it through: one agent answer of nested
brackets, a tool call's arguments or an upload took down a whole lane dispatcher slice (or
answered 500). Here such a document is a ``ValueError`` like any other text that is not JSON.
"""

from __future__ import annotations

import json
from typing import Any


class JSONTooDeep(ValueError):
    """The document is nested too deeply to parse."""


def loads(text: str | bytes | bytearray) -> Any:
    """``json.loads(text)``; raises ``ValueError`` (``JSONTooDeep`` when nested too deeply)."""
    try:
        return json.loads(text)
    except RecursionError:
        raise JSONTooDeep("the JSON is nested too deeply to read") from None
