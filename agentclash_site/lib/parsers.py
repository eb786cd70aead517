"""Request parsers for the API (a module of their own: DRF's ``APIView`` reads the default
parsers from the settings when ``rest_framework.views`` is imported, so this module must not
import it)."""

from __future__ import annotations

from typing import Any

from rest_framework import exceptions, parsers


def _path_with_nul(data: Any) -> str | None:
    """The JSON path of the first key or string holding a NUL character, or None."""
    stack: list[tuple[str, Any]] = [("", data)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, str):
            if "\x00" in value:
                return path or "the body"
        elif isinstance(value, dict):
            for key, item in value.items():
                name = str(key).replace("\x00", "\\0")
                child = f"{path}.{name}" if path else name
                if "\x00" in str(key):
                    return child
                stack.append((child, item))
        elif isinstance(value, list):
            stack.extend((f"{path}[{i}]", item) for i, item in enumerate(value))
    return None


class JSONParser(parsers.JSONParser):
    """DRF's JSON parser, plus two refusals answered 400 like any other bad JSON: a body
    nested too deeply to parse (``json`` raises ``RecursionError``, which DRF let through as a
    500) and a NUL character in any key or string (PostgreSQL refuses NUL in text: a slug or
    name holding one answered 500 once it reached a query)."""

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise exceptions.ParseError("JSON parse error - nested too deeply") from None
        path = _path_with_nul(data)
        if path is not None:
            raise exceptions.ParseError(f"JSON parse error - {path} must not contain NUL characters")
        return data
