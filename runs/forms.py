"""Forms of the runs pages. They only parse input; the services validate and write."""

from __future__ import annotations

import json
import re
from typing import Any

from django import forms
from django.urls import reverse

from agentclash_site.lib.params import whole_number
from grading.engine import jsontext
from runs.lane_settings import shown_headers
from runs.models import (
    MAX_ATTEMPTS_LIMIT,
    MAX_IN_FLIGHT_LIMIT,
    MAX_TIMEOUT_SECONDS,
    Deployment,
    DeploymentKind,
    EvidenceLevel,
)
from runs.services.deployments import DeploymentError, url_field_name
from runs.services.runs import MAX_REPETITIONS


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
        help_text="One per line, Name: value. The deployment's page shows them, the values of"
        " headers named like credentials (X-Api-Key, X-Auth-Token) as …; a key goes best in the"
        " secret.",
    )

    # The order templates/runs/deployments/form.html shows the fields in.
    PAGE_ORDER = (
        "name",
        "kind",
        "endpoint_url",
        "base_url",
        "model",
        "system_prompt",
        "temperature",
        "max_tokens",
        "extra_body",
        "secret",
        "clear_secret",
        "max_in_flight",
        "timeout_seconds",
        "max_attempts",
        "evidence_level",
        "extra_headers",
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
            "extra_body": json.dumps(config["extra_body"], ensure_ascii=False)
            if config.get("extra_body")
            else "",
            "extra_headers": "\n".join(f"{k}: {v}" for k, v in (config.get("extra_headers") or {}).items()),
        }
        return initial

    @classmethod
    def config_rows(cls, deployment: Deployment) -> list[tuple[str, str]]:
        """``(label, text)`` of each config value, for the detail page: the form's label and
        the text its field shows for the keys it edits (JSON, header lines), ``config.<key>``
        and JSON for any other key (set with the CLI's ``--config``)."""
        config = deployment.config or {}
        initial = cls.initial_for(deployment)
        rows = []
        for key, value in config.items():
            if key == "extra_headers" and isinstance(value, dict):
                rows.append((str(cls.base_fields[key].label), shown_headers(value)))
            elif key in FORM_CONFIG_KEYS:
                field = cls.base_fields[key]
                rows.append((str(field.label or key.replace("_", " ").capitalize()), str(initial[key])))
            else:
                text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
                rows.append((f"config.{key}", text))
        return rows

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
        # A trace import is never called: a secret typed before the kind changed is not stored.
        secret = data.get("secret") if kind != DeploymentKind.TRACE_IMPORT else ""
        if self.deployment is None:
            fields["secret"] = secret or None
        elif data.get("clear_secret"):
            fields["secret"] = None
        elif secret:
            fields["secret"] = secret
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
        text = _labelled(exc.message, exc.field or "", field, self.fields[field])
        if exc.code == "deployment_name_exists":
            # The service's words name the clash; the page says the way out too.
            text = f"{text[:1].upper()}{text[1:]}: choose another name, or open that deployment and edit it."
        self.add_error(field, text)


def focus_first_error(form: forms.Form, order: Any = None) -> None:
    """Put ``autofocus`` on the first field (in ``order``, the page's order of the fields;
    the form's by default) named in an error: a refused post opened at the top of the page,
    the keyboard and screen reader user left to find what was wrong."""
    for name in order or form.fields:
        if name in form.errors and name in form.fields:
            form.fields[name].widget.attrs["autofocus"] = True
            return


def _labelled(message: str, api_name: str, field: str, form_field: forms.Field) -> str:
    """The service's message with the field's label in place of the API's field name it
    starts with: "endpoint_url must be..." reads "Endpoint URL must be..." on the page (the
    API and the CLI keep the names their callers send)."""
    label = str(form_field.label or field.replace("_", " ").capitalize())
    for name in (api_name, field):
        if name and message.startswith(name) and message[len(name) : len(name) + 1] in (" ", ":"):
            return label + message[len(name) :]
    return message


# --- the new-run form -------------------------------------------------------------------------

# The new-run form lists one pack's versions (newest first) and this many of the workspace's
# deployments (by name) as checkboxes; more are chosen by name. It listed every version of
# every pack and every deployment: megabytes of HTML for 2,000 packs and 1,000 deployments.
VERSIONS_LISTED = 50
DEPLOYMENTS_LISTED = 20
_NAME_SEPARATORS = re.compile(r"[,\n]")


def _names(text: str) -> list[str]:
    """The names of a comma- (or line-) separated field, trimmed, each once, in order."""
    return list(dict.fromkeys(n.strip() for n in _NAME_SEPARATORS.split(text or "") if n.strip()))


