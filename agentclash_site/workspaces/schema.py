"""OpenAPI description of bearer-token auth (imported by agentclash_site/urls.py, next to the schema views)."""

from drf_spectacular.extensions import OpenApiAuthenticationExtension


class BearerTokenScheme(OpenApiAuthenticationExtension):
    target_class = "agentclash_site.workspaces.auth.BearerTokenAuthentication"
    name = "bearerAuth"

    def get_security_definition(self, auto_schema):  # type: ignore[no-untyped-def]
        return {"type": "http", "scheme": "bearer", "description": "An API token: `manage.py token create`."}
