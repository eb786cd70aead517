"""Type-ahead suggestions for the name fields of the HTML forms (a pack slug, a deployment
name): a few names that match what was typed, so a page never lists every row of a
workspace in a ``<select>``. The field stays a plain text input that the view validates on
submit; the suggestions are htmx fragments that only help to type it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import models
from django.db.models import Case, IntegerField, Value, When

# At most this many names per answer: the fragment's size does not grow with the workspace.
SUGGESTIONS = 20
# Longer text matches no slug or name (the longest are 100 characters) and is not queried.
MAX_TYPED = 200


def matching_names(
    queryset: models.QuerySet[Any], field: str, typed: str, *, limit: int = SUGGESTIONS
) -> list[str]:
    """Up to ``limit`` values of ``field`` in ``queryset`` (already scoped to one workspace)
    containing ``typed``, case-insensitively: those starting with it first, then the rest,
    each group in ``field`` order. Empty text lists the first names in order."""
    typed = typed.strip()
    if len(typed) > MAX_TYPED:
        return []
    qs = queryset
    if typed:
        qs = qs.filter(**{f"{field}__icontains": typed}).annotate(
            _later=Case(
                When(**{f"{field}__istartswith": typed}, then=Value(0)),
                default=Value(1),
                output_field=IntegerField(),
            )
        )
        qs = qs.order_by("_later", field)
    else:
        qs = qs.order_by(field)
    return list(qs.values_list(field, flat=True)[:limit])


@dataclass(frozen=True, slots=True)
class Suggestions:
    """What ``templates/_suggestions.html`` renders: the names and the status line's text."""

    names: list[str]
    status_id: str
    status: str


def suggest(
    queryset: models.QuerySet[Any], field: str, typed: str, *, noun: str, status_id: str
) -> Suggestions:
    """The suggestions for ``typed`` (see :func:`matching_names`) with a status line saying
    how many matched, for screen readers (``noun`` is singular: "pack")."""
    typed = typed.strip()
    if not typed:
        return Suggestions([], status_id, "")
    names = matching_names(queryset, field, typed, limit=SUGGESTIONS + 1)
    shown = repr(typed if len(typed) <= 40 else typed[:40] + "…")
    if not names:
        status = f"No {noun} matches {shown}."
    elif len(names) > SUGGESTIONS:
        names = names[:SUGGESTIONS]
        status = f"The first {SUGGESTIONS} {noun}s matching {shown}: type more to narrow them, or press Down to choose one."
    else:
        plural = noun if len(names) == 1 else noun + "s"
        status = f"{len(names)} {plural} matching {shown}: press Down to choose one."
    return Suggestions(names, status_id, status)
