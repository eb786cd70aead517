"""Keyset pagination: an opaque cursor over (sort key, id), never OFFSET.

At depth 100k an OFFSET scan cost 40 ms against 0.06 ms for a keyset seek
(ARCHITECTURE.md "Measured facts"), so every long list pages with :func:`keyset_page`.

The order is one optional sort field plus a unique tie-breaker (``id``) going the same way,
so one plain B-tree index ``(filter columns..., sort, id)`` serves both directions. A
nullable sort field is handled in two phases that follow PostgreSQL's natural NULL order
(NULLS LAST ascending, NULLS FIRST descending): the cursor records which phase it is in.
The seek repeats the sort bound as a plain range (``score >= v``) so it becomes an index
condition instead of a filter applied to every row read from the start.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Generic, TypeVar

import orjson
from django.db import connection, models
from django.db.models import BooleanField, F, Q
from django.db.models.expressions import RawSQL

T = TypeVar("T")

MAX_PAGE_SIZE = 500


class InvalidCursor(ValueError):
    """The ``after`` cursor was not produced by this list (edited, truncated, other sort)."""


@dataclass(frozen=True, slots=True)
class Page(Generic[T]):
    items: list[T]
    next_cursor: str | None  # None on the last page

    @property
    def has_next(self) -> bool:
        return self.next_cursor is not None


def _plain(value: Any) -> Any:
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, dt.datetime):
        return {"dt": value.isoformat()}
    if isinstance(value, Decimal):
        return float(value)
    return value


def _unplain(value: Any) -> Any:
    if isinstance(value, dict) and set(value) == {"dt"}:
        return dt.datetime.fromisoformat(value["dt"])
    return value


def encode_cursor(sort: str, values: Sequence[Any]) -> str:
    """The cursor of the row holding ``values`` (sort value, id) under order ``sort``."""
    raw = orjson.dumps([sort, [_plain(v) for v in values]])
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def decode_cursor(cursor: str, sort: str) -> tuple[Any, ...]:
    """The values of a cursor; :class:`InvalidCursor` unless it was made for ``sort``."""
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        decoded = orjson.loads(base64.urlsafe_b64decode(padded.encode("ascii")))
    except (binascii.Error, ValueError, UnicodeEncodeError) as exc:
        raise InvalidCursor("the cursor is not one this list produced; start from the first page") from exc
    if (
        not isinstance(decoded, list)
        or len(decoded) != 2
        or decoded[0] != sort
        or not isinstance(decoded[1], list)
    ):
        raise InvalidCursor("the cursor belongs to another sort order; start from the first page")
    return tuple(_unplain(v) for v in decoded[1])


def _is_id(value: Any) -> bool:
    """An integer key, or a UUID key as text."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return True
    if isinstance(value, str):
        try:
            uuid.UUID(value)
        except ValueError:
            return False
        return True
    return False


def _seek(field: str | None, descending: bool, values: tuple[Any, ...]) -> Q:
    """Rows strictly after the cursor row, in the order (field, id) both ascending or both
    descending, NULLs of ``field`` last in the traversal."""
    gt, ge = ("lt", "lte") if descending else ("gt", "gte")
    if field is None:
        if len(values) != 1 or not _is_id(values[0]):
            raise InvalidCursor("the cursor is malformed; start from the first page")
        return Q(**{f"id__{gt}": values[0]})
    if len(values) != 2 or not _is_id(values[1]):
        raise InvalidCursor("the cursor is malformed; start from the first page")
    value, last_id = values
    if value is None:  # already in the NULL phase
        return Q(**{f"{field}__isnull": True, f"id__{gt}": last_id})
    # Redundant ``field >= value`` first: it is the index range condition.
    return Q(**{f"{field}__{ge}": value}) & (
        Q(**{f"{field}__{gt}": value}) | Q(**{field: value, f"id__{gt}": last_id})
    )


def _ordering(field: str | None, descending: bool) -> list[Any]:
    keys = [*([] if field is None else [field]), "id"]
    return [F(k).desc() if descending else F(k).asc() for k in keys]


_BIGINT_MAX = 2**63 - 1


