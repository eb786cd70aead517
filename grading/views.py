"""The workspace's judge provider settings page (owners and editors only).

``/workspaces/<slug>/judge/``: outsiders get 404 (the workspace is not revealed), viewers
403. The API key is write-only: the page says whether one is stored, never what it is.
"""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from agentclash_site.workspaces.access import get_workspace_for_user
from grading.models import JudgeProviderConfig, ProviderKind
from grading.services import JudgeProviderError, judge_provider_delete, judge_provider_save


class JudgeProviderForm(forms.Form):
    kind = forms.ChoiceField(choices=ProviderKind.choices)
    base_url = forms.CharField(required=False, max_length=500, label="Base URL")
    model = forms.CharField(required=False, max_length=200, label="Default model")
    api_key = forms.CharField(
        required=False,
        max_length=500,
        label="API key",
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "off"}),
    )
    clear_api_key = forms.BooleanField(required=False, label="Remove the stored API key")


@login_required
@require_http_methods(["GET", "POST"])
def judge_provider_settings(request: HttpRequest, slug: str) -> HttpResponse:
    workspace = get_workspace_for_user(request, slug, write=True)
    config = JudgeProviderConfig.objects.filter(workspace=workspace).first()
    status = 200
    if request.method == "POST" and request.POST.get("action") == "delete":
        judge_provider_delete(workspace=workspace)
        messages.success(request, "Judge provider removed: judges will be NOT_EVALUATED (no_judge_provider).")
        return redirect("judge-provider", slug=workspace.slug)
    if request.method == "POST":
        form = JudgeProviderForm(request.POST)
        if form.is_valid():
            try:
                judge_provider_save(workspace=workspace, user=request.user, **form.cleaned_data)
            except JudgeProviderError as exc:
                form.add_error(exc.field, exc.message)
            else:
                messages.success(request, "Judge provider saved.")
                return redirect("judge-provider", slug=workspace.slug)
        status = 400
    else:
        initial = {"kind": ProviderKind.OPENAI}
        if config is not None:
            initial = {"kind": config.kind, "base_url": config.base_url, "model": config.model}
        form = JudgeProviderForm(initial=initial)
    context = {"workspace": workspace, "config": config, "form": form}
    return render(request, "grading/judge_provider.html", context, status=status)
