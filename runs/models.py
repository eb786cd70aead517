"""Runs app models.

Deployment: an agent under test, owned by a workspace (spec/agent-protocol.md
"Deployment fields"). Its JSON ``config`` is read through :class:`DeploymentConfig`.
"""

from __future__ import annotations

import re
import uuid
from typing import Any, ClassVar

from django.db import models
from django.db.models import Q
from django.utils import timezone
from pydantic import BaseModel, ConfigDict, Field, field_validator

from agentclash_site.lib.crypto import decrypt_text, encrypt_text

# --- Deployment ---------------------------------------------------------------------------


class DeploymentKind(models.TextChoices):
    HOSTED_HTTP = "hosted_http", "Hosted HTTP agent"
    OPENAI_CHAT = "openai_chat", "OpenAI-compatible chat model"
    TRACE_IMPORT = "trace_import", "Trace import (results uploaded)"


class EvidenceLevel(models.TextChoices):
    STRUCTURED = "structured", "Structured (tool calls, files, tasks reported)"
    BLACK_BOX = "black_box", "Black box (final output and messages only)"


MAX_IN_FLIGHT_LIMIT = 512
MAX_TIMEOUT_SECONDS = 3600.0
MAX_ATTEMPTS_LIMIT = 10

# Headers the executors set themselves; config may not override them.
RESERVED_HEADERS = frozenset(
    {
        "authorization",
        "content-type",
        "content-length",
        "host",
        "connection",
        "transfer-encoding",
        "x-agentclash-signature",
    }
)
_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,100}$")


class DeploymentConfig(BaseModel):
    """The typed shape of ``Deployment.config``.

    Model parameters and ``system_prompt`` apply to ``openai_chat`` only (the hosted agent
    owns its prompt); ``extra_headers`` apply to every kind that makes calls. Unknown keys
    are refused so a typo (``temprature``) is an error, not a silently ignored setting;
    anything else for the request body goes in ``extra_body``.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, ge=0, le=1)
    max_tokens: int | None = Field(default=None, ge=1, le=1_000_000)
    seed: int | None = None
    stop: list[str] | None = None
    system_prompt: str | None = Field(default=None, max_length=100_000)
    extra_body: dict[str, Any] = Field(default_factory=dict)
    extra_headers: dict[str, str] = Field(default_factory=dict)
    # Send the secret raw in this header instead of "Authorization: Bearer" (e.g. api-key).
    secret_header: str | None = None

    @field_validator("extra_headers")
    @classmethod
    def _headers(cls, value: dict[str, str]) -> dict[str, str]:
        for name, header_value in value.items():
            if not _HEADER_NAME.match(name):
                raise ValueError(f"{name!r} is not a valid header name")
            if name.lower() in RESERVED_HEADERS:
                raise ValueError(f"{name} is set by AgentClash and cannot be overridden")
            if "\r" in header_value or "\n" in header_value:
                raise ValueError(f"the value of {name} must be one line")
        return value

    @field_validator("secret_header")
    @classmethod
    def _secret_header(cls, value: str | None) -> str | None:
        if value is not None and (
            not _HEADER_NAME.match(value) or value.lower() in RESERVED_HEADERS - {"authorization"}
        ):
            raise ValueError(f"{value!r} cannot carry the secret")
        return value

    @field_validator("extra_body")
    @classmethod
    def _extra_body(cls, value: dict[str, Any]) -> dict[str, Any]:
        for key in ("model", "messages"):
            if key in value:
                raise ValueError(f"extra_body.{key} is set by AgentClash")
        return value

    # Keys that only make sense for a chat model.
    MODEL_KEYS: ClassVar[tuple[str, ...]] = (
        "temperature",
        "top_p",
        "max_tokens",
        "seed",
        "stop",
        "system_prompt",
        "extra_body",
    )

    def chat_params(self) -> dict[str, Any]:
        """The request-body parameters merged into a chat completion request."""
        params: dict[str, Any] = dict(self.extra_body)
        for key in ("temperature", "top_p", "max_tokens", "seed", "stop"):
            value = getattr(self, key)
            if value is not None:
                params[key] = value
        return params

    def as_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_defaults=True)


class DeploymentQuerySet(models.QuerySet["Deployment"]):
    def for_workspace(self, workspace: Any) -> DeploymentQuerySet:
        """A workspace's deployments by name (served by the name unique index)."""
        return self.filter(workspace=workspace).order_by("name")


