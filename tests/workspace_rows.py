"""Many packs, versions and deployments in one workspace, written in bulk (no bundle is parsed):
for the pages whose size must not grow with the workspace."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from packs.models import InputSet, Pack, PackVersion
from runs.models import Deployment


def bulk_packs(workspace: Any, slugs: Iterable[str], *, versions: int = 1, sets: int = 1) -> list[Pack]:
    """A pack per slug with ``versions`` versions (1..n), each with ``sets`` input sets."""
    packs = Pack.objects.bulk_create(
        Pack(workspace=workspace, slug=slug, name=slug.title(), family="test") for slug in slugs
    )
    rows = PackVersion.objects.bulk_create(
        PackVersion(pack=pack, number=n, manifest={}, source=b"", content_hash=f"{pack.slug}-{n}")
        for pack in packs
        for n in range(1, versions + 1)
    )
    InputSet.objects.bulk_create(
        InputSet(version=v, key=f"set{s}", name=f"Set {s}", position=s) for v in rows for s in range(sets)
    )
    return packs


def bulk_deployments(workspace: Any, names: Iterable[str]) -> list[Deployment]:
    return Deployment.objects.bulk_create(
        Deployment(workspace=workspace, name=n, kind="trace_import") for n in names
    )
