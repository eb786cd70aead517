"""Challenge packs: content-addressed artifacts, packs, immutable published versions and drafts.

A published :class:`PackVersion` and everything hanging off it (challenges, input sets,
cases, assets) is written once by ``packs.services.pack_version_publish`` and never
changed: runs point at versions, never at a mutable pack (pack-format §12).
"""

from __future__ import annotations

import uuid
from typing import Any

from django.conf import settings
from django.db import models
from django.db.models import Count, Prefetch, Q
from django.utils import timezone

from agentclash_site.workspaces.models import Workspace
from packs.bundle import limits


class ImmutableError(Exception):
    """Raised when code tries to change a row of a published version."""


def artifact_upload_to(instance: Artifact, filename: str) -> str:
    # Content-addressed: the name is derived from the bytes, so the same bytes in one
    # workspace always land at the same storage name.
    return f"artifacts/{instance.workspace.public_id}/{instance.sha256[:2]}/{instance.sha256}"


# --- Artifact ------------------------------------------------------------------------


class ArtifactQuerySet(models.QuerySet):
    def for_workspace(self, workspace: Workspace) -> ArtifactQuerySet:
        """Artifacts of one workspace, newest first (the admin and API listings)."""
        return self.filter(workspace=workspace).order_by("-created_at", "-id")


