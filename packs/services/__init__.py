"""Writes of the packs app: ``<entity>_<action>(*, ...)``, keyword-only and atomic.

No network or storage I/O happens inside a transaction: artifact bytes are stored first.
"""

from packs.services.artifacts import ArtifactResult, artifact_read, artifact_store
from packs.services.drafts import (
    DraftConflict,
    DraftError,
    build_zip,
    draft_blank,
    draft_bundle,
    draft_case_delete,
    draft_case_upsert,
    draft_create,
    draft_delete,
    draft_file_add,
    draft_file_remove,
    draft_from_file,
    draft_from_template,
    draft_from_version,
    draft_publish,
    draft_templates,
    draft_update,
    draft_validate,
    version_members,
)
from packs.services.publish import (
    PackInvalid,
    PublishConflict,
    PublishError,
    PublishResult,
    pack_version_publish,
)

__all__ = [
    "ArtifactResult",
    "DraftConflict",
    "DraftError",
    "PackInvalid",
    "PublishConflict",
    "PublishError",
    "PublishResult",
    "artifact_read",
    "artifact_store",
    "build_zip",
    "draft_blank",
    "draft_bundle",
    "draft_case_delete",
    "draft_case_upsert",
    "draft_create",
    "draft_delete",
    "draft_file_add",
    "draft_file_remove",
    "draft_from_file",
    "draft_from_template",
    "draft_from_version",
    "draft_publish",
    "draft_templates",
    "draft_update",
    "draft_validate",
    "pack_version_publish",
    "version_members",
]
