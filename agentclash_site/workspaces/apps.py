from django.apps import AppConfig


class WorkspacesConfig(AppConfig):
    name = "agentclash_site.workspaces"
    label = "workspaces"
    verbose_name = "Tenancy and access"

    def ready(self) -> None:
        from agentclash_site.workspaces import schema  # noqa: F401  (registers the auth extension)
