"""Writes of the grading app: the workspace's judge provider."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone

from grading.models import JudgeProviderConfig, ProviderKind


class JudgeProviderError(Exception):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


def check_base_url(base_url: str, *, allow_private: bool) -> str:
    """The trimmed base URL, or JudgeProviderError naming the field and the fix."""
    url = (base_url or "").strip().rstrip("/")
    if not url:
        return ""
    # Imported here: aiohttp costs ~0.2 s, and this module is imported by the admin at start-up.
    from agentclash_site.lib.outbound import OutboundError, check_url

    try:
        check_url(url, allow_private=allow_private)
    except OutboundError as exc:
        hint = (
            " Turn on 'allow private endpoints' for this workspace to use a local or LAN judge."
            if exc.code == "blocked_address" and not allow_private
            else ""
        )
        raise JudgeProviderError("base_url", f"base URL refused: {exc.message}.{hint}") from None
    return url


@transaction.atomic
def judge_provider_save(
    *,
    workspace: Any,
    user: Any,
    kind: str,
    base_url: str = "",
    model: str = "",
    api_key: str | None = None,
    clear_api_key: bool = False,
) -> JudgeProviderConfig:
    """Create or update the workspace's judge provider. ``api_key`` None or empty keeps the
    stored key (write-only field); ``clear_api_key`` removes it."""
    if kind not in ProviderKind.values:
        raise JudgeProviderError("kind", f"kind must be one of {', '.join(ProviderKind.values)}")
    url = check_base_url(base_url, allow_private=bool(workspace.allow_private_endpoints))
    config = JudgeProviderConfig.objects.select_for_update().filter(workspace=workspace).first()
    if config is None:
        config = JudgeProviderConfig(workspace=workspace)
    config.kind = kind
    config.base_url = url
    config.model = (model or "").strip()[:200]
    if clear_api_key:
        config.set_api_key("")
    elif api_key:
        config.set_api_key(api_key.strip())
    config.updated_at = timezone.now()
    config.updated_by = user if getattr(user, "is_authenticated", False) else None
    config.save()
    return config


def judge_provider_delete(*, workspace: Any) -> None:
    JudgeProviderConfig.objects.filter(workspace=workspace).delete()
