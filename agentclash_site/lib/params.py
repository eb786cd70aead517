"""Query-string parameters of the HTML views, parsed into a 400 that names the parameter and
what it accepts (never a 500 from a value the database cannot hold)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from django.http import QueryDict

# The largest integer both databases store (PostgreSQL bigint, SQLite INTEGER). A bigger one
# never reaches a query: SQLite raises OverflowError binding it, PostgreSQL a DataError
# wherever it casts it to bigint.
MAX_DB_INTEGER = 2**63 - 1
_WHOLE_NUMBER = re.compile(r"-?[0-9]+")


class BadParameter(Exception):
    """A query-string value a page cannot use. The page answers 400 showing ``message``,
    which names the parameter and what it accepts."""

    def __init__(self, name: str, message: str) -> None:
        super().__init__(message)
        self.name = name
        self.message = message


def whole_number(raw: str, *, low: int = 1, high: int = MAX_DB_INTEGER) -> int:
    """``raw`` as an int from ``low`` to ``high``; ValueError otherwise. ASCII digits only:
    ``str.isdigit`` also accepts "²", which ``int`` refuses."""
    text = raw.strip()
    # More digits are out of range anyway, and int() refuses over 4,300 with its own message.
    if not _WHOLE_NUMBER.fullmatch(text) or len(text) > 25:
        raise ValueError(f"must be a whole number from {low} to {high}")
    value = int(text)
    if not low <= value <= high:
        raise ValueError(f"must be a whole number from {low} to {high}")
    return value


def _shown(raw: str) -> str:
    return repr(raw if len(raw) <= 40 else raw[:40] + "…")


def int_param(params: QueryDict, name: str, *, low: int = 1, high: int = MAX_DB_INTEGER) -> int | None:
    """The whole number of ``params[name]``, None when absent or empty; ``BadParameter``
    when it is not one, or not from ``low`` to ``high``."""
    raw = params.get(name, "")
    if not raw.strip():
        return None
    try:
        return whole_number(raw, low=low, high=high)
    except ValueError as exc:
        raise BadParameter(name, f"{name} {exc}, not {_shown(raw)}.") from None


def choice_param(
    params: QueryDict, name: str, choices: Mapping[str, str], *, listed: Iterable[str] | None = None
) -> str:
    """The value ``choices`` maps ``params[name]`` to, matched case-insensitively ("" when
    absent or empty); ``BadParameter`` listing the accepted spellings (``listed``, default the
    keys of ``choices``) otherwise. Keys of ``choices`` are lower case."""
    raw = params.get(name, "").strip()
    if not raw:
        return ""
    value = choices.get(raw.lower())
    if value is None:
        accepted = ", ".join(listed if listed is not None else choices)
        raise BadParameter(name, f"{name} must be one of {accepted}, not {_shown(raw)}.")
    return value
