"""Admin console for packs: published versions and their rows are read-only."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import Count
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html

from packs.models import Artifact, Asset, Case, Challenge, Draft, InputSet, Pack, PackVersion


class ReadOnlyAdminMixin:
    """Published rows are written by ``pack_version_publish`` only and never changed."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class PackVersionInline(ReadOnlyAdminMixin, admin.TabularInline):
    model = PackVersion
    fields = ("number", "public_id", "execution_mode", "published_at", "published_by", "content_hash")
    readonly_fields = fields
    extra = 0
    show_change_link = True
    can_delete = False


@admin.register(Pack)
class PackAdmin(admin.ModelAdmin):
    list_display = ("slug", "name", "family", "workspace", "version_count", "updated_at")
    list_filter = ("family", "workspace")
    search_fields = ("slug", "name", "description", "public_id")
    readonly_fields = ("public_id", "created_at", "updated_at")
    list_select_related = ("workspace",)
    inlines = [PackVersionInline]

    def get_queryset(self, request: HttpRequest):  # type: ignore[no-untyped-def]
        from django.db.models import Count

        return super().get_queryset(request).annotate(_version_count=Count("versions"))

    @admin.display(description="versions", ordering="_version_count")
    def version_count(self, obj: Pack) -> int:
        return obj._version_count  # type: ignore[attr-defined]


class ChallengeInline(ReadOnlyAdminMixin, admin.TabularInline):
    model = Challenge
    fields = ("position", "key", "title", "category", "difficulty")
    readonly_fields = fields
    extra = 0
    can_delete = False


class InputSetInline(ReadOnlyAdminMixin, admin.TabularInline):
    model = InputSet
    fields = ("position", "key", "name", "challenge_key", "public_id")
    readonly_fields = fields
    extra = 0
    can_delete = False


@admin.register(PackVersion)
class PackVersionAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = (
        "__str__",
        "number",
        "workspace",
        "execution_mode",
        "runs",
        "published_at",
        "published_by",
    )
    list_filter = ("execution_mode", "pack__workspace", "published_at")
    search_fields = ("pack__slug", "pack__name", "public_id", "content_hash")
    list_select_related = ("pack", "pack__workspace", "published_by")
    exclude = ("source",)
    readonly_fields = (
        "pack",
        "public_id",
        "number",
        "execution_mode",
        "source_media_type",
        "content_hash",
        "published_by",
        "published_at",
        "warnings",
        "critique_findings",
        "manifest",
    )
    inlines = [ChallengeInline, InputSetInline]

    def get_queryset(self, request: Any) -> Any:
        qs = super().get_queryset(request).annotate(run_count=Count("runs"))
        match = getattr(request, "resolver_match", None)
        if match is not None and match.url_name and match.url_name.endswith("changelist"):
            # The list never shows the manifest (every case) or the source bytes.
            qs = qs.defer("manifest", "source")
        return qs

    @admin.display(description="workspace", ordering="pack__workspace__slug")
    def workspace(self, obj: PackVersion) -> str:
        return obj.pack.workspace.slug

    @admin.display(description="runs", ordering="run_count")
    def runs(self, obj: PackVersion) -> str:
        url = reverse("admin:runs_run_changelist") + f"?pack_version__id__exact={obj.pk}"
        return format_html('<a href="{}">{}</a>', url, obj.run_count)  # type: ignore[attr-defined]


@admin.register(Case)
class CaseAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ("case_key", "challenge", "input_set", "version")
    search_fields = ("case_key", "item_key", "public_id", "input_set__version__pack__slug")
    list_filter = ("input_set__version__pack__workspace",)
    list_select_related = ("challenge", "input_set", "input_set__version", "input_set__version__pack")
    readonly_fields = (
        "input_set",
        "challenge",
        "public_id",
        "case_key",
        "item_key",
        "position",
        "document",
        "content_hash",
    )

    @admin.display(description="version")
    def version(self, obj: Case) -> str:
        return str(obj.input_set.version)


@admin.register(Asset)
class AssetAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ("key", "scope", "path", "media_type", "size", "version")
    list_filter = ("scope", "version__pack__workspace")
    search_fields = ("key", "path", "sha256", "version__pack__slug")
    list_select_related = ("version", "version__pack")
    readonly_fields = (
        "version",
        "public_id",
        "scope",
        "challenge",
        "case",
        "key",
        "path",
        "kind",
        "media_type",
        "sha256",
        "size",
        "artifact",
        "file",
    )


@admin.register(Artifact)
class ArtifactAdmin(admin.ModelAdmin):
    list_display = ("short_sha", "filename", "media_type", "size", "workspace", "created_at")
    list_filter = ("media_type", "workspace")
    search_fields = ("sha256", "filename", "public_id")
    list_select_related = ("workspace",)
    readonly_fields = (
        "workspace",
        "public_id",
        "sha256",
        "size",
        "media_type",
        "filename",
        "file",
        "created_by",
        "created_at",
    )

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # uploads go through the artifact service (content addressing)

    @admin.display(description="sha256", ordering="sha256")
    def short_sha(self, obj: Artifact) -> str:
        return format_html("<code>{}</code>", obj.sha256[:12])


@admin.register(Draft)
class DraftAdmin(admin.ModelAdmin):
    list_display = ("name", "workspace", "based_on", "created_by", "updated_at")
    list_filter = ("workspace", "updated_at")
    search_fields = ("name", "public_id", "bundle_text")
    list_select_related = ("workspace", "based_on", "based_on__pack", "created_by")
    readonly_fields = ("public_id", "created_at", "updated_at")
    raw_id_fields = ("based_on", "created_by")
