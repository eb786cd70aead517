"""Grading app models: the workspace's judge provider account and the model price table.

``JudgeProviderConfig``: one per workspace (kind openai | anthropic, base URL, default model,
API key encrypted at rest with ``agentclash_site.lib.crypto``, write-only: never rendered
back). The workspace's ``allow_private_endpoints`` decides whether its base URL may be
loopback or private. ``ModelPrice``: USD per 1M input / output tokens per model, editable in
the admin and seeded from ``grading.pricing.DEFAULT_PRICES``; judge cost comes only from it.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from agentclash_site.lib.crypto import decrypt_text, encrypt_text


class ProviderKind(models.TextChoices):
    OPENAI = "openai", "OpenAI-compatible (chat completions)"
    ANTHROPIC = "anthropic", "Anthropic (messages)"


class JudgeProviderConfig(models.Model):
    workspace = models.OneToOneField(
        "workspaces.Workspace", on_delete=models.CASCADE, related_name="judge_provider"
    )
    kind = models.CharField(max_length=16, choices=ProviderKind.choices, default=ProviderKind.OPENAI)
    base_url = models.CharField(
        max_length=500, blank=True, default="", help_text="Empty: the provider's public API."
    )
    model = models.CharField(
        max_length=200, blank=True, default="", help_text="Used when a pack judge names no model."
    )
    api_key_encrypted = models.TextField(blank=True, default="", editable=False)
    updated_at = models.DateTimeField(default=timezone.now)
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(kind__in=ProviderKind.values), name="grading_judgeprovider_kind_valid"
            )
        ]

    def __str__(self) -> str:
        return f"{self.workspace} judge provider ({self.kind})"

    @property
    def has_api_key(self) -> bool:
        return bool(self.api_key_encrypted)

    def set_api_key(self, plain: str) -> None:
        self.api_key_encrypted = encrypt_text(plain) if plain else ""

    def api_key(self) -> str:
        return decrypt_text(self.api_key_encrypted) if self.api_key_encrypted else ""

    def provider_config(self) -> Any:
        """The plain ``grading.judges.ProviderConfig`` (key decrypted, in memory only)."""
        from grading.judges.providers import ProviderConfig

        return ProviderConfig(
            kind=self.kind,
            base_url=self.base_url,
            api_key=self.api_key(),
            model=self.model,
            allow_private=bool(self.workspace.allow_private_endpoints),
        )


class ModelPrice(models.Model):
    model = models.CharField(max_length=200, unique=True, help_text="Exact model name, or a prefix of it.")
    input_usd_per_million = models.DecimalField(max_digits=12, decimal_places=6)
    output_usd_per_million = models.DecimalField(max_digits=12, decimal_places=6)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["model"]
        constraints = [
            models.CheckConstraint(
                condition=Q(input_usd_per_million__gte=0) & Q(output_usd_per_million__gte=0),
                name="grading_modelprice_non_negative",
            )
        ]

    def __str__(self) -> str:
        return f"{self.model}: ${self.input_usd_per_million}/{self.output_usd_per_million} per 1M"


def price_table() -> Any:
    """The admin price table as a ``grading.pricing.PriceTable`` (rows only: no defaults)."""
    from grading.pricing import Price, PriceTable

    return PriceTable(
        {
            p.model: Price(float(p.input_usd_per_million), float(p.output_usd_per_million))
            for p in ModelPrice.objects.all()
        }
    )
