"""Admin console for packs: published versions and their rows are view-only (pack-format §12:
published versions, their cases and assets are immutable). A pack's identity is read-only;
an artifact is deleted only when nothing references it."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db import transaction
from django.db.models import Count, IntegerField, OuterRef, QuerySet, Subquery
from django.db.models.functions import Coalesce
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html

from agentclash_site.lib.admin import (
    BigTableAdmin,
    DeleteRefused,
    ListDeferAdmin,
    RefusedDeleteAdmin,
    SearchByPublicId,
    SlugFilter,
    related,
)
from packs.models import Artifact, Asset, Case, Challenge, Draft, InputSet, Pack, PackVersion

# A version's columns no list shows: the bundle's bytes, its manifest (every case), the
# publish warnings and the critique findings. Deferred wherever a version is joined to a row.
VERSION_HEAVY = ("manifest", "source", "warnings", "critique_findings")
# The pack versions a pack's page lists; the rest are one link away.
PACK_PAGE_VERSIONS = 10


def count_of(queryset: QuerySet[Any], outer: str) -> Coalesce:
    """A correlated COUNT of ``queryset``'s rows whose ``outer`` is the row's id: computed for
    the rows on the page only. (``Count()`` over a join grouped the whole table by id, for
    the paginator's count too.)"""
    counted = queryset.filter(**{outer: OuterRef("pk")}).order_by().values(outer)
    subquery = Subquery(counted.annotate(n=Count("pk")).values("n"), output_field=IntegerField())
    return Coalesce(subquery, 0)


def stored_file_name(obj: Artifact | Asset) -> str:
    """The file's name in storage, as text: Django's read-only file field links ``file.url``,
    a ``/media/`` address this site does not serve (stored files go out only through the
    members' download views and signed links), so the link was a 404."""
    return obj.file.name if obj.file else "-"


class ReadOnlyAdminMixin:
    """Published rows are written by ``pack_version_publish`` only and never changed or
    deleted: view them, search them, filter them."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class PackVersionInline(ReadOnlyAdminMixin, admin.TabularInline):
    model = PackVersion
    fields = ("number", "public_id", "execution_mode", "published_at", "published_by", "content_hash")
    readonly_fields = fields
    extra = 0
    show_change_link = True
    can_delete = False
    ordering = ["-number"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[PackVersion]:
        # Each row names its publisher and its title its pack (PackVersion.__str__): joined,
        # not a query or two per version.
        qs = super().get_queryset(request).select_related("pack", "published_by")
        return qs.defer(*VERSION_HEAVY)


@admin.register(Pack)
class PackAdmin(SearchByPublicId, RefusedDeleteAdmin, admin.ModelAdmin):
    list_display = ("slug", "name", "family", "workspace", "version_count", "updated_at")
    list_filter = ("family", ("workspace__slug", SlugFilter))
    search_fields = ("slug", "name", "description")  # and the public id (SearchByPublicId)
    # Every stored bundle names the pack's slug, name and family, and publish matches
    # them (409 challenge_pack_metadata_conflict): they are the pack's identity.
    readonly_fields = (
        "workspace", "slug", "name", "family", "public_id", "created_at", "updated_at", "all_versions",
    )  # fmt: skip
    list_select_related = ("workspace",)
    inlines = [PackVersionInline]
    actions = ["delete_selected"]  # RefusedDeleteAdmin's: a refusal is a message

    def get_queryset(self, request: HttpRequest):  # type: ignore[no-untyped-def]
        versions = count_of(PackVersion.objects.all(), "pack")
        return super().get_queryset(request).annotate(_version_count=versions)

    def get_formset_kwargs(self, request: HttpRequest, obj: Any, inline: Any, prefix: str) -> dict[str, Any]:
        # The page lists the newest versions, not every one a pack ever had.
        kwargs = super().get_formset_kwargs(request, obj, inline, prefix)
        if isinstance(inline, PackVersionInline) and obj.pk is not None:
            newest = PackVersion.objects.filter(pack=obj).order_by("-number").values("pk")
            kwargs["queryset"] = kwargs["queryset"].filter(pk__in=newest[:PACK_PAGE_VERSIONS])
        return kwargs

    @admin.display(description="versions")
    def all_versions(self, obj: Pack) -> str:
        url = reverse("admin:packs_packversion_changelist") + f"?pack__id__exact={obj.pk}"
        shown = min(obj._version_count, PACK_PAGE_VERSIONS)  # type: ignore[attr-defined]
        return format_html(
            '{} (the newest {} below): <a href="{}">all versions</a>',
            obj._version_count,
            shown,
            url,  # type: ignore[attr-defined]
        )

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # packs are created by publishing their first version

    def has_delete_permission(self, request: HttpRequest, obj: Pack | None = None) -> bool:
        # Deleting a pack would delete its published versions with it.
        return obj is None or not obj.versions.exists()

    def get_deleted_objects(self, objs: Any, request: HttpRequest) -> tuple[Any, Any, Any, list[Any]]:
        # The bulk "delete selected" asks without an object: refuse the packs with versions there.
        to_delete, counts, perms_needed, protected = super().get_deleted_objects(objs, request)
        published = [pack for pack in objs if pack.versions.exists()]
        protected = [*protected, *(f"Pack {pack.slug}: has published versions" for pack in published)]
        return to_delete, counts, _unless_protected(perms_needed, protected), protected

    # A version published between that check and the delete went with the pack (CASCADE)
    # unseen, and a run created on it meanwhile made the delete a 500 (runs PROTECT their
    # version). The delete counts again with the packs' rows locked (a publish onto an
    # existing pack locks its row) and refuses as a message; nothing of it stays.

    def delete_model(self, request: HttpRequest, obj: Pack) -> None:
        _packs_delete([obj.pk])

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Pack]) -> None:
        _packs_delete(list(queryset.values_list("pk", flat=True)))

    @admin.display(description="versions", ordering="_version_count")
    def version_count(self, obj: Pack) -> int:
        return obj._version_count  # type: ignore[attr-defined]


@transaction.atomic
def _packs_delete(ids: list[int]) -> None:
    """Delete the packs ``ids``, or none of them when one has a published version."""
    locked = list(Pack.objects.select_for_update().filter(pk__in=ids).order_by("pk"))
    published = [pack.slug for pack in locked if pack.versions.exists()]
    if published:
        raise DeleteRefused("; ".join(f"Pack {slug}: has published versions" for slug in published))
    Pack.objects.filter(pk__in=ids).delete()


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


class ExecutionModeFilter(admin.SimpleListFilter):
    """The execution modes of pack-format, as fixed choices: a filter on the column's values
    read every version's mode (SELECT DISTINCT over the whole table) on each page load."""

    title = "execution mode"
    parameter_name = "execution_mode"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        # Imported here: the bundle validator is not loaded at every start-up for the admin.
        from packs.bundle.models import EXECUTION_MODES

        return [(mode, mode) for mode in EXECUTION_MODES]

    def queryset(self, request: HttpRequest, queryset: QuerySet[PackVersion]) -> QuerySet[PackVersion]:
        return queryset.filter(execution_mode=self.value()) if self.value() else queryset


@admin.register(PackVersion)
class PackVersionAdmin(SearchByPublicId, ListDeferAdmin, BigTableAdmin, ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = (
        "__str__",
        "number",
        "workspace",
        "execution_mode",
        "runs",
        "published_at",
        "published_by",
    )
    list_filter = (ExecutionModeFilter, ("pack__workspace__slug", SlugFilter), "published_at")
    search_fields = ("pack__slug", "pack__name", "content_hash")  # and the public id
    list_select_related = ("pack", "pack__workspace", "published_by")
    # Newest published first, by the primary key: the model's ("pack", "-number") sorts
    # through the pack's slug, joining and sorting every version before the first page.
    ordering = ["-id"]
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
    list_defer = VERSION_HEAVY  # the page shows them (not the source bytes)

    def get_queryset(self, request: Any) -> Any:
        from runs.models import Run

        runs = count_of(Run.objects.all(), "pack_version")
        # The source bytes are never shown (excluded): not read for the page either.
        return super().get_queryset(request).annotate(run_count=runs).defer("source")

    @admin.display(description="workspace", ordering="pack__workspace__slug")
    def workspace(self, obj: PackVersion) -> str:
        return obj.pack.workspace.slug

    @admin.display(description="runs", ordering="run_count")
    def runs(self, obj: PackVersion) -> str:
        url = reverse("admin:runs_run_changelist") + f"?pack_version__id__exact={obj.pk}"
        return format_html('<a href="{}">{}</a>', url, obj.run_count)  # type: ignore[attr-defined]


@admin.register(Case)
class CaseAdmin(SearchByPublicId, ListDeferAdmin, BigTableAdmin, ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ("case_key", "challenge", "input_set", "version")
    search_fields = ("case_key", "item_key", "input_set__version__pack__slug")  # and the public id
    list_filter = (("input_set__version__pack__workspace__slug", SlugFilter),)
    list_select_related = ("challenge", "input_set", "input_set__version", "input_set__version__pack")
    # Newest first, by the primary key: the model's order (pack slug, version, set, position)
    # joined and sorted every case before the first page. No column to sort by: a header
    # click (case key, challenge, version) sorted every case for one page.
    ordering = ["-id"]
    sortable_by: tuple[str, ...] = ()
    list_defer = ("document",)  # shown on the case's page
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

    def get_queryset(self, request: HttpRequest) -> QuerySet[Case]:
        # The case's document shows on its own page (one row); the rows it names come
        # joined, without the version's bundle or the challenge's definition.
        qs = super().get_queryset(request).select_related(*self.list_select_related)
        return qs.defer(
            *related("input_set__version", VERSION_HEAVY),
            "challenge__definition",
            "challenge__instructions",
        )

    @admin.display(description="version")
    def version(self, obj: Case) -> str:
        return str(obj.input_set.version)


@admin.register(Asset)
class AssetAdmin(SearchByPublicId, BigTableAdmin, ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ("key", "scope", "path", "media_type", "size", "version")
    list_filter = ("scope", ("version__pack__workspace__slug", SlugFilter))
    search_fields = ("key", "path", "sha256", "version__pack__slug")  # and the public id
    list_select_related = ("version", "version__pack")
    ordering = ["-id"]  # the model's (version, scope, key) sorts every asset through its version
    sortable_by: tuple[str, ...] = ()  # as for cases: a header click sorted every asset

    def get_queryset(self, request: HttpRequest) -> QuerySet[Asset]:
        qs = super().get_queryset(request).select_related(*self.list_select_related)
        return qs.defer(*related("version", VERSION_HEAVY))

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
        "stored_file",
    )
    exclude = ("file",)  # shown as ``stored_file``

    @admin.display(description="file")
    def stored_file(self, obj: Asset) -> str:
        return stored_file_name(obj)


# The media types the artifact list filters by, as fixed choices: Django's field filter read
# every artifact's type (SELECT DISTINCT over the whole table) on each load of the list, and
# listed each type ever uploaded (the upload names it, up to 200 characters).
COMMON_MEDIA_TYPES = (
    "application/json",
    "application/yaml",
    "application/zip",
    "application/pdf",
    "application/octet-stream",
    "text/plain",
    "text/csv",
    "text/markdown",
    "image/png",
    "image/jpeg",
    "audio/wav",
    "audio/x-wav",
    "audio/mpeg",
)
OTHER_MEDIA_TYPE = "other"


class MediaTypeFilter(admin.SimpleListFilter):
    """The common media types and "other" (any type not among them): no query to list them."""

    title = "media type"
    parameter_name = "media_type"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [*((t, t) for t in COMMON_MEDIA_TYPES), (OTHER_MEDIA_TYPE, "other")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Artifact]) -> QuerySet[Artifact]:
        value = self.value()
        if value == OTHER_MEDIA_TYPE:
            return queryset.exclude(media_type__in=COMMON_MEDIA_TYPES)
        if value:
            return queryset.filter(media_type=value)
        return queryset


@admin.register(Artifact)
class ArtifactAdmin(SearchByPublicId, RefusedDeleteAdmin, BigTableAdmin, admin.ModelAdmin):
    list_display = ("short_sha", "filename", "media_type", "size", "workspace", "created_at")
    list_filter = (MediaTypeFilter, ("workspace__slug", SlugFilter))
    search_fields = ("sha256", "filename")  # and the public id
    list_select_related = ("workspace",)
    actions = ["delete_selected"]  # RefusedDeleteAdmin's: a refusal is a message
    # Every upload is a row: newest first by the primary key (the model's -created_at has
    # no index of its own: every artifact was sorted before the first page).
    ordering = ["-id"]
    readonly_fields = (
        "workspace",
        "public_id",
        "sha256",
        "size",
        "media_type",
        "filename",
        "stored_file",
        "created_by",
        "created_at",
    )
    exclude = ("file",)  # shown as ``stored_file``

    @admin.display(description="file")
    def stored_file(self, obj: Artifact) -> str:
        return stored_file_name(obj)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # uploads go through the artifact service (content addressing)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # the bytes are the identity

    def get_deleted_objects(self, objs: Any, request: HttpRequest) -> tuple[Any, Any, Any, list[Any]]:
        # Imported here: packs.services imports the validator (the admin loads at every start-up).
        from packs.services.artifacts import artifact_drafts_naming

        # Assets already protect their artifact (PROTECT); drafts name artifacts by public id
        # in ``files`` (bound zip members) and in the pack.yaml text (``artifact_id:``), which no
        # foreign key shows, so deleting one would break the draft's next validate or publish.
        to_delete, counts, perms_needed, protected = super().get_deleted_objects(objs, request)
        drafts = [
            _draft_reference(artifact, draft)
            for artifact in objs
            for draft in artifact_drafts_naming(artifact)
        ]
        protected = [*protected, *drafts]
        return to_delete, counts, _unless_protected(perms_needed, protected), protected

    # A version published between that check and the delete with an asset on the artifact
    # (PROTECT) made the delete a 500; a draft that bound it meanwhile lost its file unseen.
    # The delete checks again with the artifacts' rows locked (an asset's insert waits on
    # the row it names) and refuses as a message; nothing of it stays.

    def delete_model(self, request: HttpRequest, obj: Artifact) -> None:
        _artifacts_delete([obj.pk])

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Artifact]) -> None:
        _artifacts_delete(list(queryset.values_list("pk", flat=True)))

    @admin.display(description="sha256", ordering="sha256")
    def short_sha(self, obj: Artifact) -> str:
        return format_html("<code>{}</code>", obj.sha256[:12])


