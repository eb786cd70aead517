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
from django.conf import settings
from django.core.exceptions import FieldDoesNotExist, ValidationError
from django.db import connection, models
from django.db.models import BooleanField, F, Q
from django.db.models.expressions import RawSQL
from django.http import HttpRequest, HttpResponse, QueryDict
from django.shortcuts import render
from django.utils import timezone

T = TypeVar("T")

MAX_PAGE_SIZE = 500


class InvalidCursor(ValueError):
    """The ``after`` cursor was not produced by this list (edited, truncated, other sort)."""

    def page_message(self) -> str:
        """What a list page says above its first rows (answered 400) for such a link."""
        return f"The link to the next page is not valid: {self}."


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
        try:
            return dt.datetime.fromisoformat(value["dt"])
        except (TypeError, ValueError) as exc:
            raise InvalidCursor("the cursor is malformed; start from the first page") from exc
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
    """An integer key, or a UUID key (as text in a cursor)."""
    if isinstance(value, bool):
        return False
    if isinstance(value, (int, uuid.UUID)):
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


def _typed(queryset: models.QuerySet[Any], field: str | None, values: tuple[Any, ...]) -> tuple[Any, ...]:
    """The cursor's values as the model's fields read them (``field``'s value, then the id):
    a cursor edited to hold a value of another type is :class:`InvalidCursor` here, not an
    error of the query (a 500) or a filter that silently matches nothing."""
    meta = queryset.model._meta
    fields: list[Any] = [meta.pk]
    if field is not None:
        try:
            fields.insert(0, meta.get_field(field))
        except FieldDoesNotExist:  # an annotation: its value is passed on as it is
            fields.insert(0, None)
    out = []
    for model_field, value in zip(fields, values, strict=True):
        if model_field is None or (value is None and model_field is not meta.pk):
            out.append(value)  # None: the NULL phase of a nullable sort field
            continue
        try:
            value = model_field.to_python(value)
        except (ValidationError, TypeError, ValueError, OverflowError) as exc:
            raise InvalidCursor("the cursor is malformed; start from the first page") from exc
        if isinstance(value, int) and not _BIGINT_MIN <= value <= _BIGINT_MAX:
            raise InvalidCursor("the cursor is malformed; start from the first page")
        if isinstance(value, dt.datetime) and settings.USE_TZ and timezone.is_naive(value):
            raise InvalidCursor("the cursor is malformed; start from the first page")
        out.append(value)
    return tuple(out)


def _ordering(keys: Sequence[str], descending: bool) -> list[Any]:
    return [F(k).desc() if descending else F(k).asc() for k in keys]


_BIGINT_MIN, _BIGINT_MAX = -(2**63), 2**63 - 1


def _scope_range(
    queryset: models.QuerySet[Any],
    scope: Mapping[str, Any],
    field: str | None,
    descending: bool,
    cursor: tuple[Any, ...] | None,
) -> list[RawSQL] | None:
    """Two row comparisons that select exactly the scope's rows after the cursor:
    ``(scope..., field, id) > (values..., cursor)`` and ``<= (values..., +inf, max)``
    (mirrored when descending). None when they cannot be written (then the caller filters
    the scope with plain equalities).

    Why: with ``run_id = X ORDER BY id LIMIT 51`` PostgreSQL dropped ``run_id`` from the
    order (it is constant) and walked the primary key, reading 102,000 rows of another run
    before the first row of this one (it assumes a run's rows are spread evenly over the
    ids). Bounded by row comparisons and ordered by ``(scope..., field, id)``, the list can
    only be served by its composite index, walked from the cursor: 0.1 ms at any depth.
    """
    if connection.vendor != "postgresql" or not scope:
        return None
    meta = queryset.model._meta
    if meta.pk.get_internal_type() not in ("AutoField", "BigAutoField", "IntegerField", "BigIntegerField"):
        return None
    if field is not None and meta.get_field(field).get_internal_type() != "FloatField":
        return None
    quote = connection.ops.quote_name
    table = quote(meta.db_table)
    keys = [*scope, *([] if field is None else [field]), meta.pk.attname]
    columns = ", ".join(f"{table}.{quote(meta.get_field(k).column)}" for k in keys)
    fixed = list(scope.values())
    low_end = [*fixed, *([] if field is None else [float("-inf")]), -1]
    high_end = [*fixed, *([] if field is None else [float("inf")]), _BIGINT_MAX]
    if descending:
        start, start_op, stop, stop_op = (cursor or high_end), "<", low_end, ">="
        if cursor is None:
            start_op = "<="
    else:
        start, start_op, stop, stop_op = (cursor or low_end), ">", high_end, "<="
    if cursor is not None:
        start = [*fixed, *cursor]

    def row(op: str, params: list[Any]) -> RawSQL:
        placeholders = ", ".join(["%s"] * len(params))
        # Column names come from the model's meta (quoted); every value is a query parameter.
        return RawSQL(f"(({columns}) {op} ({placeholders}))", params, output_field=BooleanField())  # noqa: S611

    return [row(start_op, list(start)), row(stop_op, list(stop))]


