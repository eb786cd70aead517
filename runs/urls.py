"""Runs app pages (server-rendered, htmx). One list per resource."""

from django.urls import path

from runs.views import compare, deployments, exports, ops, results
from runs.views import runs as run_views

deployment_patterns = [
    path("deployments/", deployments.deployment_list, name="deployment-list"),
    path("deployments/new/", deployments.deployment_create, name="deployment-create"),
    path("deployments/<uuid:deployment_id>/", deployments.deployment_detail, name="deployment-detail"),
    path("deployments/<uuid:deployment_id>/edit/", deployments.deployment_edit, name="deployment-edit"),
    path("deployments/<uuid:deployment_id>/delete/", deployments.deployment_delete, name="deployment-delete"),
    path(
        "deployments/<uuid:deployment_id>/rotate-signing-key/",
        deployments.deployment_rotate_key,
        name="deployment-rotate-key",
    ),
    path("deployments/<uuid:deployment_id>/test/", deployments.deployment_test, name="deployment-test"),
]

run_patterns = [
    path("runs/", run_views.run_list, name="run-list"),
    path("runs/new/", run_views.run_new, name="run-new"),
    path("runs/compare/", compare.compare, name="run-compare"),
    # The CLI prints this URL (spec/interfaces.md §6): keep it.
    path("runs/<uuid:run_id>/", run_views.run_detail, name="run-detail"),
    path("runs/<uuid:run_id>/cancel/", run_views.run_cancel, name="run-cancel"),
    path("runs/<uuid:run_id>/retry-failed/", run_views.run_retry_failed, name="run-retry-failed"),
    path("runs/<uuid:run_id>/rescore/", run_views.run_rescore, name="run-rescore"),
    path("runs/<uuid:run_id>/cases/", results.case_list, name="run-cases"),
    path("runs/<uuid:run_id>/cases/<int:item_id>/", results.case_detail, name="run-case"),
    path(
        "runs/<uuid:run_id>/cases/<int:item_id>/expectations/",
        results.case_expectations,
        name="run-case-expectations",
    ),
    path("runs/<uuid:run_id>/cases/<int:item_id>/transcript/", results.transcript, name="run-transcript"),
    path("runs/<uuid:run_id>/export/<str:fmt>/", exports.run_export, name="run-export"),
    path("runs/operations/", ops.operations, name="run-operations"),
]

urlpatterns = [*deployment_patterns, *run_patterns]