@transaction.atomic
def _artifacts_delete(ids: list[int]) -> None:
    """Delete the artifacts ``ids``, or none of them when an asset or a draft names one."""
    from packs.services.artifacts import artifact_drafts_naming

    reasons = []
    for artifact in Artifact.objects.select_for_update().filter(pk__in=ids).order_by("pk"):
        held = ["published assets use it"] if artifact.assets.exists() else []
        drafts = artifact_drafts_naming(artifact)
        if drafts:
            held.append(f"drafts name it ({', '.join(draft.name for draft in drafts)})")
        if held:
            reasons.append(f"Artifact {artifact}: {' and '.join(held)}")
    if reasons:
        raise DeleteRefused("; ".join(reasons))
    Artifact.objects.filter(pk__in=ids).delete()  # each row's file goes on commit (post_delete)


def _unless_protected(perms_needed: set[str], protected: list[Any]) -> set[str]:
    """The delete page shows missing permissions before protected objects, and a published
    row's admin refuses every delete, so "no permission to delete assets" would hide which
    rows hold the object. Any protected row refuses the delete on its own: list those."""
    return set() if protected else perms_needed


def _draft_reference(artifact: Artifact, draft: Draft) -> str:
    public_id = str(artifact.public_id)
    paths = sorted(path for path, ref in draft.files.items() if ref == public_id)
    how = f"binds it as {', '.join(paths)}" if paths else "names it in pack.yaml"
    url = reverse("admin:packs_draft_change", args=[draft.pk])
    return format_html('Draft: <a href="{}">{}</a> ({})', url, draft.name, how)


@admin.register(Draft)
class DraftAdmin(SearchByPublicId, ListDeferAdmin, admin.ModelAdmin):
    list_display = ("name", "workspace", "based_on", "created_by", "updated_at")
    list_filter = (("workspace__slug", SlugFilter), "updated_at")
    # Not bundle_text: up to 5 MiB of pack.yaml per draft, read in full by every search.
    search_fields = ("name",)  # and the public id
    list_select_related = ("workspace", "based_on", "based_on__pack", "created_by")
    list_defer = ("bundle_text", "files")  # the page shows one draft's text and files
    # A draft is its author's, edited through the editor or the API (packs.services.drafts:
    # size limits, names, bound files); the console shows it and may delete it.
    readonly_fields = (
        "public_id", "workspace", "name", "bundle_text", "files", "based_on", "created_by",
        "revision", "created_at", "updated_at",
    )  # fmt: skip

    def has_add_permission(self, request: Any) -> bool:
        return False

    def get_queryset(self, request: HttpRequest) -> QuerySet[Draft]:
        # Also what the list shows: a select_related here replaces list_select_related.
        qs = super().get_queryset(request).select_related(*self.list_select_related)
        return qs.defer(*related("based_on", VERSION_HEAVY))
