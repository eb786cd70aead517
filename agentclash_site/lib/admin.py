"""Admin changelists over big tables (run items, attempts, lanes, runs, cases).

Django's changelist counts the whole (filtered) table on every page load for its paginator,
and once more, unfiltered, for "N of M" when a filter or search is active. At 100,000 run
items that is a full scan per page view. :class:`BigTableAdmin` counts at most
``LIST_COUNT_CAP`` rows (one bounded ``COUNT(*)`` over a ``LIMIT``ed subquery) and drops the
second count; ``templates/admin/pagination.html`` and ``actions.html`` then say "more than
10000" instead of a figure that is not one.
"""

from __future__ import annotations

import uuid
from functools import cached_property
from typing import Any

from django.contrib import admin, messages
from django.contrib.admin import FieldListFilter
from django.contrib.admin.actions import delete_selected as django_delete_selected
from django.contrib.admin.utils import unquote
from django.contrib.admin.views.main import PAGE_VAR, ChangeList
from django.core.paginator import Paginator
from django.db import transaction
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse

LIST_COUNT_CAP = 10_000


def related(prefix: str, fields: tuple[str, ...]) -> list[str]:
    """``fields`` of the relation ``prefix``, for ``defer()`` on a ``select_related`` join."""
    return [f"{prefix}__{name}" for name in fields]


class CappedCountPaginator(Paginator):
    """A paginator that counts no further than ``LIST_COUNT_CAP`` rows: ``count`` is exact up
    to the cap, and ``capped`` says there are more (the pages stop at the cap: filter or
    search to reach the rest)."""

    capped = False

    @cached_property
    def count(self) -> int:
        # Any LIST_COUNT_CAP + 1 rows tell as much as the first ones: no ORDER BY, and no
        # annotation (the admin's per-row EXISTS and the like) computed for rows not shown.
        counted = self.object_list.order_by().values("pk")[: LIST_COUNT_CAP + 1].count()
        self.capped = counted > LIST_COUNT_CAP
        return min(counted, LIST_COUNT_CAP)


class BigTableAdmin:
    """For a ``ModelAdmin`` of a table that grows without bound. Pair it with an ``ordering``
    an index serves (``-id``): the capped count and the page both read the first rows of
    that order, where an order through a foreign key (the model's ``Meta.ordering`` of
    ``run`` sorts by the run's ``created_at``) sorts the whole table first."""

    paginator = CappedCountPaginator
    show_full_result_count = False


class SearchByPublicId:
    """A search term that is a UUID finds the row whose ``public_id`` it is, through that
    column's unique index; any other term searches ``search_fields`` as usual, which leave
    ``public_id`` out: ``icontains`` on it cast the UUID of every row to text (a scan of the
    whole table, cases and artifacts included)."""

    def get_search_results(self, request: HttpRequest, queryset: Any, search_term: str) -> Any:
        try:
            public_id = uuid.UUID(search_term.strip())
        except ValueError:
            return super().get_search_results(request, queryset, search_term)  # type: ignore[misc]
        return queryset.filter(public_id=public_id), False


class DeferringChangeList(ChangeList):
    def get_queryset(self, request: HttpRequest, exclude_parameters: Any = None) -> Any:
        queryset = super().get_queryset(request, exclude_parameters)
        return queryset.defer(*self.model_admin.list_defer)


class ListDeferAdmin:
    """``list_defer``, like ``list_select_related``: columns the changelist does not read
    (a document, a bundle's text) while the change page, one row, still shows them."""

    list_defer: tuple[str, ...] = ()

    def get_changelist(self, request: HttpRequest, **kwargs: Any) -> type[ChangeList]:
        return DeferringChangeList


def refused_delete(reasons: list[str]) -> tuple[list[Any], dict[str, int], set[str], list[str]]:
    """What ``ModelAdmin.get_deleted_objects`` returns to refuse a delete for ``reasons``
    (the page lists them as the protected objects) without collecting every row the delete
    would cascade to: a workspace's or deployment's runs reach every item of every run."""
    return [], {}, set(), reasons