class Artifact(models.Model):
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="artifacts")
    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    sha256 = models.CharField(max_length=64)
    size = models.BigIntegerField()
    media_type = models.CharField(max_length=200, default="application/octet-stream")
    filename = models.CharField(max_length=255, blank=True, help_text="The name it was first uploaded as.")
    file = models.FileField(upload_to=artifact_upload_to, max_length=300)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)

    objects = ArtifactQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            # Content addressing: the same bytes in a workspace are one artifact. Also the
            # index of the "does this workspace already hold these bytes" lookup.
            models.UniqueConstraint(fields=["workspace", "sha256"], name="packs_artifact_sha256_unique"),
            models.CheckConstraint(condition=Q(size__gte=0), name="packs_artifact_size_nonnegative"),
        ]
        indexes = [
            # ArtifactQuerySet.for_workspace: a workspace's artifacts, newest first.
            models.Index(fields=["workspace", "-created_at"], name="packs_artifact_ws_created_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.filename or self.sha256[:12]} ({self.size} bytes)"


# --- Pack ----------------------------------------------------------------------------


class PackQuerySet(models.QuerySet):
    def for_list(self, workspace: Workspace, *, versions_shown: int | None = None) -> PackQuerySet:
        """A workspace's packs by slug, each with ``version_count``, ``latest_number`` and its
        versions prefetched newest first (two queries in all): all of them as ``versions``,
        or with ``versions_shown`` the newest that many of each as ``newest_versions`` (the
        list page: a pack with a thousand versions was a thousand badges on its row)."""
        versions = PackVersion.objects.only(
            "id", "public_id", "pack_id", "number", "published_at", "content_hash"
        ).order_by("-number")
        prefetch = Prefetch("versions", queryset=versions)
        if versions_shown is not None:
            # Still one query (a window over each pack); a sliced prefetch needs its own attribute.
            prefetch = Prefetch("versions", queryset=versions[:versions_shown], to_attr="newest_versions")
        return (
            self.filter(workspace=workspace)
            .annotate(version_count=Count("versions"), latest_number=models.Max("versions__number"))
            .prefetch_related(prefetch)
            .order_by("slug")
        )

    def for_detail(self) -> PackQuerySet:
        """A pack with its workspace and its versions (and their publishers), newest first."""
        versions = PackVersion.objects.select_related("published_by").order_by("-number")
        return self.select_related("workspace").prefetch_related(Prefetch("versions", queryset=versions))


class Pack(models.Model):
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="packs")
    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    slug = models.CharField(max_length=limits.PACK_SLUG)
    name = models.CharField(max_length=limits.PACK_NAME)
    family = models.CharField(max_length=limits.PACK_FAMILY)
    description = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    objects = PackQuerySet.as_manager()

    class Meta:
        ordering = ["slug"]
        constraints = [
            # Also the index of the publish lock "pack of this workspace with this slug" and
            # of PackQuerySet.for_list's ordering by slug.
            models.UniqueConstraint(fields=["workspace", "slug"], name="packs_pack_slug_unique"),
        ]

    def __str__(self) -> str:
        return self.slug


# --- PackVersion -----------------------------------------------------------------------


class PackVersionQuerySet(models.QuerySet):
    def for_detail(self) -> PackVersionQuerySet:
        """A version with its pack, workspace and publisher, its challenges, its input sets
        (each with ``case_count``) and its version-scoped assets: four queries."""
        input_sets = InputSet.objects.annotate(case_count=Count("cases")).order_by("position", "id")
        version_assets = Asset.objects.filter(scope=Asset.Scope.VERSION).order_by("key")
        return self.select_related("pack", "pack__workspace", "published_by").prefetch_related(
            Prefetch("challenges", queryset=Challenge.objects.order_by("position", "id")),
            Prefetch("input_sets", queryset=input_sets),
            Prefetch("assets", queryset=version_assets, to_attr="version_assets"),
        )

    def for_history(self, pack: Pack) -> PackVersionQuerySet:
        """The versions of one pack, newest first, without their (large) source and manifest."""
        return (
            self.filter(pack=pack)
            .select_related("published_by")
            .defer("source", "manifest")
            .order_by("-number")
        )

    def for_source(self) -> PackVersionQuerySet:
        """Versions with their pack and workspace, for serving or diffing the original bytes."""
        return self.select_related("pack", "pack__workspace")


class PackVersion(models.Model):
    pack = models.ForeignKey(Pack, on_delete=models.CASCADE, related_name="versions")
    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    number = models.PositiveIntegerField()
    # The normalized stored form of pack-format §6; read it through packs.bundle's typed models.
    manifest = models.JSONField()
    source = models.BinaryField(help_text="The original bytes: the YAML document or the zip archive.")
    source_media_type = models.CharField(max_length=100, default="application/yaml")
    content_hash = models.CharField(max_length=64, help_text="sha256 of the source bytes.")
    execution_mode = models.CharField(max_length=30, default="native")
    published_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    published_at = models.DateTimeField(default=timezone.now)
    warnings = models.JSONField(default=list, blank=True)
    # Baseline-probe findings of the eval critique, stored at publish once computed.
    critique_findings = models.JSONField(null=True, blank=True)

    objects = PackVersionQuerySet.as_manager()

    class Meta:
        ordering = ["pack", "-number"]
        constraints = [
            # (workspace, slug, number) is unique: a pack is unique per (workspace, slug).
            # Its index also serves "version n of this pack" and the history ordering.
            models.UniqueConstraint(fields=["pack", "number"], name="packs_packversion_number_unique"),
            models.CheckConstraint(condition=Q(number__gt=0), name="packs_packversion_number_positive"),
        ]

    def __str__(self) -> str:
        return f"{self.pack.slug} v{self.number}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        if not self._state.adding:
            raise ImmutableError("a published pack version cannot be changed")
        super().save(*args, **kwargs)

    @property
    def is_zip(self) -> bool:
        return self.source_media_type == "application/zip"

    @property
    def source_filename(self) -> str:
        return f"{self.pack.slug}-v{self.number}." + ("zip" if self.is_zip else "yaml")


class _ImmutableRow(models.Model):
    """Rows of a published version: inserted in bulk at publish, never updated."""

    class Meta:
        abstract = True

    def save(self, *args: Any, **kwargs: Any) -> None:
        if not self._state.adding:
            raise ImmutableError(f"a published {self._meta.verbose_name} cannot be changed")
        super().save(*args, **kwargs)


class Challenge(_ImmutableRow):
    version = models.ForeignKey(PackVersion, on_delete=models.CASCADE, related_name="challenges")
    key = models.CharField(max_length=limits.CHALLENGE_KEY)
    title = models.CharField(max_length=limits.CHALLENGE_TITLE)
    category = models.CharField(max_length=limits.CHALLENGE_CATEGORY)
    difficulty = models.CharField(max_length=20)
    instructions = models.TextField(blank=True)
    definition = models.JSONField(default=dict, blank=True)
    position = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["version", "position"]
        constraints = [
            models.UniqueConstraint(fields=["version", "key"], name="packs_challenge_key_unique"),
        ]

    def __str__(self) -> str:
        return self.key


class InputSet(_ImmutableRow):
    version = models.ForeignKey(PackVersion, on_delete=models.CASCADE, related_name="input_sets")
    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    key = models.CharField(max_length=limits.INPUT_SET_KEY)
    name = models.CharField(max_length=limits.INPUT_SET_NAME)
    description = models.TextField(blank=True)
    # Every case of a set shares one challenge (pack-format §4.2).
    challenge = models.ForeignKey(
        Challenge, on_delete=models.CASCADE, null=True, blank=True, related_name="+"
    )
    challenge_key = models.CharField(max_length=limits.CHALLENGE_KEY, blank=True)
    position = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["version", "position"]
        constraints = [
            models.UniqueConstraint(fields=["version", "key"], name="packs_inputset_key_unique"),
        ]

    def __str__(self) -> str:
        return self.key


class CaseQuerySet(models.QuerySet):
    def for_version(self, version: PackVersion) -> CaseQuerySet:
        """Every case of a version, in input-set then case order, with its set and challenge."""
        return (
            self.filter(input_set__version=version)
            .select_related("input_set", "challenge")
            .order_by("input_set__position", "position")
        )

    def for_input_set(self, input_set: InputSet) -> CaseQuerySet:
        """The cases of one input set in authored order, with their challenge."""
        return self.filter(input_set=input_set).select_related("challenge").order_by("position")


class Case(_ImmutableRow):
    input_set = models.ForeignKey(InputSet, on_delete=models.CASCADE, related_name="cases")
    challenge = models.ForeignKey(Challenge, on_delete=models.CASCADE, related_name="cases")
    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    case_key = models.CharField(max_length=limits.CASE_KEY, help_text="The effective key.")
    item_key = models.CharField(max_length=limits.CASE_KEY)
    position = models.PositiveIntegerField(default=0)
    # Case document v1 or a legacy payload (pack-format §6).
    document = models.JSONField()
    content_hash = models.CharField(max_length=64)

    objects = CaseQuerySet.as_manager()

    class Meta:
        ordering = ["input_set", "position"]
        constraints = [
            models.UniqueConstraint(
                fields=["input_set", "challenge", "case_key"], name="packs_case_key_unique"
            ),
        ]
        indexes = [
            # CaseQuerySet.for_input_set / for_version: cases of a set in authored order.
            models.Index(fields=["input_set", "position"], name="packs_case_set_position_idx"),
        ]

    def __str__(self) -> str:
        return self.case_key


def asset_upload_to(
    instance: Asset, filename: str
) -> str:  # pragma: no cover - assets share artifacts' names
    return f"assets/{instance.sha256}"


class Asset(_ImmutableRow):
    class Scope(models.TextChoices):
        VERSION = "version", "Version"
        CHALLENGE = "challenge", "Challenge"
        CASE = "case", "Case"

    version = models.ForeignKey(PackVersion, on_delete=models.CASCADE, related_name="assets")
    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    scope = models.CharField(max_length=10, choices=Scope.choices)
    challenge = models.ForeignKey(
        Challenge, on_delete=models.CASCADE, null=True, blank=True, related_name="assets"
    )
    case = models.ForeignKey(Case, on_delete=models.CASCADE, null=True, blank=True, related_name="assets")
    key = models.CharField(max_length=limits.ASSET_KEY)
    path = models.CharField(max_length=limits.ASSET_PATH)
    kind = models.CharField(max_length=limits.ASSET_KIND, blank=True)
    media_type = models.CharField(max_length=limits.ASSET_MEDIA_TYPE, blank=True)
    sha256 = models.CharField(max_length=64, blank=True)
    size = models.BigIntegerField(null=True, blank=True)
    artifact = models.ForeignKey(
        Artifact, on_delete=models.PROTECT, null=True, blank=True, related_name="assets"
    )
    # The artifact's storage name: assets never copy bytes, they name the artifact's file.
    file = models.FileField(upload_to=asset_upload_to, max_length=300, blank=True)

    class Meta:
        ordering = ["version", "scope", "key"]
        constraints = [
            # Each list of assets is its own key namespace (pack-format §4.3).
            models.UniqueConstraint(
                fields=["version", "key"],
                condition=Q(scope="version"),
                name="packs_asset_version_key_unique",
            ),
            models.UniqueConstraint(
                fields=["challenge", "key"],
                condition=Q(scope="challenge"),
                name="packs_asset_challenge_key_unique",
            ),
            models.UniqueConstraint(
                fields=["case", "key"], condition=Q(scope="case"), name="packs_asset_case_key_unique"
            ),
            models.CheckConstraint(
                condition=(
                    Q(scope="version", challenge__isnull=True, case__isnull=True)
                    | Q(scope="challenge", challenge__isnull=False, case__isnull=True)
                    | Q(scope="case", challenge__isnull=True, case__isnull=False)
                ),
                name="packs_asset_scope_owner",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.scope}:{self.key}"


# --- Draft ---------------------------------------------------------------------------


class DraftQuerySet(models.QuerySet):
    def for_list(self, workspace: Workspace) -> DraftQuerySet:
        """A workspace's drafts, most recently edited first, without their bundle text."""
        return (
            self.filter(workspace=workspace)
            .select_related("based_on", "based_on__pack", "created_by")
            # The version a draft started from is named, never read: not its source and manifest.
            .defer("bundle_text", "based_on__source", "based_on__manifest")
            .order_by("-updated_at", "-id")
        )

    def for_editor(self) -> DraftQuerySet:
        """A draft with its workspace and the version it started from."""
        return self.select_related("workspace", "based_on", "based_on__pack", "created_by")


class Draft(models.Model):
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="pack_drafts")
    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    name = models.CharField(max_length=300)
    bundle_text = models.TextField(blank=True, help_text="pack.yaml")
    # Zip members beside pack.yaml: {path: artifact public id}. A draft with files is
    # validated and published as a zip bundle.
    files = models.JSONField(default=dict, blank=True)
    based_on = models.ForeignKey(
        PackVersion, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)
    # One more on every change. An edit names the revision it was based on and is refused
    # when the draft has moved on since (two tabs, two people): services.draft_update.
    revision = models.PositiveIntegerField(default=1)

    objects = DraftQuerySet.as_manager()

    class Meta:
        ordering = ["-updated_at"]
        indexes = [
            # DraftQuerySet.for_list: a workspace's drafts, most recently edited first.
            models.Index(fields=["workspace", "-updated_at"], name="packs_draft_ws_updated_idx"),
        ]

    def __str__(self) -> str:
        return self.name


class DraftReport(models.Model):
    """The editor's view of a draft's validation report (``packs.services.draft_reports``),
    kept so that opening the editor does not validate again what the last save validated.

    ``key`` names exactly what was validated and by what: the validator's source and
    libraries, the text, and each file's content (``draft_reports.report_key``). A stored
    view is used only while its key is the draft's current one; a draft has at most one.
    """

    draft = models.OneToOneField(Draft, on_delete=models.CASCADE, primary_key=True, related_name="+")
    key = models.CharField(max_length=64)
    revision = models.PositiveIntegerField(help_text="The draft revision it was computed for.")
    body = models.JSONField()
    created_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"report of draft {self.draft_id} at revision {self.revision}"
