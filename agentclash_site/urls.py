from django.contrib import admin
from django.http import HttpRequest, HttpResponsePermanentRedirect
from django.templatetags.static import static
from django.urls import include, path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerSplitView

from agentclash_site import api
from agentclash_site.workspaces import schema as _bearer_schema  # noqa: F401  (registers the OpenAPI auth extension)


def favicon(request: HttpRequest) -> HttpResponsePermanentRedirect:
    # resolved per request: a manifest storage names the file only after collectstatic
    return HttpResponsePermanentRedirect(static("favicon.svg"))


api_v1 = [
    path("health", api.HealthApi.as_view(), name="api-health"),
    path("workspaces", api.WorkspaceListApi.as_view(), name="api-workspace-list"),
    path("workspaces/<slug:ws>", api.WorkspaceDetailApi.as_view(), name="api-workspace-detail"),
    path("schema/", SpectacularAPIView.as_view(), name="api-schema"),
    # The split view serves its start-up script as a file (?script): the CSP runs no inline script.
    path("docs/", SpectacularSwaggerSplitView.as_view(url_name="api-schema"), name="api-docs"),
    path("redoc/", SpectacularRedocView.as_view(url_name="api-schema"), name="api-redoc"),
    path("", include("packs.api_urls")),
    path("", include("runs.api_urls")),
    re_path(r"^(?P<rest>[\s\S]*)\Z", api.api_not_found, name="api-not-found"),  # last: JSON 404
]

urlpatterns = [
    # Browsers ask for /favicon.ico on pages without a <link rel="icon"> (the API docs, raw
    # JSON): answer with the same static icon, not a 404.
    path("favicon.ico", favicon, name="favicon"),
    path("admin/", admin.site.urls),
    path("api/v1/", include(api_v1)),
    path("", include("agentclash_site.workspaces.urls")),
    path("", include("packs.urls")),
    path("", include("runs.urls")),
    path("", include("grading.urls")),
]

# An unexpected exception, or a request refused before any view (a Host outside
# ALLOWED_HOSTS): the JSON error body under /api/v1/, the HTML page elsewhere.
handler500 = "agentclash_site.api.server_error"
handler400 = "agentclash_site.api.bad_request"

# No MEDIA_URL route, not even with DEBUG: stored files (every workspace's artifacts and
# assets) are served only by the views that check access (packs.views: members' downloads
# and signed, expiring links for agents).
