"""Every page of the admin console renders for a superuser: each registered model's list,
add, change and delete pages, with rows of every kind present (no 500), and no page of it
is reachable without staff status."""

from __future__ import annotations

import re

import pytest
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.test import RequestFactory
from django.urls import reverse

from agentclash_site.workspaces.models import WorkerHeartbeat
from agentclash_site.workspaces.services import token_create
from grading.models import JudgeProviderConfig, ModelPrice
from packs import services
from packs.models import Draft
from runs.seeding import seed_run
from tests.clients import logged_in
from tests.packs.publish_fixtures import mental_math

pytestmark = pytest.mark.django_db


@pytest.fixture
def every_kind_of_row(personas):
    """At least one row of each registered model."""
    artifact = services.artifact_store(
        workspace=personas.workspace, data=b'{"a": 1}', filename="a.json"
    ).artifact
    services.pack_version_publish(
        workspace=personas.workspace,
        data=mental_math(asset_artifact_id=str(artifact.public_id)).encode(),
        user=personas.owner,
    )
    services.draft_create(workspace=personas.workspace, user=personas.owner, name="scratch")
    seed_run(workspace=personas.workspace, items=4, lanes=2, infra_error_rate=0.5)
    token_create(user=personas.owner, workspace=personas.workspace, name="ci")
    WorkerHeartbeat.objects.create(marker="worker-1")
    Group.objects.create(name="operators")
    JudgeProviderConfig.objects.create(workspace=personas.workspace, kind="openai", model="gpt-judge")
    ModelPrice.objects.create(model="gpt-judge", input_usd_per_million=1, output_usd_per_million=2)
    assert Draft.objects.exists()


def _pages(model, model_admin, root):
    meta = model._meta
    name = f"admin:{meta.app_label}_{meta.model_name}"
    yield reverse(f"{name}_changelist")
    yield reverse(f"{name}_add")
    request = RequestFactory().get("/admin/")
    request.user = root
    obj = model_admin.get_queryset(request).order_by("pk").first()
    assert obj is not None, f"no {meta.label} row to open"
    yield reverse(f"{name}_change", args=[obj.pk])
    yield reverse(f"{name}_delete", args=[obj.pk])
    yield reverse(f"{name}_history", args=[obj.pk])


def test_every_admin_page_renders_for_a_superuser(personas, every_kind_of_row):
    root = get_user_model().objects.create_superuser("root", password="pw-root-123")
    client = logged_in(root)
    assert client.get("/admin/").status_code == 200
    failures = []
    for model, model_admin in admin.site._registry.items():
        for url in _pages(model, model_admin, root):
            status = client.get(url).status_code
            # 403: a page the admin refuses (no add, a protected delete); never a 500.
            if status not in (200, 302, 403):
                failures.append((url, status))
    assert not failures


def test_no_admin_page_is_reachable_without_staff_status(personas, every_kind_of_row):
    root = get_user_model().objects.create_superuser("root", password="pw-root-123")
    client = logged_in(personas.owner)  # a workspace owner, not staff
    for model, model_admin in admin.site._registry.items():
        for url in _pages(model, model_admin, root):
            response = client.get(url)
            assert response.status_code == 302 and "/admin/login/" in response["Location"], url


def test_no_list_reads_a_whole_table_for_its_filters(personas, every_kind_of_row):
    """Filters on a column's values (SELECT DISTINCT) and date_hierarchy (MIN/MAX, DISTINCT
    dates) read every row on each page load. The pack list's family filter is the one kept:
    packs are few and a family is what operators filter them by."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from packs.models import Pack

    root = get_user_model().objects.create_superuser("root", password="pw-root-123")
    client = logged_in(root)
    for model in admin.site._registry:
        if model is Pack:
            continue
        url = reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")
        with CaptureQueriesContext(connection) as captured:
            assert client.get(url).status_code == 200, url
        whole = [
            q["sql"] for q in captured.captured_queries if re.search(r"DISTINCT|\bMIN\(|\bMAX\(", q["sql"])
        ]
        assert whole == [], url
