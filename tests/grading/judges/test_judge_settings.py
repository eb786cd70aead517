"""The judge provider settings page, its scoping, the admin, the price table and the models."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django import forms
from django.contrib import admin
from django.test import Client

from grading.models import JudgeProviderConfig, ModelPrice, price_table
from grading.pricing import DEFAULT_PRICES
from tests.clients import logged_in as client_for

URL = "/workspaces/acme/judge/"


@pytest.mark.django_db
def test_outsider_404_viewer_403_anonymous_redirected(personas):
    assert client_for(personas.outsider).get(URL).status_code == 404
    assert client_for(personas.outsider).post(URL, {"kind": "openai"}).status_code == 404
    assert client_for(personas.viewer).get(URL).status_code == 403
    assert client_for(personas.viewer).post(URL, {"kind": "openai"}).status_code == 403
    assert Client().get(URL).status_code == 302
    assert not JudgeProviderConfig.objects.exists()


@pytest.mark.django_db
def test_editor_saves_key_write_only(personas):
    c = client_for(personas.editor)
    assert c.get(URL).status_code == 200
    r = c.post(
        URL,
        {
            "kind": "anthropic",
            "base_url": "https://api.anthropic.com",
            "model": "claude-haiku-4-5",
            "api_key": "sk-secret-123",
        },
    )
    assert r.status_code == 302
    cfg = JudgeProviderConfig.objects.get(workspace=personas.workspace)
    assert cfg.kind == "anthropic" and cfg.api_key() == "sk-secret-123"
    assert "sk-secret-123" not in cfg.api_key_encrypted
    page = c.get(URL).content.decode()
    assert "sk-secret-123" not in page and "stored (write-only" in page
    # saving without a key keeps the stored one; clear removes it
    c.post(URL, {"kind": "anthropic", "model": "claude-sonnet-4-5"})
    cfg.refresh_from_db()
    assert cfg.api_key() == "sk-secret-123" and cfg.model == "claude-sonnet-4-5"
    c.post(URL, {"kind": "anthropic", "clear_api_key": "on"})
    cfg.refresh_from_db()
    assert not cfg.has_api_key


@pytest.mark.django_db
def test_private_base_url_needs_the_workspace_flag(personas):
    c = client_for(personas.owner)
    r = c.post(URL, {"kind": "openai", "base_url": "http://127.0.0.1:8765/v1"})
    assert r.status_code == 400 and "allow private endpoints" in r.content.decode()
    assert not JudgeProviderConfig.objects.exists()
    r = c.post(URL, {"kind": "openai", "base_url": "http://169.254.169.254/v1"})
    assert r.status_code == 400
    personas.workspace.allow_private_endpoints = True
    personas.workspace.save()
    assert c.post(URL, {"kind": "openai", "base_url": "http://127.0.0.1:8765/v1"}).status_code == 302
    cfg = JudgeProviderConfig.objects.get()
    assert cfg.provider_config().allow_private is True and cfg.provider_config().base_url.endswith(":8765/v1")
    assert "api_key" not in repr(cfg.provider_config())


@pytest.mark.django_db
def test_delete_and_other_workspace_untouched(personas):
    JudgeProviderConfig.objects.create(workspace=personas.other_workspace, kind="openai")
    c = client_for(personas.owner)
    c.post(URL, {"kind": "openai"})
    c.post(URL, {"action": "delete"})
    assert list(JudgeProviderConfig.objects.values_list("workspace__slug", flat=True)) == ["globex"]


@pytest.mark.django_db
def test_price_table_is_seeded_and_editable():
    assert set(ModelPrice.objects.values_list("model", flat=True)) >= set(DEFAULT_PRICES)
    for name, price in DEFAULT_PRICES.items():
        row = ModelPrice.objects.get(model=name)
        assert float(row.input_usd_per_million) == price.input_per_million
        assert float(row.output_usd_per_million) == price.output_per_million
    ModelPrice.objects.filter(model="gpt-4o-mini").update(input_usd_per_million=Decimal("1"))
    ModelPrice.objects.create(model="local-llm", input_usd_per_million=0, output_usd_per_million=0)
    table = price_table()
    assert table.cost("gpt-4o-mini-2024-07-18", 1_000_000, 0) == pytest.approx(1.0)
    assert table.cost("local-llm", 10, 10) == 0.0 and table.cost("unknown", 1, 1) is None


def test_admin_registration():
    assert admin.site.is_registered(JudgeProviderConfig) and admin.site.is_registered(ModelPrice)
    form = admin.site._registry[JudgeProviderConfig].form
    assert "api_key_encrypted" not in form.base_fields and "api_key" in form.base_fields
    assert isinstance(form.base_fields["api_key"].widget, forms.PasswordInput)


@pytest.mark.django_db
def test_admin_pages_render_without_the_key(personas, admin_client):
    cfg = JudgeProviderConfig.objects.create(workspace=personas.workspace, kind="openai")
    cfg.set_api_key("sk-admin-secret")
    cfg.save()
    page = admin_client.get(f"/admin/grading/judgeproviderconfig/{cfg.pk}/change/")
    assert page.status_code == 200 and "sk-admin-secret" not in page.content.decode()
    assert admin_client.get("/admin/grading/modelprice/").status_code == 200
