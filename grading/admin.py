"""Admin for judge providers (the API key is write-only) and the model price table."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.http import HttpRequest

from grading.models import JudgeProviderConfig, ModelPrice
from grading.services import JudgeProviderError, check_base_url


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
class JudgeProviderAdmin(admin.ModelAdmin):
    form = JudgeProviderAdminForm
    list_display = ("workspace", "kind", "base_url", "model", "key_set", "updated_at")
    list_select_related = ("workspace",)
    search_fields = ("workspace__slug",)

    def get_readonly_fields(self, request: HttpRequest, obj: JudgeProviderConfig | None = None) -> Any:
        # Moving the row to another workspace would hand its stored API key, and the spend on
        # it, to that workspace's judges: a provider belongs to the workspace it was made for.
        return ("workspace",) if obj is not None else ()

    @admin.display(boolean=True, description="API key set")
    def key_set(self, obj: JudgeProviderConfig) -> bool:
        return obj.has_api_key

    def save_model(self, request: HttpRequest, obj: JudgeProviderConfig, form: Any, change: bool) -> None:
        if form.cleaned_data.get("clear_api_key"):
            obj.set_api_key("")
        elif form.cleaned_data.get("api_key"):
            obj.set_api_key(form.cleaned_data["api_key"])
        obj.updated_by = request.user  # type: ignore[assignment]
        super().save_model(request, obj, form, change)


@admin.register(ModelPrice)
class ModelPriceAdmin(admin.ModelAdmin):
    list_display = ("model", "input_usd_per_million", "output_usd_per_million", "updated_at")
    search_fields = ("model",)
