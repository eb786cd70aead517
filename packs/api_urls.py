"""Pack routes under /api/v1/ (spec/interfaces.md §7)."""

from django.urls import path, register_converter

from packs import api


class PackSlugConverter:
    """A pack slug: any text (pack-format §1), "/" and line breaks included (``path``'s
    ``.+`` stops at a newline, which a slug may hold)."""

    regex = r"[\s\S]+"

    def to_python(self, value: str) -> str:
        return value

    def to_url(self, value: str) -> str:
        return value


register_converter(PackSlugConverter, "pack_slug")

urlpatterns = [
    path("schemas/challenge-pack.v1.json", api.PackSchemaApi.as_view(), name="api-pack-schema"),
    # A pack slug is any text, "/" included (pack-format §1), so the slug routes take a
    # converter that matches "/"; Django decodes %2F before matching, so the routes with a
    # longer fixed tail come first and the converter's greed gives them the last "/versions/<n>".
    # ``packs/validate`` comes before them: its GET is the pack named "validate".
    path("workspaces/<slug:ws>/packs/validate", api.PackValidateApi.as_view(), name="api-pack-validate"),
    path("workspaces/<slug:ws>/packs", api.PackListApi.as_view(), name="api-pack-list"),
    path(
        "workspaces/<slug:ws>/packs/<pack_slug:slug>/versions/<int:number>/bundle",
        api.PackVersionBundleApi.as_view(),
        name="api-pack-version-bundle",
    ),
    path(
        "workspaces/<slug:ws>/packs/<pack_slug:slug>/versions/<int:number>",
        api.PackVersionDetailApi.as_view(),
        name="api-pack-version-detail",
    ),
    path("workspaces/<slug:ws>/packs/<pack_slug:slug>", api.PackDetailApi.as_view(), name="api-pack-detail"),
    path("workspaces/<slug:ws>/drafts", api.DraftListApi.as_view(), name="api-draft-list"),
    path(
        "workspaces/<slug:ws>/drafts/<uuid:draft_id>", api.DraftDetailApi.as_view(), name="api-draft-detail"
    ),
    path("workspaces/<slug:ws>/artifacts", api.ArtifactUploadApi.as_view(), name="api-artifact-upload"),
]
