from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import UserAdmin
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.forms.models import BaseInlineFormSet
from django.utils.html import format_html

from agentclash_site.lib.admin import (
    DeleteRefused,
    RefusedDeleteAdmin,
    RefusedSaveAdmin,
    SaveRefused,
    SlugFilter,
    refused_delete,
)
from agentclash_site.workspaces.models import ApiToken, Membership, Role, WorkerHeartbeat, Workspace
from agentclash_site.workspaces.services import (
    LAST_OWNER_FIX,
    MembershipError,
    is_last_owner,
    last_owner_memberships,
    last_owner_message,
    lock_workspaces_of,
    memberships_delete,
    users_delete,
)

# The last-owner rule (services: a workspace keeps at least one owner) in the admin. Forms
# and the "cannot delete" page say why with the fix; the saves and deletions themselves go
# through the locked service checks, so a race between two operators fails (rolled back)
# rather than leave a workspace ownerless.


def _with_last_owner_reasons(deleted, request_objs):  # type: ignore[no-untyped-def]
    deleted_objects, model_count, perms_needed, protected = deleted
    reasons = [last_owner_message(m) for m in last_owner_memberships(request_objs)]
    return deleted_objects, model_count, perms_needed, [*protected, *reasons]


class StoredUserWidget(forms.Widget):
    """The user of a stored membership, as text (the inline joins the user: no query per
    row, where the autocomplete widget looked its selected user up for each row)."""

    def __init__(self, user: Any) -> None:
        super().__init__()
        self.user = user

    def render(self, name, value, attrs=None, renderer=None):  # type: ignore[no-untyped-def]
        return format_html("<p>{}</p>", self.user.get_username())


class MembershipInlineForm(forms.ModelForm):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # As on the membership's own page: changing the user of a stored row moved the
        # membership, an owner's too, to someone else unseen. The field keeps the stored
        # value whatever is posted (disabled).
        if self.instance.pk is not None and "user" in self.fields:
            field = self.fields["user"]
            field.disabled = True
            field.widget = StoredUserWidget(self.instance.user)


class MembershipInlineFormSet(BaseInlineFormSet):
    def clean(self) -> None:
        super().clean()
        if any(self.errors) or self.instance.pk is None:
            return
        kept = [form for form in self.forms if form.cleaned_data and not self._should_delete_form(form)]
        if any(form.has_changed() and form.cleaned_data.get("role") == Role.OWNER for form in kept):
            return  # an owner row is written (added, promoted or edited): an owner stays
        # Held to the end of the admin's transaction (its POST is atomic), the workspace's
        # membership lock makes the owners counted here those the save leaves: a row kept
        # unchanged is not written, so it stays an owner only if it still is one as stored
        # (another operator may have removed it since the page loaded it).
        memberships = Membership.objects.filter(workspace=self.instance)
        lock_workspaces_of(memberships)
        going = [
            form.instance.pk
            for form in self.initial_forms
            if form not in kept or form.cleaned_data.get("role") != Role.OWNER
        ]
        stranded = last_owner_memberships(memberships.filter(pk__in=going))
        if stranded:
            raise ValidationError([f"{last_owner_message(m)}." for m in stranded])


class MembershipInline(admin.TabularInline):
    model = Membership
    form = MembershipInlineForm
    formset = MembershipInlineFormSet
    extra = 0
    autocomplete_fields = ["user"]

    def get_queryset(self, request):  # type: ignore[no-untyped-def]
        # Each row's title names its user and workspace (Membership.__str__).
        return super().get_queryset(request).select_related("user", "workspace")


