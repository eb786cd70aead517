"""Runs app pages (server-rendered, htmx). One list per resource."""

from django.urls import path

from runs.views import deployments

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

urlpatterns = [*deployment_patterns]
