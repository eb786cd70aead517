"""Admin console for the runs app. Secrets and signing keys are never shown or editable."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import unquote_plus, urlsplit, urlunsplit

from django import forms
from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from agentclash_site.lib.admin import (
    DeleteRefused,
    RefusedDeleteAdmin,
    RefusedSaveAdmin,
    SaveRefused,
    SlugFilter,
    refused_delete,
)
from runs.lane_settings import is_credential_name
from runs.models import Deployment, RunLane

# Shown in place of a stored credential: the value of each ``config.extra_headers`` header
# (an x-api-key is as much a credential as the secret) and of each URL query parameter
# named like one (``?code=``, ``api_key``: runs.lane_settings). Posted back as shown, the
# stored value is kept; typed over, the new value is saved.
HIDDEN = "(hidden)"


def _query_pairs(url: str) -> tuple[Any, list[tuple[str, str, str]]]:
    parts = urlsplit(url)
    pairs = [pair.partition("=") for pair in parts.query.split("&")] if parts.query else []
    return parts, pairs


def _is_credential(name: str, sep: str) -> bool:
    return bool(sep) and is_credential_name(unquote_plus(name))


def _masked_url(url: str) -> str:
    try:
        parts, pairs = _query_pairs(url)
    except ValueError:
        return url
    if not any(_is_credential(name, sep) for name, sep, _ in pairs):
        return url
    query = "&".join(
        f"{name}={HIDDEN}" if _is_credential(name, sep) else f"{name}{sep}{value}"
        for name, sep, value in pairs
    )
    return urlunsplit(parts._replace(query=query))


def _unmasked_url(posted: str, stored: str) -> str:
    """``posted`` with each ``name=(hidden)`` given the stored value of that parameter (the
    n-th of that name for the n-th); ValidationError names one the stored URL lacks."""
    try:
        parts, pairs = _query_pairs(posted)
        stored_values: dict[str, list[str]] = {}
        for name, _, value in _query_pairs(stored)[1]:
            stored_values.setdefault(name, []).append(value)
    except ValueError:
        return posted  # the service's check names the broken URL
    if not any(sep and value == HIDDEN for _, sep, value in pairs):
        return posted
    out, seen = [], {name: 0 for name, _, _ in pairs}
    for name, sep, value in pairs:
        if sep and value == HIDDEN:
            kept = stored_values.get(name, [])
            if seen[name] >= len(kept):
                raise forms.ValidationError(
                    f"the query parameter {name} shows {HIDDEN} but has no stored value: type its value"
                )
            value = kept[seen[name]]
        seen[name] += 1
        out.append(f"{name}{sep}{value}")
    return urlunsplit(parts._replace(query="&".join(out)))


def _masked_config(config: Any) -> Any:
    headers = config.get("extra_headers") if isinstance(config, dict) else None
    if not isinstance(headers, dict) or not headers:
        return config
    return {**config, "extra_headers": dict.fromkeys(headers, HIDDEN)}


def _unmasked_config(posted: Any, stored: Any) -> Any:
    headers = posted.get("extra_headers") if isinstance(posted, dict) else None
    if not isinstance(headers, dict) or HIDDEN not in headers.values():
        return posted
    kept = (stored.get("extra_headers") if isinstance(stored, dict) else None) or {}
    missing = [name for name, value in headers.items() if value == HIDDEN and name not in kept]
    if missing:
        raise forms.ValidationError(
            f"config.extra_headers: {missing[0]} shows {HIDDEN} but has no stored value: type its value"
        )
    restored = {name: kept[name] if value == HIDDEN else value for name, value in headers.items()}
    return {**posted, "extra_headers": restored}


class DeploymentAdminForm(forms.ModelForm):
    """The service's checks, and the credentials of the URL and config shown hidden."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.instance.pk is not None:
            self.initial["url"] = _masked_url(self.instance.url)
            self.initial["config"] = _masked_config(self.instance.config)

    def clean_url(self) -> str:
        return _unmasked_url(self.cleaned_data.get("url") or "", self.instance.url)

    def clean_config(self) -> Any:
        return _unmasked_config(self.cleaned_data.get("config"), self.instance.config)

    class Meta:
        model = Deployment
        fields = [
            "name",
            "kind",
            "url",
            "model",
            "max_in_flight",
            "timeout_seconds",
            "max_attempts",
            "evidence_level",
            "config",
        ]

    def clean(self) -> dict[str, Any]:
        """The checks of deployment_create / deployment_update (runs/services/deployments.py),
        each error on its field: the admin saves what the Deployments page would accept."""
        # Imported here: the services pull in the executors and the grading engine, which
        # every management command would otherwise import at start-up (admin autodiscover).
        from runs.services.deployments import (
            DeploymentError,
            _ensure_name_free,
            _validate_state,
            ensure_kind_may_change,
        )

        data = super().clean()
        if self.errors:
            return data  # a field Django could not parse (a number, the JSON) has its error
        try:
            data.update(_validate_state({key: data.get(key) for key in self.Meta.fields}))
            _ensure_name_free(self.instance.workspace, data["name"], exclude_pk=self.instance.pk)
            # The instance still holds the stored kind here (the form copies its values
            # onto it only after clean()).
            if data["kind"] != self.instance.kind:
                ensure_kind_may_change(self.instance)
        except DeploymentError as exc:
            field = _form_field(exc)
            self.add_error(field if field in self.fields else None, exc.message)
        return data