def _scoped(
    queryset: models.QuerySet[Any],
    scope: Mapping[str, Any],
    field: str | None,
    descending: bool,
    cursor: tuple[Any, ...] | None,
) -> models.QuerySet[Any]:
    """``queryset`` narrowed to the scope after ``cursor``, in (scope..., field, id) order."""
    bounds = _scope_range(queryset, scope, field, descending, cursor)
    keys = [*([] if field is None else [field]), "id"]
    if bounds is None:
        qs = queryset.filter(**scope)
        if cursor is not None:
            qs = qs.filter(_seek(field, descending, cursor))
        return qs.order_by(*_ordering(keys, descending))
    qs = queryset
    for bound in bounds:
        qs = qs.filter(bound)
    return qs.order_by(*_ordering([*scope, *keys], descending))


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

    ``scope`` holds the list's equality filters on the leading columns of the index that
    serves it (``{"run_id": run.id}`` for an index ``(run, id)``). Pass them here, not in
    ``queryset``: they are applied as a range on that index (see :func:`_scope_range`).
    """
    size = max(1, min(int(size), MAX_PAGE_SIZE))
    scope = dict(scope or {})
    descending = sort.startswith("-")
    name = sort.lstrip("-")
    field = None if name == "id" else name
    values = decode_cursor(after, sort) if after else None
    if values is not None:
        _seek(field, descending, values)  # validates the cursor's shape
        values = _typed(queryset, field, values)
    in_null_phase = values is not None and field is not None and values[0] is None

    if in_null_phase:
        assert values is not None and field is not None
        nulls = queryset.filter(**{f"{field}__isnull": True})
        rows = list(_scoped(nulls, scope, None, descending, (values[1],))[: size + 1])
    else:
        qs = queryset.filter(**{f"{field}__isnull": False}) if field is not None and nullable else queryset
        rows = list(_scoped(qs, scope, field, descending, values)[: size + 1])
        if field is not None and nullable and len(rows) <= size:
            # The values ran out on this page: continue with the NULL rows.
            nulls = queryset.filter(**{f"{field}__isnull": True})
            rows.extend(_scoped(nulls, scope, None, descending, None)[: size + 1 - len(rows)])

    more = len(rows) > size
    rows = rows[:size]
    next_cursor = None
    if more and rows:
        last = rows[-1]
        get = last.get if isinstance(last, dict) else lambda k: getattr(last, k)
        key = (get("id"),) if field is None else (get(field), get("id"))
        next_cursor = encode_cursor(sort, key)
    return Page(items=rows, next_cursor=next_cursor)


def query_without(params: QueryDict, *names: str) -> str:
    """``params`` (a request's GET) as a query string without ``names`` and ``partial``: the
    base of a paged list's "more" link, which adds its own cursor (and, for htmx, its partial)
    while keeping the list's filters and the cursors of the page's other lists."""
    kept = params.copy()
    for name in (*names, "partial"):
        kept.pop(name, None)
    return kept.urlencode()


def page_into(
    request: HttpRequest,
    template: str,
    context: dict[str, Any],
    queryset: models.QuerySet[Any],
    *,
    sort: str,
    size: int,
    items: str,
    partial: str = "rows",
) -> HttpResponse | None:
    """The list page's keyset step, shared by the paged pages of one list: the page of
    ``queryset`` after the request's ``after`` cursor goes into ``context`` as ``page`` and
    ``items``. Answers the response that ends the view when there is one: 400 with the page's
    message for a cursor this list did not make, the ``partial`` rows (``more`` set) for an
    htmx "More ..." request; None when the view goes on to render its whole page."""
    try:
        page = keyset_page(queryset, sort=sort, after=request.GET.get("after") or None, size=size)
    except InvalidCursor as exc:
        context["error"] = exc.page_message()
        return render(request, template, context, status=400)
    context.update({"page": page, items: page.items})
    if getattr(request, "htmx", False) and request.GET.get("partial") == partial:
        return render(request, f"{template}#{partial}", {**context, "more": True})
    return None
