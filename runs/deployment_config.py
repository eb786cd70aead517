"""The typed shape of ``Deployment.config`` (spec/agent-protocol.md "Deployment fields")."""

from __future__ import annotations

import re
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, field_validator

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
# What an HTTP header value cannot carry (a tab it can): refused when a deployment is saved
# (runs.services.deployments, not here: a config stored before must still load, and its calls
# end config_error invalid_header, runs.executors.base).
HEADER_VALUE_UNSAFE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")
_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,100}$")


class DeploymentConfig(BaseModel):
    """The typed shape of ``Deployment.config``.

    Model parameters and ``system_prompt`` apply to ``openai_chat`` only (the hosted agent
    owns its prompt); ``extra_headers`` apply to every kind that makes calls. The config is
    free (agent-protocol.md): any other key of an ``openai_chat`` deployment is a request
    parameter sent as given (``frequency_penalty``, ``response_format``, ``top_k``, ...),
    like the members of ``extra_body``; a key close to a known one (``temprature``) is
    refused as a typo (``runs.services.deployments.clean_config``), not sent and ignored.
    """

    model_config = ConfigDict(extra="allow", frozen=True)

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
        params: dict[str, Any] = {**self.extra_body, **(self.model_extra or {})}
        for key in ("temperature", "top_p", "max_tokens", "seed", "stop"):
            value = getattr(self, key)
            if value is not None:
                params[key] = value
        return params

    def as_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_defaults=True)
