from django.apps import AppConfig


class WorkspacesConfig(AppConfig):
    name = "agentclash_site.workspaces"
    label = "workspaces"
    verbose_name = "Tenancy and access"

    # The OpenAPI extension of the bearer-token authentication is registered by
    # agentclash_site/urls.py (next to the schema views), not here: importing drf-spectacular
    # in ready() cost every management command ~0.3 s of start-up.
