"""``manage.py encryption rotate [--json]``: re-encrypt every stored secret with the current
``FIELD_ENCRYPTION_KEY`` (deployment secrets and signing keys, judge provider API keys).

Key rotation: set the new key as ``FIELD_ENCRYPTION_KEY``, the old one in
``FIELD_ENCRYPTION_KEY_FALLBACKS``, restart, run this command, then drop the fallback. Each
row is rewritten in its own transaction under a row lock, only if it still holds what was read
(a secret set meanwhile is kept). A secret no key reads is listed and left as it is (exit 1).
"""

from __future__ import annotations

import argparse
from typing import Any

from django.db import models, transaction

from agentclash_site.lib.cli import CliError, JsonCommand
from agentclash_site.lib.crypto import DecryptionError, reencrypt_text
from grading.models import JudgeProviderConfig
from runs.models import Deployment

# (model, its encrypted fields, what a row is called in the report)
ENCRYPTED: tuple[tuple[type[models.Model], tuple[str, ...], str], ...] = (
    (Deployment, ("secret_encrypted", "signing_key_encrypted"), "deployment"),
    (JudgeProviderConfig, ("api_key_encrypted",), "judge_provider"),
)


def _label(obj: Any) -> str:
    """``workspace/deployment`` for a deployment; the workspace for its judge provider."""
    name = getattr(obj, "name", None)
    return f"{obj.workspace.slug}/{name}" if name else obj.workspace.slug


def rotate_all() -> dict[str, Any]:
    rotated = 0
    unreadable: list[dict[str, Any]] = []
    for model, fields, kind in ENCRYPTED:
        has_secret = models.Q()
        for name in fields:
            has_secret |= ~models.Q(**{name: ""})
        for pk in model.objects.filter(has_secret).order_by("pk").values_list("pk", flat=True).iterator():
            with transaction.atomic():
                row = model.objects.select_for_update().select_related("workspace").filter(pk=pk).first()
                if row is None:  # deleted meanwhile
                    continue
                changed = []
                for name in fields:
                    token = getattr(row, name)
                    if not token:
                        continue
                    try:
                        setattr(row, name, reencrypt_text(token))
                    except DecryptionError:
                        unreadable.append({"kind": kind, "id": row.pk, "name": _label(row), "field": name})
                        continue
                    changed.append(name)
                if changed:
                    row.save(update_fields=changed)
                    rotated += len(changed)
    return {"rotated": rotated, "unreadable": unreadable}


class Command(JsonCommand):
    help = "Re-encrypt stored secrets with the current FIELD_ENCRYPTION_KEY (key rotation)."

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        rotate = sub.add_parser(
            "rotate",
            help="re-encrypt every stored secret with FIELD_ENCRYPTION_KEY, reading each with it "
            "or FIELD_ENCRYPTION_KEY_FALLBACKS",
        )
        self.add_json_argument(rotate)

    def handle(self, *args: Any, **options: Any) -> None:
        doc = rotate_all()
        if doc["unreadable"]:
            names = ", ".join(f"{u['kind']} {u['name']} ({u['field']})" for u in doc["unreadable"][:20])
            raise CliError(
                "secrets_unreadable",
                f"{len(doc['unreadable'])} stored secret(s) could not be read with FIELD_ENCRYPTION_KEY or "
                f"FIELD_ENCRYPTION_KEY_FALLBACKS and were left as they are: {names}; list the key they were "
                "written with in FIELD_ENCRYPTION_KEY_FALLBACKS, or set those secrets again "
                f"({doc['rotated']} other(s) re-encrypted)",
                exit_code=1,
                extra=doc,
            )
        self.emit(doc, f"{doc['rotated']} stored secret(s) re-encrypted with FIELD_ENCRYPTION_KEY")
