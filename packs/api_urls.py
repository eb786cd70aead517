"""Pack routes under /api/v1/ (spec/interfaces.md §7)."""

from django.urls import path

from packs import api

urlpatterns = [
    path("schemas/challenge-pack.v1.json", api.PackSchemaApi.as_view(), name="api-pack-schema"),
    path("workspaces/<slug:ws>/packs/validate", api.PackValidateApi.as_view(), name="api-pack-validate"),
    path("workspaces/<slug:ws>/packs", api.PackListApi.as_view(), name="api-pack-list"),
    path("workspaces/<slug:ws>/packs/<str:slug>", api.PackDetailApi.as_view(), name="api-pack-detail"),
    path(
        "workspaces/<slug:ws>/packs/<str:slug>/versions/<int:number>",
        api.PackVersionDetailApi.as_view(),
        name="api-pack-version-detail",
    ),
    path(
        "workspaces/<slug:ws>/packs/<str:slug>/versions/<int:number>/bundle",
        api.PackVersionBundleApi.as_view(),
        name="api-pack-version-bundle",
    ),
    path("workspaces/<slug:ws>/drafts", api.DraftListApi.as_view(), name="api-draft-list"),
    path(
        "workspaces/<slug:ws>/drafts/<uuid:draft_id>", api.DraftDetailApi.as_view(), name="api-draft-detail"
    ),
    path("workspaces/<slug:ws>/artifacts", api.ArtifactUploadApi.as_view(), name="api-artifact-upload"),
]
