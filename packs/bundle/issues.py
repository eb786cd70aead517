"""Field issues of the pack validator (spec/pack-format.md §3).

A ``BundleIssue`` is one error or warning as the validate body shows it: a dotted, indexed
``field`` path, a short predicate ``message``, 1-based ``line``/``column`` (``None`` when the
issue has no position, e.g. archive errors), optional engine text in ``detail`` and, for
warnings, the lint ``rule``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

Path = tuple[str | int, ...]

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*\Z")


def format_path(path: Sequence[str | int]) -> str:
    """``("input_sets", 0, "cases", 2, "case_key")`` -> ``input_sets[0].cases[2].case_key``.

    A map entry whose name is not an identifier-like word is written ``["name"]``.
    """
    out: list[str] = []
    for part in path:
        if isinstance(part, int):
            out.append(f"[{part}]")
        elif _NAME.match(part):
            out.append(f".{part}" if out else part)
        else:
            out.append("[" + _json_string(part) + "]")
    return "".join(out)


def _json_string(text: str) -> str:
    import json

    return json.dumps(text, ensure_ascii=False)


@dataclass(frozen=True, slots=True)
class BundleIssue:
    field: str
    message: str
    line: int | None = None
    column: int | None = None
    detail: str = ""
    rule: str | None = None  # set on warnings (spec/interfaces.md §3 "lint / warning rule")
    severity: str = "error"  # "error" | "warning"

    @property
    def is_warning(self) -> bool:
        return self.severity == "warning"

    def sort_key(self) -> tuple[Any, ...]:
        # §3: sorted by (line, column, field, message); positionless issues (archive) first.
        return (
            self.line if self.line is not None else -1,
            self.column if self.column is not None else -1,
            self.field,
            self.message,
        )

    def as_error(self) -> BundleIssue:
        """The same issue as an error (``--strict``), keeping its rule."""
        return replace(self, severity="error")

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "field": self.field,
            "message": self.message,
            "line": self.line,
            "column": self.column,
        }
        if self.detail:
            out["detail"] = self.detail
        if self.rule:
            out["rule"] = self.rule
        return out


def sort_issues(issues: Iterable[BundleIssue]) -> list[BundleIssue]:
    """Sorted as §3 asks, without exact duplicates (two checks may reach the same verdict)."""
    seen: set[BundleIssue] = set()
    unique: list[BundleIssue] = []
    for issue in issues:
        if issue not in seen:
            seen.add(issue)
            unique.append(issue)
    return sorted(unique, key=BundleIssue.sort_key)
