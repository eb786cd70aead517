"""Admin console for runs: runs, lanes, items and attempts with useful columns and filters,
operations as admin actions (cancel runs, requeue stuck items, retry failed items, re-score:
R2's services and sweeper), and the operations page linked from the admin index.

Imported from ``runs/admin.py``. Runs, lanes, items and attempts are view-only here (no add,
change or delete): their state moves only through the services, which the actions call, so
the counters stay true.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from django.contrib import admin, messages
from django.db.models import Exists, OuterRef, QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html

from agentclash_site.lib.admin import BigTableAdmin, SlugFilter, related
from agentclash_site.lib.broker import BrokerError, broker_message
from agentclash_site.workspaces.models import Membership
from runs.models import RUN_HEAVY_FIELDS, Attempt, GradeRevision, Run, RunItem, RunLane

admin.site.index_template = "admin/runs_index.html"


class ReadOnly:
    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


# Big JSON columns no list or change page shows (or, for ``stats``, only the run's own change
# page, which reads it alone). ``case_findings`` is about 0.5 kB per case, a lane's
# ``counters`` hold per-case repetition sums: a list of 100 lanes or items joined to them
# read megabytes per page.
RUN_JOINED_HEAVY = (*RUN_HEAVY_FIELDS, "stats", "pack_version__warnings", "pack_version__critique_findings")
LANE_HEAVY = ("settings", "counters", "stats")


# The columns the lists of items, attempts and lanes offer to sort by: the primary key. A
# header click on any other column (case key, state, score, latency) sorted the whole table
# (every item of every run) for one page.
BIG_LIST_SORTABLE = ["id"]


class SearchByRunId:
    """A search term that is a UUID finds the rows of that run through its index; anything
    else searches ``search_fields`` as usual. (``icontains`` on the id cast the UUID of
    every row to text: a scan of the whole table.)"""

    run_id_field = "run_id"

    def get_search_results(self, request: HttpRequest, queryset: QuerySet[Any], search_term: str) -> Any:
        try:
            run_id = uuid.UUID(search_term.strip())
        except ValueError:
            return super().get_search_results(request, queryset, search_term)  # type: ignore[misc]
        return queryset.filter(**{self.run_id_field: run_id}), False


def _with_membership(queryset: QuerySet[Any], request: HttpRequest, workspace_field: str) -> QuerySet[Any]:
    """Annotate ``is_member``: whether the operator belongs to the row's workspace. The run
    pages are workspace-scoped (404 to everyone else, superusers included), so the list
    links them only for members."""
    member = Membership.objects.filter(workspace=OuterRef(workspace_field), user_id=request.user.pk)
    return queryset.annotate(is_member=Exists(member))


def _page_link(obj: Any, url: str, admin_url: str) -> str:
    if getattr(obj, "is_member", False):
        return format_html('<a href="{}">open</a>', url)
    # The pages would answer 404: offer the admin's own view of the row instead.
    # The note inside the link: a link beside text in the cell must be told apart by more
    # than its colour (axe link-in-text-block; the admin's links are not underlined).
    return format_html('<a href="{}">admin view <small>(not a member)</small></a>', admin_url)


class LaneInline(ReadOnly, admin.TabularInline):
    model = RunLane
    extra = 0
    fields = ["deployment_name", "status", "passed", "failed", "infra_error", "config_error", "pending"]
    readonly_fields = fields
    can_delete = False
    show_change_link = True
    ordering = ["position"]  # the model's ("run", "position") joins the run to sort by it

    def get_queryset(self, request: HttpRequest) -> QuerySet[RunLane]:
        return super().get_queryset(request).defer(*LANE_HEAVY)


@admin.register(Run)
class RunAdmin(SearchByRunId, BigTableAdmin, ReadOnly, admin.ModelAdmin):
    list_display = [
        "__str__",
        "workspace",
        "pack",
        "status",
        "progress",
        "repetitions",
        "created_at",
        "finished_at",
        "page",
    ]
    list_filter = ["status", ("workspace__slug", SlugFilter), "created_at"]
    search_fields = ["name", "pack_version__pack__slug", "workspace__slug"]  # and the run id
    run_id_field = "id"
    list_select_related = ["workspace", "pack_version__pack"]
    # No date_hierarchy: its MIN/MAX and DISTINCT date_trunc read every run on each page
    # load; the created_at filter offers fixed ranges (today, past 7 days, ...).
    inlines = [LaneInline]
    actions = ["cancel_runs", "retry_failed_items", "rescore_runs", "requeue_stuck_items"]
    # Not case_findings: the probe findings of every case (megabytes at 10,000 cases).
    readonly_fields = [f.name for f in Run._meta.concrete_fields if f.name != "case_findings"]
    exclude = ["case_findings"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Run]:
        # Runs are created by run_create (page, API, CLI) and change through the actions.
        qs = super().get_queryset(request).select_related("workspace", "pack_version__pack")
        return _with_membership(qs.defer(*RUN_JOINED_HEAVY), request, "workspace")

    @admin.display(description="pack", ordering="pack_version__pack__slug")
    def pack(self, obj: Run) -> str:
        return f"{obj.pack_version.pack.slug} v{obj.pack_version.number}"

    @admin.display(description="done")
    def progress(self, obj: Run) -> str:
        return f"{obj.items_total - max(0, obj.items_open)}/{obj.items_total}"

    @admin.display(description="page")
    def page(self, obj: Run) -> str:
        return _page_link(
            obj,
            reverse("run-detail", kwargs={"run_id": obj.id}),
            reverse("admin:runs_run_change", args=[obj.pk]),
        )

    def has_operate_permission(self, request: HttpRequest) -> bool:
        """The run actions change runs of any workspace: only for operators who may change
        runs (the rows stay read-only in the admin either way). Without a declared
        permission an action is offered to anyone who may view the list."""
        return request.user.has_perm("runs.change_run")

    @admin.action(description="Cancel the selected runs", permissions=["operate"])
    def cancel_runs(self, request: HttpRequest, queryset: QuerySet[Run]) -> None:
        from runs.services.operations import run_cancel
        from runs.services.runs import RunError

        done, skipped, refused = 0, [], []
        unsent: list[BrokerError] = []
        for run in queryset:
            if run.is_finished:
                skipped.append(str(run))
                continue
            try:
                run_cancel(run=run, reason=f"cancelled by {request.user} in the admin")
            except RunError as exc:  # finished meanwhile, or being re-scored
                refused.append(f"{run}: {exc}")
                continue
            except BrokerError as exc:  # cancelled (committed); its check task was not sent
                unsent.append(exc)
            done += 1
        self.message_user(request, f"Cancelled {done} run(s).", messages.SUCCESS)
        _say_unsent(self, request, unsent)
        if refused:
            self.message_user(request, f"Not cancelled: {'; '.join(refused)}", messages.WARNING)
        if skipped:
            self.message_user(
                request, f"Already finished, left alone: {', '.join(skipped)}", messages.WARNING
            )

    @admin.action(
        description="Retry failed items (infra and config errors) of the selected runs",
        permissions=["operate"],
    )
    def retry_failed_items(self, request: HttpRequest, queryset: QuerySet[Run]) -> None:
        from runs.services.operations import run_retry_failed
        from runs.services.runs import RunError

        total = 0
        unsent: list[BrokerError] = []
        for run in queryset:
            try:
                total += run_retry_failed(run=run)
            except RunError as exc:
                self.message_user(request, f"{run}: {exc.message}", messages.ERROR)
            except BrokerError as exc:  # re-queued (committed); its dispatch was not sent
                total += getattr(exc, "retried", 0)
                unsent.append(exc)
        self.message_user(request, f"Re-queued {total} failed item(s).", messages.SUCCESS)
        _say_unsent(self, request, unsent)

    @admin.action(
        description="Re-score the selected runs (re-grade their recorded evidence; no agent is called)",
        permissions=["operate"],
    )
    def rescore_runs(self, request: HttpRequest, queryset: QuerySet[Run]) -> None:
        from runs.services.operations import run_rescore
        from runs.services.runs import RunError

        done, refused = 0, []
        unsent: list[BrokerError] = []
        for run in queryset:
            try:
                run_rescore(run=run)
            except RunError as exc:  # not completed or failed (running, cancelled, scoring)
                refused.append(f"{run}: {exc.message}")
                continue
            except BrokerError as exc:  # the revision is committed; its re-grade was not sent
                unsent.append(exc)
            done += 1
        if done:
            self.message_user(
                request,
                f"Re-scoring {done} run(s): their recorded evidence is graded again by a task; no agent is called.",
                messages.SUCCESS,
            )
        _say_unsent(self, request, unsent)
        if refused:
            self.message_user(request, f"Not re-scored: {'; '.join(refused)}", messages.WARNING)

    @admin.action(
        description="Requeue stuck items of the selected runs (the sweeper, on these runs now)",
        permissions=["operate"],
    )
    def requeue_stuck_items(self, request: HttpRequest, queryset: QuerySet[Run]) -> None:
        from runs.sweeper import sweep

        # A subquery, not a list: "select all" may select every run the filter matches.
        result = sweep(run_ids=queryset.order_by().values("pk"))
        self.message_user(request, f"Sweeper ran on the selected runs: {result}", messages.SUCCESS)


def _say_unsent(model_admin: Any, request: HttpRequest, unsent: list[Any]) -> None:
    """One warning per run whose operation was committed but whose task the broker did not
    take (it raised out of the action: a 500 page, and the other selected runs untouched)."""
    for exc in unsent:
        model_admin.message_user(request, broker_message(exc), messages.WARNING)


@admin.register(RunLane)
class RunLaneAdmin(SearchByRunId, BigTableAdmin, ReadOnly, admin.ModelAdmin):
    list_display = [
        "__str__",
        "deployment_name",
        "status",
        "passed",
        "failed",
        "infra_error",
        "config_error",
        "pending",
        "agent_cost_usd",
        "judge_cost_usd",
    ]
    list_filter = ["status", "deployment_kind"]
    search_fields = ["deployment_name", "run__name"]  # and the run id
    list_select_related = ["run"]
    ordering = ["-id"]
    sortable_by: list[str] = []  # no column of the list has an index to sort by (BIG_LIST_SORTABLE)
    # Not counters: the lane's running tallies, with per-case repetition sums. The recorded
    # settings as the run page shows them: the URL's credential-named query values elided
    # (they showed, ?code= and all, to every operator).
    readonly_fields = [
        "recorded_settings" if f.name == "settings" else f.name
        for f in RunLane._meta.concrete_fields
        if f.name != "counters"
    ]
    exclude = ["counters", "settings"]

    @admin.display(description="settings")
    def recorded_settings(self, obj: RunLane) -> str:
        from runs.lane_settings import shown_url

        doc = dict(obj.settings or {})
        if isinstance(doc.get("url"), str):
            doc["url"] = shown_url(doc["url"])
        return json.dumps(doc, ensure_ascii=False, sort_keys=True)

    def get_queryset(self, request: HttpRequest) -> QuerySet[RunLane]:
        qs = super().get_queryset(request).select_related("run")
        return qs.defer(*LANE_HEAVY, *related("run", ("stats", "case_findings")))


class AttemptInline(ReadOnly, admin.TabularInline):
    model = Attempt
    extra = 0
    fields = ["number", "category", "status_code", "error_code", "error", "latency_ms", "started_at"]
    readonly_fields = fields
    can_delete = False
    ordering = ["number"]  # the model's ("item", "number") sorts through the item and its run


class GradeRevisionInline(ReadOnly, admin.TabularInline):
    """Every grade the item received (a re-score adds one); the documents stay on the
    run pages (the item's current grade is on this page)."""

    model = GradeRevision
    extra = 0
    fields = ["revision", "status", "outcome_class", "score", "created_at"]
    readonly_fields = fields
    can_delete = False
    ordering = ["revision"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[GradeRevision]:
        return super().get_queryset(request).defer("grade")


class OutcomeClassFilter(admin.SimpleListFilter):
    """The outcome classes of grading.md, listed from the engine (a filter on the column's
    values ran SELECT DISTINCT over every item on each page load)."""

    title = "outcome class"
    parameter_name = "outcome_class"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        from grading.engine.aggregate import OUTCOME_CLASSES

        return [(name, name) for name in OUTCOME_CLASSES]

    def queryset(self, request: HttpRequest, queryset: QuerySet[RunItem]) -> QuerySet[RunItem]:
        return queryset.filter(outcome_class=self.value()) if self.value() else queryset


class StuckFilter(admin.SimpleListFilter):
    title = "claim"
    parameter_name = "claim"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("stuck", "claim expired (stuck)"), ("live", "claimed, within deadline")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[RunItem]) -> QuerySet[RunItem]:
        from django.utils import timezone

        if self.value() == "stuck":
            return queryset.filter(state="claimed", claim_deadline__lt=timezone.now())
        if self.value() == "live":
            return queryset.filter(state="claimed", claim_deadline__gte=timezone.now())
        return queryset


@admin.register(RunItem)
class RunItemAdmin(SearchByRunId, BigTableAdmin, ReadOnly, admin.ModelAdmin):
    list_display = [
        "id",
        "case_key",
        "challenge_key",
        "lane",
        "repetition",
        "state",
        "status",
        "last_category",
        "score",
        "attempt_count",
        "claim_deadline",
        "page",
    ]
    list_filter = [StuckFilter, "state", "status", "last_category", OutcomeClassFilter]
    search_fields = ["case_key", "challenge_key"]  # and the run id
    list_select_related = ["lane", "run"]
    ordering = ["-id"]
    sortable_by = BIG_LIST_SORTABLE
    inlines = [AttemptInline, GradeRevisionInline]

    def get_queryset(self, request: HttpRequest) -> QuerySet[RunItem]:
        # The change page shows evidence and grade (read then, one row); the run and lane
        # it names come joined, without their big columns.
        qs = super().get_queryset(request).select_related("lane", "run")
        qs = qs.defer(
            "evidence",
            "grade",
            *related("lane", LANE_HEAVY),
            *related("run", ("stats", "case_findings")),
        )
        return _with_membership(qs, request, "run__workspace")

    @admin.display(description="page")
    def page(self, obj: RunItem) -> str:
        return _page_link(
            obj,
            reverse("run-case", kwargs={"run_id": obj.run_id, "item_id": obj.id}),
            reverse("admin:runs_runitem_change", args=[obj.pk]),
        )


class StatusCodeFilter(admin.SimpleListFilter):
    """HTTP status classes (a filter on the column's values ran SELECT DISTINCT over every
    attempt on each page load)."""

    title = "status code"
    parameter_name = "status_class"
    CLASSES = {"2xx": (200, 299), "4xx": (400, 499), "429": (429, 429), "5xx": (500, 599)}

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("none", "no response"), *((key, key) for key in self.CLASSES)]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Attempt]) -> QuerySet[Attempt]:
        if self.value() == "none":
            return queryset.filter(status_code__isnull=True)
        if self.value() in self.CLASSES:
            return queryset.filter(status_code__range=self.CLASSES[self.value()])
        return queryset


@admin.register(Attempt)
class AttemptAdmin(SearchByRunId, BigTableAdmin, ReadOnly, admin.ModelAdmin):
    list_display = [
        "id",
        "item",
        "number",
        "category",
        "status_code",
        "error_code",
        "latency_ms",
        "started_at",
    ]
    list_filter = ["category", StatusCodeFilter]
    search_fields = ["error_code", "error"]  # and the run id: its items' attempts, by the indexes
    run_id_field = "item__run_id"
    # Named: the automatic select_related follows every non-null key, through the item to
    # its run, lane, deployment and challenge with all their columns.
    list_select_related = ["item"]
    ordering = ["-id"]
    sortable_by = BIG_LIST_SORTABLE

    def get_queryset(self, request: HttpRequest) -> QuerySet[Attempt]:
        qs = super().get_queryset(request).select_related("item")
        return qs.defer("item__evidence", "item__grade")