class Deployment(models.Model):
    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    workspace = models.ForeignKey(
        "workspaces.Workspace", on_delete=models.CASCADE, related_name="deployments"
    )
    name = models.CharField(max_length=100)
    kind = models.CharField(max_length=20, choices=DeploymentKind.choices)
    # endpoint_url for hosted_http, base_url for openai_chat, empty for trace_import.
    url = models.CharField(max_length=2000, blank=True, default="")
    model = models.CharField(max_length=200, blank=True, default="")
    # Fernet tokens (agentclash_site.lib.crypto). Never rendered, never in API output.
    secret_encrypted = models.TextField(blank=True, default="", editable=False)
    signing_key_encrypted = models.TextField(blank=True, default="", editable=False)
    max_in_flight = models.PositiveIntegerField(default=8)
    timeout_seconds = models.FloatField(default=120.0)
    max_attempts = models.PositiveSmallIntegerField(default=3)
    evidence_level = models.CharField(
        max_length=20, choices=EvidenceLevel.choices, default=EvidenceLevel.STRUCTURED
    )
    config = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    updated_at = models.DateTimeField(auto_now=True)

    objects = DeploymentQuerySet.as_manager()

    class Meta:
        ordering = ["name"]
        constraints = [
            # Also the index of the list page query (workspace = ? ORDER BY name).
            models.UniqueConstraint(fields=["workspace", "name"], name="runs_deployment_name_unique"),
            models.CheckConstraint(condition=~Q(name=""), name="runs_deployment_name_not_blank"),
            models.CheckConstraint(
                condition=Q(kind__in=DeploymentKind.values), name="runs_deployment_kind_valid"
            ),
            models.CheckConstraint(
                condition=Q(evidence_level__in=EvidenceLevel.values),
                name="runs_deployment_evidence_level_valid",
            ),
            models.CheckConstraint(
                condition=Q(max_in_flight__gte=1, max_in_flight__lte=MAX_IN_FLIGHT_LIMIT),
                name="runs_deployment_max_in_flight_range",
            ),
            models.CheckConstraint(
                condition=Q(timeout_seconds__gt=0, timeout_seconds__lte=MAX_TIMEOUT_SECONDS),
                name="runs_deployment_timeout_range",
            ),
            models.CheckConstraint(
                condition=Q(max_attempts__gte=1, max_attempts__lte=MAX_ATTEMPTS_LIMIT),
                name="runs_deployment_max_attempts_range",
            ),
            models.CheckConstraint(
                condition=Q(kind=DeploymentKind.TRACE_IMPORT) | ~Q(url=""),
                name="runs_deployment_url_required",
            ),
            models.CheckConstraint(
                condition=~Q(kind=DeploymentKind.OPENAI_CHAT) | ~Q(model=""),
                name="runs_deployment_model_required",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.kind})"

    # --- per-kind names of the one URL column ---

    @property
    def endpoint_url(self) -> str | None:
        return self.url if self.kind == DeploymentKind.HOSTED_HTTP else None

    @property
    def base_url(self) -> str | None:
        return self.url if self.kind == DeploymentKind.OPENAI_CHAT else None

    @property
    def calls_out(self) -> bool:
        """Whether runs call this deployment (trace imports are uploaded instead)."""
        return self.kind != DeploymentKind.TRACE_IMPORT

    # --- secrets: write-only from the outside ---

    @property
    def has_secret(self) -> bool:
        return bool(self.secret_encrypted)

    @property
    def has_signing_key(self) -> bool:
        return bool(self.signing_key_encrypted)

    def set_secret(self, plain: str | None) -> None:
        self.secret_encrypted = encrypt_text(plain) if plain else ""

    def get_secret(self) -> str | None:
        """The decrypted secret, for executors only. Never render or log it."""
        return decrypt_text(self.secret_encrypted) if self.secret_encrypted else None

    def set_signing_key(self, plain: str | None) -> None:
        self.signing_key_encrypted = encrypt_text(plain) if plain else ""

    def get_signing_key(self) -> str | None:
        return decrypt_text(self.signing_key_encrypted) if self.signing_key_encrypted else None

    @property
    def typed_config(self) -> DeploymentConfig:
        return DeploymentConfig.model_validate(self.config or {})
