"""Input-set selection at run creation and in offline ``grade`` (pack-format §13).

A pure function over a manifest (pack-format §6), shared by ``manage.py grade`` and run
creation: ``select_input_set(manifest, selector, input_set_ids=...)``.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

AMBIGUOUS = "ambiguous_challenge_input_set"
INVALID = "invalid_challenge_input_set_id"
MISSING = "missing_challenge_input_set_id"


class SelectionError(Exception):
    """A selection failure with its API/CLI error code (400 / exit 2)."""

    def __init__(self, code: str, message: str, choices: list[str] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.choices = choices

    def to_dict(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.choices is not None:
            error["choices"] = self.choices
        return {"error": error}


@dataclass(frozen=True)
class Selection:
    """The chosen input set, or the zero-set run (``input_set is None``).

    ``cases`` are the manifest cases to run; in a zero-set run, one empty case per
    challenge: ``{"challenge_key": key, "case_key": key, "payload": {}}``.
    """

    input_set: Mapping[str, Any] | None
    cases: list[Mapping[str, Any]] = field(default_factory=list)
    input_set_id: str | None = None

    @property
    def key(self) -> str | None:
        return self.input_set.get("key") if self.input_set is not None else None

    @property
    def zero_set(self) -> bool:
        return self.input_set is None


def _fold(text: Any) -> str:
    return str(text).strip().casefold() if text is not None else ""


def select_input_set(
    manifest: Mapping[str, Any],
    selector: str | None,
    *,
    input_set_ids: Mapping[str, str] | None = None,
    other_version_ids: Collection[str] = (),
) -> Selection:
    """Pick the input set a selector names (an id, a key, or an exact name).

    - An id match (``input_set_ids``: key -> id) wins; keys and names compare trimmed and
      ignoring case. Several key/name matches: ``ambiguous_challenge_input_set``. No match:
      ``invalid_challenge_input_set_id`` ("must belong to the selected pack version" when
      the selector is an id of another version, ``other_version_ids``).
    - No selector: 0 sets -> the zero-set run; 1 set -> it; 2 or more ->
      ``missing_challenge_input_set_id`` with the set keys as ``choices``.
    """
    sets = [s for s in manifest.get("input_sets") or [] if isinstance(s, Mapping)]
    ids = dict(input_set_ids or {})
    if selector is None or not str(selector).strip():
        if not sets:
            return Selection(None, _empty_cases(manifest))
        if len(sets) == 1:
            return _selection(sets[0], ids)
        raise SelectionError(
            MISSING,
            "the pack version has several input sets; choose one",
            [str(s.get("key")) for s in sets],
        )
    wanted = str(selector).strip()
    as_id = _canonical_id(wanted)
    by_id = [s for s in sets if ids.get(str(s.get("key"))) is not None and ids[str(s.get("key"))] == as_id]
    if by_id:
        return _selection(by_id[0], ids)
    folded = wanted.casefold()
    matches = [s for s in sets if folded in (_fold(s.get("key")), _fold(s.get("name")))]
    if len(matches) > 1:
        raise SelectionError(
            AMBIGUOUS,
            "matches several input sets; use the input set id",
            [str(s.get("key")) for s in matches],
        )
    if matches:
        return _selection(matches[0], ids)
    if as_id in other_version_ids:
        raise SelectionError(INVALID, "must belong to the selected pack version")
    raise SelectionError(INVALID, "matches no input set of the selected pack version")


def _canonical_id(text: str) -> str:
    """An id as stored (a UUID's lower-case hyphenated form: a UUID is read ignoring case,
    RFC 9562 §4), or the text itself when it is not a UUID."""
    try:
        return str(uuid.UUID(text))
    except ValueError:
        return text


def _selection(input_set: Mapping[str, Any], ids: Mapping[str, str]) -> Selection:
    cases = [c for c in input_set.get("cases") or [] if isinstance(c, Mapping)]
    return Selection(input_set, cases, ids.get(str(input_set.get("key"))))


def _empty_cases(manifest: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [
        {"challenge_key": c["key"], "case_key": c["key"], "payload": {}}
        for c in manifest.get("challenges") or []
        if isinstance(c, Mapping) and c.get("key")
    ]