@admin.register(Workspace)
class WorkspaceAdmin(RefusedDeleteAdmin, admin.ModelAdmin):
    list_display = ["slug", "name", "allow_private_endpoints", "created_at"]
    list_filter = ["allow_private_endpoints"]
    search_fields = ["slug", "name"]
    inlines = [MembershipInline]
    readonly_fields = ["public_id", "created_at"]
    actions = ["delete_selected"]  # RefusedDeleteAdmin's: a refusal is a message

    def get_deleted_objects(self, objs, request):  # type: ignore[no-untyped-def]
        # A workspace with runs or published packs holds history nothing else keeps (runs
        # and published versions are never deleted). Collected, the refusal read every item
        # of every run, evidence and grades included, to say the operator lacked permission.
        kept = [_history_of(workspace) for workspace in objs]
        if any(kept):
            return refused_delete([reason for reason in kept if reason])
        return super().get_deleted_objects(objs, request)

    # A version published between that check and the delete went with the workspace (CASCADE)
    # unseen; a run created meanwhile made it a 500 (runs PROTECT their version). The delete
    # checks again, locked (``_workspaces_delete``), and refuses as a message; both deletes run in a transaction: nothing of a refused one
    # stays, its "deleted" log entries included.

    def delete_model(self, request, obj):  # type: ignore[no-untyped-def]
        _workspaces_delete([obj.pk])

    def delete_queryset(self, request, queryset):  # type: ignore[no-untyped-def]
        _workspaces_delete(list(queryset.values_list("pk", flat=True)))

    def get_readonly_fields(self, request, obj=None):  # type: ignore[no-untyped-def]
        # The slug names the workspace in every API URL, bookmark and CLI call: set on add,
        # never changed (Workspace.save refuses it too).
        fields = super().get_readonly_fields(request, obj)
        return [*fields, "slug"] if obj is not None else fields


@transaction.atomic
def _workspaces_delete(ids: list[int]) -> None:
    """Delete the workspaces ``ids``, or none of them when one holds runs or published
    versions, counted under locks that keep new ones from committing meanwhile.

    Their packs first (FOR UPDATE): a publish onto an existing pack locks its row, so one in
    progress commits before this counts, and a later one waits and then finds the pack gone.
    Then the workspaces' rows: a run, a new pack (its workspace's key) or a version (its
    pack's) is an insert whose foreign key PostgreSQL checks at commit (deferred) with a key
    share lock on the row it names, so one not committed before this count fails at its
    commit (the row it names is gone) rather than be deleted with the workspace unseen. A run
    needs a published version of its workspace, so the count sees one before any run. In
    that order (packs, then workspaces) so a publish committing meanwhile is not waited for
    while it waits for the workspace."""
    from packs.models import Pack

    list(Pack.objects.select_for_update().filter(workspace__in=ids).order_by("pk").values_list("pk"))
    locked = list(Workspace.objects.select_for_update().filter(pk__in=ids).order_by("pk"))
    reasons = [reason for reason in map(_history_of, locked) if reason]
    if reasons:
        raise DeleteRefused("; ".join(reasons))
    Workspace.objects.filter(pk__in=ids).delete()


def _history_of(workspace: Workspace) -> str:
    from packs.models import PackVersion
    from runs.models import Run

    held = [
        what
        for what, rows in (
            ("runs", Run.objects.filter(workspace=workspace)),
            ("published pack versions", PackVersion.objects.filter(pack__workspace=workspace)),
        )
        if rows.exists()
    ]
    if not held:
        return ""
    return f"Workspace {workspace.slug}: has {' and '.join(held)}, which are kept for good"


class MembershipAdminForm(forms.ModelForm):
    class Meta:
        model = Membership
        fields = ["workspace", "user", "role", "created_at"]

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        workspace, user = data.get("workspace"), data.get("user")
        # On the add page: said as the save says it when another operator adds the same
        # member meanwhile (rather than Django's "Membership with this Workspace and User
        # already exists."); the error on the user field skips that check.
        adding = self.instance.pk is None and workspace is not None and user is not None
        if adding and Membership.objects.filter(workspace=workspace, user=user).exists():
            self.add_error("user", _already_a_member(user, workspace))
        return data

    def clean_role(self) -> str:
        role = self.cleaned_data["role"]
        if self.instance.pk is None or role == Role.OWNER:
            return role
        # As the member rows' check: the workspace's membership lock, held to the end of the
        # admin's transaction (its POST is atomic), keeps the owners counted here until the
        # save. Without it another operator could demote or remove the other owner between
        # this check and save_model's, which then refused with a 500.
        stored = Membership.objects.filter(pk=self.instance.pk)
        lock_workspaces_of(stored)
        if is_last_owner(stored.get()):
            raise ValidationError(
                f"{self.instance.user.get_username()} is the last owner of {self.instance.workspace.slug}: "
                f"a workspace keeps at least one owner; {LAST_OWNER_FIX}."
            )
        return role


