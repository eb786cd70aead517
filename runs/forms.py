"""Forms of the runs pages. They only parse input; the services validate and write."""

from __future__ import annotations

import json
from typing import Any

from django import forms

from agentclash_site.lib.params import whole_number
from grading.engine import jsontext
from runs.models import (
    MAX_ATTEMPTS_LIMIT,
    MAX_IN_FLIGHT_LIMIT,
    MAX_TIMEOUT_SECONDS,
    Deployment,
    DeploymentKind,
    EvidenceLevel,
)
from runs.services.deployments import DeploymentError, url_field_name


def _is_id(value: Any) -> bool:
    """Whether ``value`` can be a row id; anything else is refused before the query (a
    number too big for the column raised OverflowError on SQLite)."""
    try:
        whole_number(str(value))
    except ValueError:
        return False
    return True


class IdChoiceField(forms.ModelChoiceField):
    """A choice of one row by id; a value that cannot be an id is an invalid choice."""

    def to_python(self, value: Any) -> Any:
        if value not in self.empty_values and isinstance(value, str | int) and not _is_id(value):
            raise forms.ValidationError(self.error_messages["invalid_choice"], code="invalid_choice")
        return super().to_python(value)


class IdMultipleChoiceField(forms.ModelMultipleChoiceField):
    """A choice of rows by id; a value that cannot be an id is named as invalid."""

    def _check_values(self, value: Any) -> Any:
        for pk in value:
            if isinstance(pk, str | int) and not _is_id(pk):
                raise forms.ValidationError(
                    self.error_messages["invalid_pk_value"], code="invalid_pk_value", params={"pk": pk}
                )
        return super()._check_values(value)


# Config keys the form edits; any other config key of an existing deployment is kept.
FORM_CONFIG_KEYS = ("system_prompt", "temperature", "max_tokens", "extra_body", "extra_headers")


