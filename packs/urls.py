"""Pack pages (server-rendered, htmx) and signed asset downloads."""

from django.urls import path

from packs import views

urlpatterns = [
    path("packs/", views.pack_list, name="pack-list"),
    path("packs/new/", views.draft_new, name="draft-new"),
    path("packs/open/", views.draft_open_file, name="draft-open-file"),
    path("packs/<uuid:pack_id>/", views.pack_detail, name="pack-detail"),
    path("packs/<uuid:pack_id>/diff/", views.version_diff, name="version-diff"),
    path("packs/versions/<uuid:version_id>/", views.version_detail, name="version-detail"),
    path("packs/versions/<uuid:version_id>/bundle/", views.version_bundle, name="version-bundle"),
    path("packs/versions/<uuid:version_id>/new-draft/", views.version_new_draft, name="version-new-draft"),
    path("packs/drafts/<uuid:draft_id>/", views.draft_editor, name="draft-editor"),
    path("packs/drafts/<uuid:draft_id>/save/", views.draft_save, name="draft-save"),
    path("packs/drafts/<uuid:draft_id>/report/", views.draft_report, name="draft-report"),
    path("packs/drafts/<uuid:draft_id>/case/", views.draft_case_form, name="draft-case-form"),
    path("packs/drafts/<uuid:draft_id>/case/save/", views.draft_case_save, name="draft-case-save"),
    path("packs/drafts/<uuid:draft_id>/case/delete/", views.draft_case_delete, name="draft-case-delete"),
    path("packs/drafts/<uuid:draft_id>/files/", views.draft_file_upload, name="draft-file-upload"),
    path("packs/drafts/<uuid:draft_id>/files/remove/", views.draft_file_remove, name="draft-file-remove"),
    path("packs/drafts/<uuid:draft_id>/publish/", views.draft_publish, name="draft-publish"),
    path("packs/drafts/<uuid:draft_id>/delete/", views.draft_delete, name="draft-delete"),
    path("packs/assets/<uuid:asset_id>/", views.asset_download, name="asset-download"),
    # Agents: no credentials, a signed expiring token (agentclash_site.lib.signing).
    path("assets/signed/<str:token>", views.asset_signed_download, name="asset-signed"),
    path("assets/<str:token>", views.asset_signed_download, name="asset-signed-short"),
]
