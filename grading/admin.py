"""Admin for judge providers (the API key is write-only) and the model price table."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.http import HttpRequest

from agentclash_site.lib.admin import RefusedSaveAdmin, SaveRefused
from grading.models import JudgeProviderConfig, ModelPrice
from grading.services import JudgeProviderError, check_base_url, judge_provider_save


class JudgeProviderAdminForm(forms.ModelForm):
    api_key = forms.CharField(
        required=False,
        widget=forms.PasswordInput(render_value=False),
        help_text="Write-only: leave empty to keep the stored key.",
    )
    clear_api_key = forms.BooleanField(required=False)

    class Meta:
        model = JudgeProviderConfig
        fields = ["workspace", "kind", "base_url", "model"]

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        # On a change the workspace is read-only (JudgeProviderAdmin), so not in the data.
        workspace = self.instance.workspace if self.instance.workspace_id else data.get("workspace")
        if workspace is not None:
            try:
                data["base_url"] = check_base_url(
                    data.get("base_url", ""), allow_private=bool(workspace.allow_private_endpoints)
                )
            except JudgeProviderError as exc:
                raise forms.ValidationError({exc.field: exc.message}) from None
        return data


@admin.register(JudgeProviderConfig)
class JudgeProviderAdmin(RefusedSaveAdmin, admin.ModelAdmin):
    form = JudgeProviderAdminForm
    list_display = ("workspace", "kind", "base_url", "model", "key_set", "updated_at")
    list_select_related = ("workspace",)
    search_fields = ("workspace__slug",)
    # A search box, not a select of every workspace on the add page.
    autocomplete_fields = ("workspace",)

    def get_readonly_fields(self, request: HttpRequest, obj: JudgeProviderConfig | None = None) -> Any:
        # Moving the row to another workspace would hand its stored API key, and the spend on
        # it, to that workspace's judges: a provider belongs to the workspace it was made for.
        return ("workspace",) if obj is not None else ()

    @admin.display(boolean=True, description="API key set")
    def key_set(self, obj: JudgeProviderConfig) -> bool:
        return obj.has_api_key

    def save_model(self, request: HttpRequest, obj: JudgeProviderConfig, form: Any, change: bool) -> None:
        # Through the service the workspace's judge settings page calls: it stamps
        # updated_at (the admin's saves left the creation time: the list said the provider
        # was never changed) and keeps the stored key unless a new one is typed.
        data = form.cleaned_data
        try:
            saved = judge_provider_save(
                workspace=obj.workspace,
                user=request.user,
                kind=data["kind"],
                base_url=data.get("base_url", ""),
                model=data.get("model", ""),
                api_key=data.get("api_key") or None,
                clear_api_key=bool(data.get("clear_api_key")),
            )
        except JudgeProviderError as exc:  # the workspace's private-endpoint rule changed meanwhile
            raise SaveRefused(exc.message, exc.field) from None
        obj.pk = saved.pk
        obj.refresh_from_db()


@admin.register(ModelPrice)
class ModelPriceAdmin(admin.ModelAdmin):
    list_display = ("model", "input_usd_per_million", "output_usd_per_million", "updated_at")
    search_fields = ("model",)
