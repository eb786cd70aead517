"""Content-addressed workspace artifacts: the same bytes in a workspace are one artifact."""

from __future__ import annotations

import hashlib
import mimetypes
from dataclasses import dataclass
from typing import Any

from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.db import IntegrityError, transaction

from agentclash_site.workspaces.models import Workspace
from packs.models import Artifact, artifact_upload_to


@dataclass(frozen=True)
class ArtifactResult:
    artifact: Artifact
    created: bool


def guess_media_type(filename: str | None) -> str:
    if filename:
        guessed, _ = mimetypes.guess_type(filename)
        if guessed:
            return guessed
        if filename.endswith((".yaml", ".yml")):
            return "application/yaml"
    return "application/octet-stream"


def artifact_store(
    *,
    workspace: Workspace,
    data: bytes,
    filename: str = "",
    media_type: str | None = None,
    user: Any = None,
) -> ArtifactResult:
    """Store ``data`` as an artifact of ``workspace``, or return the one that holds these bytes.

    The file is written to storage before the row is inserted, never inside a transaction
    (storage may be remote). A concurrent store of the same bytes loses the insert race on
    ``packs_artifact_sha256_unique`` and returns the winner's row.
    """
    digest = hashlib.sha256(data).hexdigest()
    existing = Artifact.objects.filter(workspace=workspace, sha256=digest).first()
    if existing is not None:
        return ArtifactResult(existing, False)
    artifact = Artifact(
        workspace=workspace,
        sha256=digest,
        size=len(data),
        media_type=(media_type or guess_media_type(filename))[:200],
        filename=(filename or "")[-255:],
        created_by=user if getattr(user, "is_authenticated", False) else None,
    )
    name = artifact_upload_to(artifact, filename)
    # Content addressed: a file already at this name holds exactly these bytes.
    if not default_storage.exists(name):
        name = default_storage.save(name, ContentFile(data))
    artifact.file.name = name
    try:
        with transaction.atomic():
            artifact.save()
    except IntegrityError:
        return ArtifactResult(Artifact.objects.get(workspace=workspace, sha256=digest), False)
    return ArtifactResult(artifact, True)


def artifact_read(*, artifact: Artifact) -> bytes:
    with artifact.file.open("rb") as handle:
        return handle.read()
