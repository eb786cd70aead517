"""Runs app routes under /api/v1/ (spec/interfaces.md §7). One list per resource."""

from django.urls import path

from runs.api import compare as compare_api
from runs.api import deployments
from runs.api import runs as run_api

deployment_patterns = [
    path(
        "workspaces/<slug:ws>/deployments",
        deployments.DeploymentListApi.as_view(),
        name="api-deployment-list",
    ),
    path(
        "workspaces/<slug:ws>/deployments/<uuid:deployment_id>",
        deployments.DeploymentDetailApi.as_view(),
        name="api-deployment-detail",
    ),
    path(
        "workspaces/<slug:ws>/deployments/<uuid:deployment_id>/rotate-signing-key",
        deployments.DeploymentRotateKeyApi.as_view(),
        name="api-deployment-rotate-key",
    ),
    path(
        "workspaces/<slug:ws>/deployments/<uuid:deployment_id>/test",
        deployments.DeploymentTestApi.as_view(),
        name="api-deployment-test",
    ),
]

_run = "workspaces/<slug:ws>/runs/<uuid:run_id>"
run_patterns = [
    path("workspaces/<slug:ws>/runs", run_api.RunListApi.as_view(), name="api-run-list"),
    path(_run, run_api.RunDetailApi.as_view(), name="api-run-detail"),
    path(f"{_run}/cases", run_api.RunCaseListApi.as_view(), name="api-run-cases"),
    path(f"{_run}/cases/<int:case_id>", run_api.RunCaseDetailApi.as_view(), name="api-run-case"),
    path(f"{_run}/results", run_api.RunResultsApi.as_view(), name="api-run-results"),
    path(f"{_run}/cancel", run_api.RunCancelApi.as_view(), name="api-run-cancel"),
    path(f"{_run}/retry-failed", run_api.RunRetryFailedApi.as_view(), name="api-run-retry-failed"),
    path(f"{_run}/rescore", run_api.RunRescoreApi.as_view(), name="api-run-rescore"),
    path(f"{_run}/export", run_api.RunExportApi.as_view(), name="api-run-export"),
]

urlpatterns = [
    *deployment_patterns,
    *run_patterns,
    path("workspaces/<slug:ws>/compare", compare_api.CompareApi.as_view(), name="api-compare"),
]
