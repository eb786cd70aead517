"""Admin console for runs: runs, lanes, items and attempts with useful columns and filters,
operations as admin actions (cancel runs, requeue stuck items, retry failed items: R2's
services and sweeper), and the operations page linked from the admin index.

Imported from ``runs/admin.py``. Runs, lanes, items and attempts are view-only here (no add,
change or delete): their state moves only through the services, which the actions call, so
the counters stay true.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import Exists, OuterRef, QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html

from agentclash_site.workspaces.models import Membership
from runs.models import Attempt, Run, RunItem, RunLane

admin.site.index_template = "admin/runs_index.html"


class ReadOnly:
    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


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
    return format_html('<a href="{}">admin view</a> <small>(not a member)</small>', admin_url)


class LaneInline(ReadOnly, admin.TabularInline):
    model = RunLane
    extra = 0
    fields = ["deployment_name", "status", "passed", "failed", "infra_error", "config_error", "pending"]
    readonly_fields = fields
    can_delete = False
    show_change_link = True


@admin.register(Run)
class RunAdmin(ReadOnly, admin.ModelAdmin):
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
    list_filter = ["status", "workspace", "created_at"]
    search_fields = ["id", "name", "pack_version__pack__slug", "workspace__slug"]
    list_select_related = ["workspace", "pack_version__pack"]
    date_hierarchy = "created_at"
    inlines = [LaneInline]
    actions = ["cancel_runs", "retry_failed_items", "requeue_stuck_items"]
    readonly_fields = [f.name for f in Run._meta.concrete_fields]
    exclude: list[str] = []

    def get_queryset(self, request: HttpRequest) -> QuerySet[Run]:
        # Runs are created by run_create (page, API, CLI) and change through the actions.
        qs = (
            super()
            .get_queryset(request)
            .defer("stats", "case_findings", "pack_version__manifest", "pack_version__source")
        )
        return _with_membership(qs, request, "workspace")

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
        for run in queryset:
            if run.is_finished:
                skipped.append(str(run))
                continue
            try:
                run_cancel(run=run, reason=f"cancelled by {request.user} in the admin")
            except RunError as exc:  # finished meanwhile, or being re-scored
                refused.append(f"{run}: {exc}")
                continue
            done += 1
        self.message_user(request, f"Cancelled {done} run(s).", messages.SUCCESS)
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
        for run in queryset:
            try:
                total += run_retry_failed(run=run)
            except RunError as exc:
                self.message_user(request, f"{run}: {exc.message}", messages.ERROR)
        self.message_user(request, f"Re-queued {total} failed item(s).", messages.SUCCESS)

    @admin.action(
        description="Requeue stuck items (return expired claims now: runs the sweeper)",
        permissions=["operate"],
    )
    def requeue_stuck_items(self, request: HttpRequest, queryset: QuerySet[Run]) -> None:
        from runs.sweeper import sweep

        result = sweep()
        self.message_user(request, f"Sweeper ran: {result}", messages.SUCCESS)


@admin.register(RunLane)
class RunLaneAdmin(ReadOnly, admin.ModelAdmin):
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
    search_fields = ["deployment_name", "run__id", "run__name"]
    list_select_related = ["run"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[RunLane]:
        return super().get_queryset(request).defer("counters", "stats")


class AttemptInline(ReadOnly, admin.TabularInline):
    model = Attempt
    extra = 0
    fields = ["number", "category", "status_code", "error_code", "error", "latency_ms", "started_at"]
    readonly_fields = fields
    can_delete = False


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
class RunItemAdmin(ReadOnly, admin.ModelAdmin):
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
    list_filter = [StuckFilter, "state", "status", "last_category", "outcome_class"]
    search_fields = ["case_key", "challenge_key", "run__id"]
    list_select_related = ["lane"]
    show_full_result_count = False  # no COUNT(*) over a 100k-item table on every page
    inlines = [AttemptInline]

    def get_queryset(self, request: HttpRequest) -> QuerySet[RunItem]:
        qs = super().get_queryset(request).defer("evidence", "grade")
        return _with_membership(qs, request, "run__workspace")

    @admin.display(description="page")
    def page(self, obj: RunItem) -> str:
        return _page_link(
            obj,
            reverse("run-case", kwargs={"run_id": obj.run_id, "item_id": obj.id}),
            reverse("admin:runs_runitem_change", args=[obj.pk]),
        )


@admin.register(Attempt)
class AttemptAdmin(ReadOnly, admin.ModelAdmin):
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
    list_filter = ["category", "status_code"]
    search_fields = ["error_code", "error"]
    show_full_result_count = False