class SlugFilter(FieldListFilter):
    """A list filter on a related row's slug, as a box that takes the slug:
    ``list_filter = [("workspace__slug", SlugFilter)]`` filters by ``?workspace__slug=acme``
    (``pack__workspace__slug`` through a relation), under the related model's name.

    For the workspace filter of ten lists: Django's related-field filter lists every
    workspace (a query of all of them and a link each, on every page load: a sidebar that
    grows without limit). Its "related only" variant lists the workspaces with rows in the
    list instead: a SELECT DISTINCT over the whole table (every run, every case) on each
    load, and still no bound. A slug is what operators have at hand (URLs, the CLI): this
    filter costs no query and lists nothing."""

    template = "admin/slug_filter.html"

    def __init__(self, field, request, params, model, model_admin, field_path):  # type: ignore[no-untyped-def]
        super().__init__(field, request, params, model, model_admin, field_path)
        self.title = field.model._meta.verbose_name
        slug = self.used_parameters.pop(field_path, [""])[-1].strip()
        if slug:  # an empty box filters nothing
            self.used_parameters[field_path] = [slug]

    def expected_parameters(self) -> list[str]:
        return [self.field_path]

    @property
    def slug(self) -> str:
        return self.used_parameters.get(self.field_path, [""])[0]

    def choices(self, changelist: ChangeList) -> Any:
        yield {
            "name": self.field_path,
            "value": self.slug,
            "url": changelist.get_query_string(),
            # The box submits a form: the list's other filters, search and order go along
            # (a new filter starts on the first page).
            "hidden": [
                (name, param)
                for name, params in changelist.filter_params.items()
                if name not in (self.field_path, PAGE_VAR)
                for param in params
            ],
            "all_url": changelist.get_query_string(remove=[self.field_path]),
        }


class SaveRefused(Exception):
    """A save refused after the change form's checks let it through (a row another operator
    wrote meanwhile): ``message`` says why, ``field`` names the form field at fault (None:
    the form as a whole). Raised from ``save_model``; see :class:`RefusedSaveAdmin`."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field


_REFUSAL = "_agentclash_save_refused"


class RefusedSaveAdmin:
    """For a ``ModelAdmin`` whose ``save_model`` may raise :class:`SaveRefused`: the add or
    change page is shown again, status 200, with what the operator typed and the reason as
    the form's error, the way Django's admin shows any invalid form.

    The refused POST raises out of ``changeform_view``'s transaction, so nothing of it is
    kept (the save, its log entry). The view then runs once more, with a form whose
    validation adds the reason: the page is rendered by Django's own code, and that pass
    cannot save. Should the form's checks now refuse by themselves (the other operator's
    row committed), their errors are shown and the reason is not repeated."""

    def changeform_view(
        self,
        request: HttpRequest,
        object_id: str | None = None,
        form_url: str = "",
        extra_context: Any = None,
    ) -> HttpResponse:
        try:
            return super().changeform_view(request, object_id, form_url, extra_context)  # type: ignore[misc]
        except SaveRefused as refusal:
            setattr(request, _REFUSAL, refusal)
            return super().changeform_view(request, object_id, form_url, extra_context)  # type: ignore[misc]

    def get_form(self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any) -> Any:
        form = super().get_form(request, obj, change, **kwargs)  # type: ignore[misc]
        refusal: SaveRefused | None = getattr(request, _REFUSAL, None)
        if refusal is None:
            return form

        class RefusedForm(form):  # type: ignore[misc, valid-type]
            def clean(self) -> Any:
                data = super().clean()
                if not self.errors:
                    field = refusal.field if refusal.field in self.fields else None
                    self.add_error(field, refusal.message)
                return data

        RefusedForm.__name__ = form.__name__
        return RefusedForm


class DeleteRefused(Exception):
    """A delete refused inside its transaction (a locked re-check, or the service), after the
    confirmation page's check let it through; the reason, said to the operator."""


class RefusedDeleteAdmin:
    """Deletes (the delete page and the "delete selected" action) that may be refused late:
    ``delete_model`` / ``delete_queryset`` raise :class:`DeleteRefused`, and the operator gets
    "Not deleted: <reason>." instead of a 500. Both run in one transaction, so nothing of a
    refused delete stays, Django's "deleted" log entries included. List "delete_selected" in
    the admin's ``actions`` to use this action instead of the site-wide one."""

    def delete_view(self, request: HttpRequest, object_id: str, extra_context: Any = None) -> HttpResponse:
        try:
            return super().delete_view(request, object_id, extra_context)  # type: ignore[misc]  # atomic on POST
        except DeleteRefused as exc:
            self.message_user(request, f"Not deleted: {exc}.", messages.ERROR)  # type: ignore[attr-defined]
            meta = self.model._meta  # type: ignore[attr-defined]
            return HttpResponseRedirect(
                reverse(f"admin:{meta.app_label}_{meta.model_name}_change", args=[unquote(object_id)])
            )

    @admin.action(permissions=["delete"], description=django_delete_selected.short_description)
    def delete_selected(self, request: HttpRequest, queryset: Any) -> HttpResponse | None:
        try:
            with transaction.atomic():  # Django's action logs the deletions, then deletes
                return django_delete_selected(self, request, queryset)
        except DeleteRefused as exc:
            self.message_user(request, f"Not deleted: {exc}.", messages.ERROR)  # type: ignore[attr-defined]
            return None
