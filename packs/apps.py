from functools import partial
from typing import Any

from django.apps import AppConfig
from django.db import transaction
from django.db.models.signals import post_delete


class PacksConfig(AppConfig):
    name = "packs"
    verbose_name = "Challenge packs"

    def ready(self) -> None:
        post_delete.connect(
            _release_artifact_file, sender=self.get_model("Artifact"), dispatch_uid="packs.artifact_file"
        )


def _release_artifact_file(sender: Any, instance: Any, using: str, **kwargs: Any) -> None:
    """A deleted artifact's file goes once the delete commits (never if it rolls back), by
    whichever path the row went: the admin, or a workspace's cascade."""
    from packs.services.artifacts import artifact_file_release

    if instance.file.name:
        transaction.on_commit(
            partial(artifact_file_release, workspace_id=instance.workspace_id, name=instance.file.name),
            using=using,
        )
