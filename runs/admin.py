"""Admin console for the runs app. Secrets and signing keys are never shown or editable."""

from __future__ import annotations

from typing import Any

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
from runs.models import Deployment, RunLane


class DeploymentAdminForm(forms.ModelForm):
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
        "url",
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
