"""Demo step of ``manage.py demo setup``: publish every example pack into the demo workspace.

Idempotent: publishing the same bytes again is ``already_published``, a success.
"""

from __future__ import annotations

from typing import Any

from agentclash_site.workspaces.models import Workspace
from packs.services import PackInvalid, PublishConflict, pack_version_publish
from packs.services.cli import read_bundle_path
from packs.services.drafts import examples_dir


def setup(*, workspace: Workspace, user: Any, stdout: Any) -> None:
    root = examples_dir()
    for directory in (
        sorted(p for p in root.iterdir() if (p / "pack.yaml").is_file()) if root.is_dir() else []
    ):
        try:
            result = pack_version_publish(workspace=workspace, data=read_bundle_path(directory), user=user)
        except PackInvalid as exc:
            stdout.write(
                f"  pack {directory.name}: invalid, skipped ({len(exc.report_body['errors'])} errors)\n"
            )
            continue
        except PublishConflict as exc:
            stdout.write(f"  pack {directory.name}: {exc.message}\n")
            continue
        state = "already published" if result.already_published else "published"
        stdout.write(f"  pack {result.pack.slug} v{result.version.number}: {state}\n")