def last_name(text: str) -> str:
    """The name being typed in a comma-separated field (what its suggestions match)."""
    return _NAME_SEPARATORS.split(text or "")[-1].strip()


class RunForm(forms.Form):
    """A pack, one of its versions and input sets, deployments, repetitions, a name.

    ``pack_version`` and ``deployments`` take ids (what the API's and scripts' posts send,
    any version or deployment of the workspace). The page types the pack's slug (``pack``,
    with suggestions), then picks among that pack's versions; it ticks deployments among the
    first listed and types any others by name (``deployment_names``). Each name is checked on
    submit and an unknown one is named in the error of its field.
    """

    pack = forms.CharField(
        required=False,
        max_length=200,
        label="Pack",
        help_text="Type part of a pack's slug and pick it; its versions are listed next.",
    )
    pack_version = IdChoiceField(queryset=None, label="Pack version", empty_label=None, required=False)  # type: ignore[arg-type]
    # The selected version's sets (refreshed with htmx when the version changes; without
    # JavaScript a set of another version is refused and the list shows the new version's).
    input_set = forms.ChoiceField(
        required=False,
        label="Input set",
        help_text="The cases to run, from the selected pack version.",
    )
    deployments = IdMultipleChoiceField(
        queryset=None,  # type: ignore[arg-type]
        widget=forms.CheckboxSelectMultiple,
        label="Deployments",
        required=False,
    )
    deployment_names = forms.CharField(
        required=False,
        max_length=10_000,
        label="Other deployments, by name",
        help_text="Names separated by commas; suggestions appear as you type.",
    )
    repetitions = forms.IntegerField(
        min_value=1,
        max_value=MAX_REPETITIONS,
        initial=1,
        label="Repetitions",
        # Django's "Ensure this value is less than or equal to 10." named neither the field
        # nor what it means; each message says both.
        error_messages={
            key: f"Repetitions must be a whole number from 1 to {MAX_REPETITIONS}: each case runs"
            " this many times on each deployment."
            for key in ("required", "invalid", "min_value", "max_value")
        },
    )
    name = forms.CharField(required=False, max_length=200, label="Name")

    def __init__(self, *args: Any, workspace: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        from packs.models import InputSet, Pack, PackVersion

        self.workspace = workspace
        self.versions = (
            PackVersion.objects.filter(pack__workspace=workspace)
            .select_related("pack")
            .defer("manifest", "source", "pack__description")
        )
        self.fields["pack_version"].queryset = self.versions  # type: ignore[attr-defined]
        deployments = Deployment.objects.for_workspace(workspace)
        self.fields["deployments"].queryset = deployments  # type: ignore[attr-defined]

        self.chosen_version = self._version(self._raw("pack_version"))
        typed = (self._raw("pack") or "").strip()
        self.typed_pack = typed
        if typed:
            self.pack_obj = Pack.objects.filter(workspace=workspace, slug=typed).first()
        elif self.chosen_version is not None:
            self.pack_obj = self.chosen_version.pack
        elif not self.is_bound:
            first = self.versions.order_by("pack__slug", "-number").first()
            self.pack_obj = first.pack if first else None
        else:
            self.pack_obj = None
        if self.pack_obj is not None and not typed:
            # Shown in the pack field: the pack of the version a link or a script chose.
            if self.is_bound:
                self.data = self.data.copy()
                self.data["pack"] = self.pack_obj.slug
            else:
                self.initial["pack"] = self.pack_obj.slug

        listed = self._listed_versions()
        if self.chosen_version is None or self.chosen_version.pack_id != getattr(self.pack_obj, "id", None):
            self.shown_version = listed[0] if listed else None
        else:
            self.shown_version = self.chosen_version
        self.fields["pack_version"].widget.choices = [(v.id, f"v{v.number}") for v in listed]
        self._suggest("pack", "pack_suggestions", several=False)
        self._suggest("deployment_names", "deployment_suggestions", several=True)
        # The version's input sets load from templates/runs/run_new.html's wrapper of the
        # version fields (a change bubbling up to it), not from this select: a select swapped in
        # a moment ago is not yet processed by htmx, and a quick arrow key's change was lost.
        sets = (
            InputSet.objects.filter(version=self.shown_version).order_by("position")
            if self.shown_version
            else []
        )
        choices = [(s.key, s.key if s.name in ("", s.key) else f"{s.name} ({s.key})") for s in sets]
        self.fields["input_set"].choices = choices or [("", "none: one empty case per challenge")]  # type: ignore[attr-defined]
        if self.shown_version is not None:
            # Django's "Select a valid choice. set2 is not one of the available choices." named
            # neither the field nor why (a set of another version, chosen before the version
            # changed without JavaScript).
            shown = f"{self.shown_version.pack.slug} v{self.shown_version.number}"
            self.fields["input_set"].error_messages["invalid_choice"] = (
                f"Input set %(value)s is not in {shown}: choose one of its input sets (listed now)."
            )

        first = list(deployments.values_list("id", "name")[: DEPLOYMENTS_LISTED + 1])
        self.more_deployments = len(first) > DEPLOYMENTS_LISTED
        listed_ids = {pk for pk, _ in first[:DEPLOYMENTS_LISTED]}
        ticked = [v for v in self._raw_list("deployments") if _is_id(v) and int(v) not in listed_ids]
        extra = list(deployments.filter(pk__in=ticked).values_list("id", "name")) if ticked else []
        self.fields["deployments"].widget.choices = sorted(
            first[:DEPLOYMENTS_LISTED] + extra, key=lambda row: row[1]
        )

    def _suggest(self, name: str, partial: str, *, several: bool) -> None:
        """Type-ahead attributes of a name field (templates/_suggest_field.html)."""
        attrs = {
            "autocomplete": "off",
            "spellcheck": "false",
            "data-suggest-input": True,
            "data-suggest-no-submit": True,
            "hx-get": f"{reverse('run-new')}?partial={partial}",
            "hx-trigger": "input changed delay:200ms",
            "hx-target": f"#id_{name}-suggestions",
            "hx-params": name,
            "hx-sync": "this:queue last",
        }
        if several:
            attrs["data-suggest-several"] = True
        self.fields[name].widget.attrs.update(attrs)

    def _raw(self, name: str) -> Any:
        return self.data.get(name) if self.is_bound else self.initial.get(name)

    def _raw_list(self, name: str) -> list[Any]:
        return self.data.getlist(name) if self.is_bound and hasattr(self.data, "getlist") else []

    def _version(self, value: Any) -> Any:
        """The workspace's version of id ``value``, or None."""
        if value in (None, "") or not isinstance(value, str | int) or not _is_id(value):
            return None
        return self.versions.filter(pk=value).first()

    def _listed_versions(self) -> list[Any]:
        """The versions the select offers: the pack's newest, and the chosen one if older."""
        if self.pack_obj is None:
            return []
        listed = list(self.versions.filter(pack=self.pack_obj).order_by("-number")[:VERSIONS_LISTED])
        chosen = self.chosen_version
        if chosen is not None and chosen.pack_id == self.pack_obj.id and chosen not in listed:
            listed.append(chosen)
        return listed

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        self._clean_pack(data)
        self._clean_deployments(data)
        return data

    def _clean_pack(self, data: dict[str, Any]) -> None:
        version = data.get("pack_version")
        if self.typed_pack and self.pack_obj is None:
            self.add_error(
                "pack",
                f"No pack named {self.typed_pack!r} in this workspace: type part of its slug "
                "and pick one of the suggestions.",
            )
            # No pack, no sets to choose from: the set's own error would only repeat this one.
            self.errors.pop("input_set", None)
        elif "pack_version" in self.errors:
            return
        elif version is None and self.pack_obj is not None:
            self.add_error(
                "pack_version", f"Choose a version of {self.pack_obj.slug}: its versions are listed now."
            )
        elif version is None:
            self.add_error("pack_version", self.fields["pack_version"].error_messages["required"])
        elif self.pack_obj is not None and version.pack_id != self.pack_obj.id:
            self.add_error(
                "pack_version",
                f"v{version.number} is a version of {version.pack.slug}, not {self.pack_obj.slug}: "
                f"choose one of {self.pack_obj.slug}'s versions (listed now).",
            )

    def _clean_deployments(self, data: dict[str, Any]) -> None:
        chosen = list(data.get("deployments") or [])
        names = _names(data.get("deployment_names", ""))
        if names:
            found = {d.name: d for d in self.fields["deployments"].queryset.filter(name__in=names)}  # type: ignore[attr-defined]
            missing = [n for n in names if n not in found]
            if missing:
                self.add_error(
                    "deployment_names",
                    "; ".join(f"No deployment named {n!r} in this workspace" for n in missing)
                    + ": fix the name or pick one of the suggestions.",
                )
            chosen += [found[n] for n in names if n in found and found[n] not in chosen]
        if not chosen and "deployment_names" not in self.errors and "deployments" not in self.errors:
            self.add_error(
                "deployments",
                f"{self.fields['deployments'].error_messages['required']} Tick a deployment"
                + (" or type its name." if self.more_deployments else "."),
            )
        data["deployments"] = chosen