def _form_field(exc: Any) -> str:
    """The form field of a DeploymentError's ``field``."""
    field = (exc.field or "").split(".")[0]  # config.x is the config field's error
    return "url" if field in ("endpoint_url", "base_url") else field


@admin.register(Deployment)
class DeploymentAdmin(RefusedSaveAdmin, RefusedDeleteAdmin, admin.ModelAdmin):
    form = DeploymentAdminForm
    list_display = [
        "name",
        "workspace",
        "kind",
        "shown_url",
        "model",
        "max_in_flight",
        "timeout_seconds",
        "max_attempts",
        "evidence_level",
        "secret_set",
        "updated_at",
    ]
    list_filter = ["kind", ("workspace__slug", SlugFilter), "evidence_level"]
    search_fields = ["name", "url", "model", "workspace__slug", "workspace__name"]
    list_select_related = ["workspace"]
    # secret_encrypted and signing_key_encrypted are deliberately absent.
    fields = [
        "public_id",
        "workspace",
        "name",
        "kind",
        "url",
        "model",
        "secret_set",
        "max_in_flight",
        "timeout_seconds",
        "max_attempts",
        "evidence_level",
        "config",
        "created_at",
        "updated_at",
    ]
    readonly_fields = ["public_id", "workspace", "secret_set", "created_at", "updated_at"]
    actions = ["delete_selected"]  # RefusedDeleteAdmin's: a refusal is a message

    @admin.display(description="url", ordering="url")
    def shown_url(self, obj: Deployment) -> str:
        return _masked_url(obj.url)

    @admin.display(description="config")
    def shown_config(self, obj: Deployment) -> str:
        return json.dumps(_masked_config(obj.config), ensure_ascii=False, sort_keys=True)

    def get_fields(self, request: HttpRequest, obj: Deployment | None = None) -> Any:
        # A staff user who may only view gets every field read-only, shown from the row
        # itself (not the form): the credentials hidden there too.
        fields = super().get_fields(request, obj)
        if obj is not None and not self.has_change_permission(request, obj):
            return [{"url": "shown_url", "config": "shown_config"}.get(name, name) for name in fields]
        return fields

    @admin.display(boolean=True, description="secret")
    def secret_set(self, obj: Deployment) -> bool:
        return obj.has_secret

    def has_add_permission(self, request: HttpRequest) -> bool:
        # The signing key is shown once at creation: create deployments on the
        # Deployments page, the API or `manage.py deployment create`.
        return False

    def get_deleted_objects(self, objs: Any, request: HttpRequest) -> tuple[Any, Any, Any, Any]:
        # Runs PROTECT the deployments they used (their lanes keep its name and settings).
        # Collected, the refusal loaded every lane, with its counters, and said the operator
        # lacked permission to delete run lanes.
        used = [d for d in objs if RunLane.objects.filter(deployment=d).exists()]
        if used:
            return refused_delete([_used_by_runs(d) for d in used])
        return super().get_deleted_objects(objs, request)

    # A run created between that check and the delete (its lane PROTECTs the deployment)
    # makes deployment_delete refuse: said as a message with the check's reason, where it
    # was a 500. Both deletes run in a transaction: nothing of a refused one stays, its
    # "deleted" log entries included.

    def delete_model(self, request: HttpRequest, obj: Deployment) -> None:
        from runs.services.deployments import DeploymentInUse, deployment_delete

        try:
            deployment_delete(deployment=obj)  # what the API and the Deployments page call
        except DeploymentInUse:
            raise DeleteRefused(_used_by_runs(obj)) from None

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Deployment]) -> None:
        for deployment in queryset.select_related("workspace"):
            self.delete_model(request, deployment)

    def save_model(self, request: HttpRequest, obj: Deployment, form: Any, change: bool) -> None:
        from runs.services.deployments import DeploymentError, deployment_update

        fields = {key: form.cleaned_data[key] for key in DeploymentAdminForm.Meta.fields}
        # The stored row, not ``obj``: the form has already copied its values onto ``obj``, so
        # the service saw no kind change and skipped its check that no unfinished run uses the
        # deployment. A run queued since clean(), or the name taken since, is refused there:
        # the page is shown again with what was typed and the reason (RefusedSaveAdmin).
        try:
            deployment_update(deployment=Deployment.objects.get(pk=obj.pk), **fields)
        except DeploymentError as exc:
            raise SaveRefused(exc.message, _form_field(exc)) from None


def _used_by_runs(deployment: Deployment) -> str:
    return f"Deployment {deployment.name} ({deployment.workspace.slug}): used by runs, whose history names it"


# Runs, lanes, items, attempts, their operations and the ops page link (runs/admin_runs.py).
from runs import admin_runs  # noqa: E402, F401