def _row_bound(
    queryset: models.QuerySet[Any],
    scope: Mapping[str, Any],
    field: str | None,
    descending: bool,
    values: tuple[Any, ...] | None,
) -> RawSQL | None:
    """``ROW(scope..., field, id) > ROW(...)`` (``<`` descending) for PostgreSQL.

    A row comparison is an index condition on the composite index ``(scope..., field, id)``
    that the primary key cannot serve, so the planner walks that index from the cursor.
    Without it, filtering ``run_id = X ORDER BY id LIMIT 51`` was planned as a primary-key
    scan that read 102,000 rows of another run before the first row of this one (the
    planner assumes a run's rows are spread evenly over the ids). None when it cannot be
    built (other databases, a non-integer id, a field without a known extreme value).
    """
    if connection.vendor != "postgresql" or not scope:
        return None
    meta = queryset.model._meta
    table = connection.ops.quote_name(meta.db_table)
    columns = [f"{table}.{connection.ops.quote_name(meta.get_field(k).column)}" for k in scope]
    params = list(scope.values())
    if values is None:  # the first page: from the extreme end
        if meta.pk.get_internal_type() not in ("AutoField", "BigAutoField"):
            return None
        if field is not None:
            if meta.get_field(field).get_internal_type() != "FloatField":
                return None
            columns.append(f"{table}.{connection.ops.quote_name(meta.get_field(field).column)}")
            params.append(float("inf") if descending else float("-inf"))
        params.append(_BIGINT_MAX if descending else -1)
    else:
        if field is not None:
            if values[0] is None:
                return None  # the NULL phase: row comparisons with NULL are never true
            columns.append(f"{table}.{connection.ops.quote_name(meta.get_field(field).column)}")
        params.extend(values)
    columns.append(f"{table}.{connection.ops.quote_name(meta.pk.column)}")
    placeholders = ", ".join(["%s"] * len(params))
    op = "<" if descending else ">"
    # Column names come from the model's meta (quoted); every value is a query parameter.
    sql = f"(({', '.join(columns)}) {op} ({placeholders}))"
    return RawSQL(sql, params, output_field=BooleanField())  # noqa: S611


def keyset_page(
    queryset: models.QuerySet[Any],
    *,
    sort: str = "id",
    after: str | None = None,
    size: int = 50,
    nullable: bool = False,
    scope: Mapping[str, Any] | None = None,
) -> Page[Any]:
    """One page of ``queryset`` in the order named by ``sort``.

    ``sort`` is ``"id"``, ``"-id"``, ``"<field>"`` or ``"-<field>"`` (then ordered by
    ``(field, id)``). ``nullable`` says the field may be NULL: NULL rows come after every
    value, in id order, through a second query on the page where the values run out.
    Rows must expose ``id`` and the sort field as attributes (models or ``.values()`` dicts).

    ``scope`` gives the columns the queryset is filtered to one value each (``{"run_id":
    run.id}``), the leading columns of the index that serves the list: the seek is then
    also written as a row comparison on that index (see :func:`_row_bound`).
    """
    size = max(1, min(int(size), MAX_PAGE_SIZE))
    descending = sort.startswith("-")
    name = sort.lstrip("-")
    field = None if name == "id" else name
    values = decode_cursor(after, sort) if after else None
    in_null_phase = values is not None and field is not None and values[0] is None

    qs = queryset
    if field is not None and nullable and not in_null_phase:
        qs = qs.filter(**{f"{field}__isnull": False})
    if values is not None:
        qs = qs.filter(_seek(field, descending, values))
    bound = _row_bound(queryset, scope or {}, field, descending, values)
    if bound is not None:
        qs = qs.filter(bound)
    rows = list(qs.order_by(*_ordering(field, descending))[: size + 1])

    if field is not None and nullable and not in_null_phase and len(rows) <= size:
        # The values ran out on this page: continue with the NULL rows.
        nulls = queryset.filter(**{f"{field}__isnull": True}).order_by(*_ordering(field, descending))
        rows.extend(nulls[: size + 1 - len(rows)])

    more = len(rows) > size
    rows = rows[:size]
    next_cursor = None
    if more and rows:
        last = rows[-1]
        get = last.get if isinstance(last, dict) else lambda k: getattr(last, k)
        key = (get("id"),) if field is None else (get(field), get("id"))
        next_cursor = encode_cursor(sort, key)
    return Page(items=rows, next_cursor=next_cursor)
