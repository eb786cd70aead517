"""Runs app routes under /api/v1/ (spec/interfaces.md §7). One list per resource."""

from django.urls import path

from runs.api import compare as compare_api
from runs.api import deployments

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

urlpatterns = [
    *deployment_patterns,
    path("workspaces/<slug:ws>/compare", compare_api.CompareApi.as_view(), name="api-compare"),
]
