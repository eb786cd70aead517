"""Content-addressed workspace artifacts: the same bytes in a workspace are one artifact.

An artifact's file lives at its content address (``artifact_upload_to``: the workspace and
the sha256), so every writer of the same bytes writes the same name, and a writer that
finds the name taken does not write it again. Files are written before the row that names
them is inserted, never inside a transaction (storage may be remote).

A publish that fails deletes the files it wrote (``artifact_files_forget``) while another
process may be committing a row for the same bytes, having found the file present and not
written it. No lock spans a storage call and a transaction, so two rules of order keep every
committed row's file in place instead:

- whoever commits a row checks the file after the commit and writes it again if it is gone
  (``artifact_files_ensure``);
- whoever deletes a file checks for a committed row after the delete and writes it again if
  one appeared.

Whatever the interleaving, one of the two checks runs after both the commit and the delete.
"""

from __future__ import annotations

import hashlib
import logging
import mimetypes
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.db import IntegrityError, transaction
from django.db.models import Q

from agentclash_site.workspaces.models import Workspace
from packs.models import Artifact, Draft, artifact_upload_to

logger = logging.getLogger(__name__)


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


def artifact_new(
    *, workspace: Workspace, data: bytes, filename: str = "", media_type: str | None = None, user: Any = None
) -> Artifact:
    """An unsaved artifact row for ``data``, its file name set to the content address."""
    artifact = Artifact(
        workspace=workspace,
        sha256=hashlib.sha256(data).hexdigest(),
        size=len(data),
        media_type=(media_type or guess_media_type(filename))[:200],
        filename=(filename or "")[-255:],
        created_by=user if getattr(user, "is_authenticated", False) else None,
    )
    artifact.file.name = artifact_upload_to(artifact, filename)
    return artifact


def artifact_file_write(*, name: str, data: bytes) -> bool:
    """Write ``data`` at its content address ``name`` unless a file is there already (it
    holds the same bytes). True when this call wrote it."""
    if default_storage.exists(name):
        return False
    saved = default_storage.save(name, ContentFile(data))
    if saved != name:
        # A concurrent writer took the name between the check and the save: its file holds
        # the same bytes, so the copy under the alternative name goes.
        _delete_quietly(saved)
        return False
    return True


def artifact_files_ensure(files: Iterable[tuple[str, bytes]]) -> None:
    """After a commit: write again any file of ``(name, bytes)`` a failed publish deleted
    meanwhile. Never raises: the rows are committed, and a storage error is logged."""
    for name, data in files:
        try:
            artifact_file_write(name=name, data=data)
        except Exception:
            logger.exception("could not check or restore artifact file %s", name)


def artifact_files_forget(*, workspace: Workspace, written: dict[str, bytes]) -> None:
    """After a failure: delete the files of ``written`` (``{name: bytes}``, the files this
    caller wrote) that no committed artifact row names, then restore any a concurrent commit
    claimed meanwhile. Never raises, so a storage or database error cannot hide the error
    that made the caller give up; what it could not delete is logged."""
    if not written:
        return
    try:
        digests = {hashlib.sha256(data).hexdigest(): name for name, data in written.items()}
        kept = _names_with_rows(workspace, digests)
        for name in sorted(set(written) - kept):
            _delete_quietly(name)
        # A row committed after the first look may name a file just deleted.
        artifact_files_ensure((name, written[name]) for name in sorted(_names_with_rows(workspace, digests)))
    except Exception:
        logger.exception("could not clean up the artifact files of a failed publish")


def artifact_file_release(*, workspace_id: int, name: str) -> None:
    """After an artifact row's delete committed (the admin, a workspace's cascade): delete its
    file unless a row names it again, restoring it if one is committed meanwhile (the rules of
    order above). Never raises: the rows are gone, and a storage error is logged."""
    try:
        if not default_storage.exists(name):
            return
        with default_storage.open(name, "rb") as handle:
            data = handle.read()
    except Exception:
        logger.exception("could not read artifact file %s to release it", name)
        return
    artifact_files_forget(workspace=Workspace(pk=workspace_id), written={name: data})


def _names_with_rows(workspace: Workspace, digests: dict[str, str]) -> set[str]:
    """The file names of ``{sha256: name}`` that a committed artifact row names."""
    found = Artifact.objects.filter(workspace=workspace, sha256__in=list(digests)).values_list(
        "sha256", flat=True
    )
    return {digests[digest] for digest in found}


def _delete_quietly(name: str) -> None:
    try:
        default_storage.delete(name)
    except Exception:
        logger.exception("could not delete artifact file %s", name)


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
    artifact = artifact_new(
        workspace=workspace, data=data, filename=filename, media_type=media_type, user=user
    )
    existing = Artifact.objects.filter(workspace=workspace, sha256=artifact.sha256).first()
    if existing is not None:
        return ArtifactResult(existing, False)
    name = artifact.file.name
    wrote = artifact_file_write(name=name, data=data)
    try:
        with transaction.atomic():
            artifact.save()
    except IntegrityError:
        # The winner's row names the same file (content addressed), so nothing is left over.
        return ArtifactResult(Artifact.objects.get(workspace=workspace, sha256=artifact.sha256), False)
    except BaseException:
        if wrote:
            artifact_files_forget(workspace=workspace, written={name: data})
        raise
    artifact_files_ensure([(name, data)])
    return ArtifactResult(artifact, True)


def artifact_read(*, artifact: Artifact) -> bytes:
    with artifact.file.open("rb") as handle:
        return handle.read()


def artifact_drafts_naming(artifact: Artifact) -> list[Draft]:
    """The drafts of the artifact's workspace that bind it as a file or name it in pack.yaml
    (by public id: no foreign key shows these references)."""
    public_id = str(artifact.public_id)
    candidates = Draft.objects.filter(workspace_id=artifact.workspace_id).filter(
        Q(bundle_text__contains=public_id) | ~Q(files={})
    )
    return [
        draft
        for draft in candidates.only("id", "name", "files", "bundle_text")
        if public_id in draft.files.values() or public_id in draft.bundle_text
    ]


def artifacts_discard_unreferenced(artifacts: Iterable[Artifact]) -> None:
    """After a failed edit: delete those of ``artifacts`` (the ones it created) that no asset
    and no draft names, so a refused draft edit leaves no orphan behind (their files go when
    the delete commits). One another caller bound meanwhile stays. Never raises, so the error
    that made the caller give up is the one reported."""
    for artifact in artifacts:
        try:
            with transaction.atomic():
                locked = Artifact.objects.select_for_update().filter(pk=artifact.pk).first()
                if locked is None or locked.assets.exists() or artifact_drafts_naming(locked):
                    continue
                locked.delete()
        except Exception:
            logger.exception("could not discard artifact %s of a failed edit", artifact.public_id)