@admin.register(Membership)
class MembershipAdmin(RefusedSaveAdmin, admin.ModelAdmin):
    list_display = ["workspace", "user", "role", "created_at"]
    list_filter = ["role", ("workspace__slug", SlugFilter)]
    search_fields = ["workspace__slug", "user__username", "user__email"]
    autocomplete_fields = ["workspace", "user"]
    form = MembershipAdminForm

    def get_readonly_fields(self, request, obj=None):  # type: ignore[no-untyped-def]
        # Moving a membership to another workspace or user would take an owner away unseen.
        return ["workspace", "user"] if obj is not None else []

    def save_model(self, request, obj, form, change):  # type: ignore[no-untyped-def]
        # Should the save's own check still refuse (the form's is made under the same lock),
        # or another operator have added the same member since the add form's check (the
        # unique constraint: it was a 500), the page is shown again with what was typed and
        # the reason (RefusedSaveAdmin); the view is atomic: nothing of it is kept.
        try:
            with transaction.atomic():
                if change:
                    lock_workspaces_of(Membership.objects.filter(pk=obj.pk))
                    if obj.role != Role.OWNER and is_last_owner(Membership.objects.get(pk=obj.pk)):
                        raise MembershipError("last_owner", last_owner_message(obj))
                super().save_model(request, obj, form, change)
        except MembershipError as exc:
            raise SaveRefused(f"{exc.message}.", "role") from None
        except IntegrityError as exc:
            if "workspaces_membership_unique" not in str(exc):
                raise
            raise SaveRefused(_already_a_member(obj.user, obj.workspace), "user") from None

    def get_deleted_objects(self, objs, request):  # type: ignore[no-untyped-def]
        pks = [obj.pk for obj in objs]
        return _with_last_owner_reasons(
            super().get_deleted_objects(objs, request), Membership.objects.filter(pk__in=pks)
        )

    def delete_model(self, request, obj):  # type: ignore[no-untyped-def]
        memberships_delete(memberships=Membership.objects.filter(pk=obj.pk))

    def delete_queryset(self, request, queryset):  # type: ignore[no-untyped-def]
        memberships_delete(memberships=queryset)


def _already_a_member(user: Any, workspace: Workspace) -> str:
    return f"{user.get_username()} is already a member of {workspace.slug}."


User = get_user_model()


class OwnerKeepingUserAdmin(UserAdmin):
    """Django's user admin, refusing to delete a workspace's last owner (the membership
    would go with the user)."""

    def get_deleted_objects(self, objs, request):  # type: ignore[no-untyped-def]
        memberships = Membership.objects.filter(user__in=[obj.pk for obj in objs])
        return _with_last_owner_reasons(super().get_deleted_objects(objs, request), memberships)

    def delete_model(self, request, obj):  # type: ignore[no-untyped-def]
        users_delete(users=User.objects.filter(pk=obj.pk))

    def delete_queryset(self, request, queryset):  # type: ignore[no-untyped-def]
        users_delete(users=queryset)


admin.site.unregister(User)
admin.site.register(User, OwnerKeepingUserAdmin)


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ["hint", "name", "user", "workspace", "created_at", "last_used_at", "revoked_at"]
    list_filter = [("workspace__slug", SlugFilter), ("revoked_at", admin.EmptyFieldListFilter)]
    search_fields = ["name", "hint", "user__username"]
    # Named: the automatic select_related skips the nullable workspace (a query per row).
    list_select_related = ["user", "workspace"]
    # A token belongs to its user and workspace for good: moving it would hand one person's
    # credential to another. Operators rename or revoke (the action); a revocation is final,
    # so revoked_at is shown, not edited: clearing it brought a revoked (leaked) token back.
    # Not the digest: a secret's hash is still the means to test guesses against it.
    readonly_fields = [
        "user", "workspace", "public_id", "hint", "created_at", "last_used_at", "revoked_at",
    ]  # fmt: skip
    fields = ["user", "workspace", "name", "hint", "created_at", "last_used_at", "revoked_at"]
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
    """Written by the workers' tasks (proof one runs): shown, and a stale one deleted. A row
    added or saved here was stamped "seen now" (seen_at is auto_now): a worker that does
    not run, said to."""

    list_display = ["marker", "seen_at"]
    search_fields = ["marker"]

    def has_add_permission(self, request):  # type: ignore[no-untyped-def]
        return False

    def has_change_permission(self, request, obj=None):  # type: ignore[no-untyped-def]
        return False


admin.site.site_header = "AgentClash operations"
admin.site.site_title = "AgentClash admin"
admin.site.index_title = "Operations console"
