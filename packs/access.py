"""One access helper per object kind of the packs app, all built on ``scoped_get``.

Outsiders get 404 (existence is never revealed); viewers get 403 when ``write=True``.
Each helper accepts extra lookups so the API (workspace slug + pack slug) and the HTML
views (public UUIDs) share it.
"""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from agentclash_site.workspaces.access import scoped_get
from packs.models import Artifact, Asset, Draft, Pack, PackVersion


def get_pack_for_user(
    request: Any, *, write: bool = False, queryset: QuerySet[Pack] | None = None, **lookup: Any
) -> Pack:
    """A pack of a workspace the user belongs to: ``pack_id=`` or ``workspace__slug=, slug=``."""
    if "pack_id" in lookup:
        lookup["public_id"] = lookup.pop("pack_id")
    return scoped_get(
        request, queryset if queryset is not None else Pack.objects.all(), write=write, **lookup
    )


def get_version_for_user(
    request: Any, *, write: bool = False, queryset: QuerySet[PackVersion] | None = None, **lookup: Any
) -> PackVersion:
    """A published version: ``version_id=`` or ``pack__workspace__slug=, pack__slug=, number=``.

    ``queryset`` picks what is loaded with it (e.g. ``PackVersion.objects.for_detail()``).
    """
    if "version_id" in lookup:
        lookup["public_id"] = lookup.pop("version_id")
    return scoped_get(
        request,
        queryset if queryset is not None else PackVersion.objects.select_related("pack"),
        write=write,
        workspace_field="pack__workspace",
        **lookup,
    )


def get_draft_for_user(request: Any, *, write: bool = False, **lookup: Any) -> Draft:
    """A draft: ``draft_id=`` (optionally with ``workspace__slug=``)."""
    if "draft_id" in lookup:
        lookup["public_id"] = lookup.pop("draft_id")
    return scoped_get(request, Draft.objects.for_editor(), write=write, **lookup)


def get_artifact_for_user(request: Any, *, write: bool = False, **lookup: Any) -> Artifact:
    """An artifact: ``artifact_id=`` (optionally with ``workspace__slug=``)."""
    if "artifact_id" in lookup:
        lookup["public_id"] = lookup.pop("artifact_id")
    return scoped_get(request, Artifact.objects.all(), write=write, **lookup)


def get_asset_for_user(request: Any, **lookup: Any) -> Asset:
    """An asset of a published version: ``asset_id=``. Assets are never written."""
    if "asset_id" in lookup:
        lookup["public_id"] = lookup.pop("asset_id")
    return scoped_get(
        request,
        Asset.objects.select_related("version", "version__pack", "artifact"),
        workspace_field="version__pack__workspace",
        **lookup,
    )
