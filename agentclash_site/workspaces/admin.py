from django.contrib import admin

from agentclash_site.workspaces.models import ApiToken, Membership, WorkerHeartbeat, Workspace


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0
    autocomplete_fields = ["user"]


@admin.register(Workspace)
class WorkspaceAdmin(admin.ModelAdmin):
    list_display = ["slug", "name", "allow_private_endpoints", "created_at"]
    list_filter = ["allow_private_endpoints"]
    search_fields = ["slug", "name"]
    inlines = [MembershipInline]
    readonly_fields = ["public_id", "created_at"]


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ["workspace", "user", "role", "created_at"]
    list_filter = ["role", "workspace"]
    search_fields = ["workspace__slug", "user__username", "user__email"]
    autocomplete_fields = ["workspace", "user"]


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ["hint", "name", "user", "workspace", "created_at", "last_used_at", "revoked_at"]
    list_filter = ["workspace", ("revoked_at", admin.EmptyFieldListFilter)]
    search_fields = ["name", "hint", "user__username"]
    # Named: the automatic select_related skips the nullable workspace (a query per row).
    list_select_related = ["user", "workspace"]
    # A token belongs to its user and workspace for good: moving it would hand one person's
    # credential to another. Operators rename or revoke (the action); a revocation is final,
    # so revoked_at is shown, not edited: clearing it brought a revoked (leaked) token back.
    readonly_fields = [
        "user", "workspace", "public_id", "hint", "digest", "created_at", "last_used_at", "revoked_at",
    ]  # fmt: skip
    fields = ["user", "workspace", "name", "hint", "digest", "created_at", "last_used_at", "revoked_at"]
    actions = ["revoke"]

    def has_add_permission(self, request):  # type: ignore[no-untyped-def]
        # Secrets are shown once: create tokens with `manage.py token create` or the account page.
        return False

    @admin.action(description="Revoke selected tokens", permissions=["change"])
    def revoke(self, request, queryset):  # type: ignore[no-untyped-def]
        from django.utils import timezone

        count = queryset.filter(revoked_at__isnull=True).update(revoked_at=timezone.now())
        self.message_user(request, f"Revoked {count} token(s).")


@admin.register(WorkerHeartbeat)
class WorkerHeartbeatAdmin(admin.ModelAdmin):
    list_display = ["marker", "seen_at"]
    search_fields = ["marker"]


admin.site.site_header = "AgentClash operations"
admin.site.site_title = "AgentClash admin"
admin.site.index_title = "Operations console"