class DeploymentForm(forms.Form):
    name = forms.CharField(
        max_length=100, help_text="Unique in the workspace; runs and trace imports use it."
    )
    kind = forms.ChoiceField(choices=DeploymentKind.choices, initial=DeploymentKind.HOSTED_HTTP)
    endpoint_url = forms.CharField(
        label="Endpoint URL",
        required=False,
        max_length=2000,
        widget=forms.URLInput(
            attrs={"placeholder": "https://agent.example.com/agentclash", "inputmode": "url"}
        ),
        help_text="Each case is POSTed here as a protocol request.",
    )
    base_url = forms.CharField(
        label="Base URL",
        required=False,
        max_length=2000,
        widget=forms.URLInput(attrs={"placeholder": "https://api.openai.com/v1", "inputmode": "url"}),
        help_text="AgentClash calls {base URL}/chat/completions.",
    )
    model = forms.CharField(
        required=False, max_length=200, widget=forms.TextInput(attrs={"placeholder": "gpt-4o-mini"})
    )
    secret = forms.CharField(
        required=False,
        strip=False,
        max_length=10_000,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
        help_text="Sent as Authorization: Bearer. Stored encrypted and never shown again.",
    )
    clear_secret = forms.BooleanField(required=False, label="Remove the stored secret")
    max_in_flight = forms.IntegerField(
        label="Max in flight",
        min_value=1,
        max_value=MAX_IN_FLIGHT_LIMIT,
        initial=8,
        help_text="Concurrent requests across all workers.",
    )
    timeout_seconds = forms.FloatField(
        label="Timeout (seconds)",
        min_value=0.1,
        max_value=MAX_TIMEOUT_SECONDS,
        initial=120,
    )
    max_attempts = forms.IntegerField(
        label="Max attempts",
        min_value=1,
        max_value=MAX_ATTEMPTS_LIMIT,
        initial=3,
        help_text="Counts every attempt: 3 is the first and 2 retries of infra errors.",
    )
    evidence_level = forms.ChoiceField(choices=EvidenceLevel.choices, initial=EvidenceLevel.STRUCTURED)
    system_prompt = forms.CharField(
        label="System prompt", required=False, widget=forms.Textarea(attrs={"rows": 3})
    )
    temperature = forms.FloatField(required=False, min_value=0, max_value=2)
    max_tokens = forms.IntegerField(label="Max tokens", required=False, min_value=1)
    extra_body = forms.CharField(
        label="Extra request parameters (JSON object)",
        required=False,
        widget=forms.Textarea(attrs={"rows": 2, "placeholder": '{"top_k": 40}'}),
    )
    extra_headers = forms.CharField(
        label="Extra headers",
        required=False,
        widget=forms.Textarea(attrs={"rows": 2, "placeholder": "X-Team: evals"}),
        help_text="One per line, Name: value. Not secret: they are shown on this page.",
    )

    def __init__(self, *args: Any, deployment: Deployment | None = None, **kwargs: Any) -> None:
        self.deployment = deployment
        if deployment is not None and "initial" not in kwargs and not args:
            kwargs["initial"] = self.initial_for(deployment)
        super().__init__(*args, **kwargs)
        if deployment is None:
            del self.fields["clear_secret"]
        else:
            state = "A secret is stored" if deployment.has_secret else "No secret is stored"
            self.fields[
                "secret"
            ].help_text = f"{state}. Leave empty to keep it; type a new one to replace it."

    @staticmethod
    def initial_for(deployment: Deployment) -> dict[str, Any]:
        config = deployment.config or {}
        initial: dict[str, Any] = {
            "name": deployment.name,
            "kind": deployment.kind,
            url_field_name(deployment.kind): deployment.url,
            "model": deployment.model,
            "max_in_flight": deployment.max_in_flight,
            "timeout_seconds": deployment.timeout_seconds,
            "max_attempts": deployment.max_attempts,
            "evidence_level": deployment.evidence_level,
            "system_prompt": config.get("system_prompt", ""),
            "temperature": config.get("temperature"),
            "max_tokens": config.get("max_tokens"),
            "extra_body": json.dumps(config["extra_body"]) if config.get("extra_body") else "",
            "extra_headers": "\n".join(f"{k}: {v}" for k, v in (config.get("extra_headers") or {}).items()),
        }
        return initial

    @property
    def kind_value(self) -> str:
        """The kind the form is showing fields for (posted, initial, or hosted_http)."""
        value = self.data.get("kind") if self.is_bound else self.initial.get("kind")
        return value if value in DeploymentKind.values else DeploymentKind.HOSTED_HTTP

    def clean_extra_body(self) -> dict[str, Any]:
        text = self.cleaned_data["extra_body"].strip()
        if not text:
            return {}
        try:
            value = jsontext.loads(text)
        except ValueError as exc:
            raise forms.ValidationError(f"not valid JSON: {exc}") from None
        if not isinstance(value, dict):
            raise forms.ValidationError("must be a JSON object")
        return value

    def clean_extra_headers(self) -> dict[str, str]:
        headers: dict[str, str] = {}
        for number, line in enumerate(self.cleaned_data["extra_headers"].splitlines(), 1):
            if not line.strip():
                continue
            name, sep, value = line.partition(":")
            if not sep or not name.strip():
                raise forms.ValidationError(f"line {number}: write Name: value")
            headers[name.strip()] = value.strip()
        return headers

    def service_kwargs(self) -> dict[str, Any]:
        """The cleaned data as keywords of deployment_create / deployment_update."""
        data = self.cleaned_data
        kind = data["kind"]
        config: dict[str, Any] = dict(self.deployment.config or {}) if self.deployment else {}
        for key in FORM_CONFIG_KEYS:
            config.pop(key, None)
        if kind == DeploymentKind.OPENAI_CHAT:
            for key in ("system_prompt", "temperature", "max_tokens", "extra_body"):
                if data.get(key) not in (None, "", {}):
                    config[key] = data[key]
        else:
            for key in ("system_prompt", "temperature", "max_tokens", "top_p", "seed", "stop", "extra_body"):
                config.pop(key, None)  # model settings do not apply to other kinds
        if data.get("extra_headers") and kind != DeploymentKind.TRACE_IMPORT:
            config["extra_headers"] = data["extra_headers"]
        fields: dict[str, Any] = {
            "name": data["name"],
            "kind": kind,
            "url": data.get(url_field_name(kind), "") if kind != DeploymentKind.TRACE_IMPORT else "",
            "model": data.get("model", "") if kind == DeploymentKind.OPENAI_CHAT else "",
            "max_in_flight": data["max_in_flight"],
            "timeout_seconds": data["timeout_seconds"],
            "max_attempts": data["max_attempts"],
            "evidence_level": data["evidence_level"],
            "config": config,
        }
        if self.deployment is None:
            fields["secret"] = data.get("secret") or None
        elif data.get("clear_secret"):
            fields["secret"] = None
        elif data.get("secret"):
            fields["secret"] = data["secret"]
        return fields

    def add_service_error(self, exc: DeploymentError) -> None:
        """Attach a service error to the field it names (config.x maps to the x field)."""
        field = exc.field or ""
        if field.startswith("config."):
            field = field.split(".")[1]
        if field == "url":
            field = url_field_name(self.kind_value)
        if field not in self.fields:
            self.add_error(None, exc.message)
            return
        self.add_error(field, _labelled(exc.message, exc.field or "", field, self.fields[field]))


def _labelled(message: str, api_name: str, field: str, form_field: forms.Field) -> str:
    """The service's message with the field's label in place of the API's field name it
    starts with: "endpoint_url must be..." reads "Endpoint URL must be..." on the page (the
    API and the CLI keep the names their callers send)."""
    label = str(form_field.label or field.replace("_", " ").capitalize())
    for name in (api_name, field):
        if name and message.startswith(name) and message[len(name) : len(name) + 1] in (" ", ":"):
            return label + message[len(name) :]
    return message
