"""``manage.py demo setup``: the idempotent demo of ``make run``.

Creates the demo user and workspace, then runs each app's demo step (publish the demo pack,
create deployments, launch demo runs). Safe to run any number of times.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.utils.module_loading import import_string

from agentclash_site.lib.cli import JsonCommand
from agentclash_site.workspaces.models import Role
from agentclash_site.workspaces.services import (
    demo_user_get_or_create,
    membership_set_role,
    workspace_create_or_update,
)

DEMO_USERNAME = "demo"
DEMO_PASSWORD = "demo-password"  # printed for the newcomer; a local demo only
DEMO_WORKSPACE = "demo"

# Later steps, each ``setup(*, workspace, user, stdout) -> None``; run in order.
DEMO_STEPS: list[str] = getattr(settings, "AGENTCLASH_DEMO_STEPS", [])


class Command(JsonCommand):
    help = "Set up the demo user, workspace and data (idempotent)."

    def add_arguments(self, parser: Any) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        sub.add_parser("setup", help="create or refresh the demo")

    def handle(self, *args: Any, **options: Any) -> None:
        user = demo_user_get_or_create(username=DEMO_USERNAME, password=DEMO_PASSWORD)
        if not user.is_staff:
            user.is_staff = True
            user.is_superuser = True
            user.save(update_fields=["is_staff", "is_superuser"])
        result = workspace_create_or_update(slug=DEMO_WORKSPACE, name="Demo", allow_private_endpoints=True)
        membership_set_role(workspace=result.workspace, user=user, role=Role.OWNER)
        for dotted in DEMO_STEPS:
            import_string(dotted)(workspace=result.workspace, user=user, stdout=self.stdout)
        base = settings.PUBLIC_BASE_URL
        self.stdout.write(
            "\n"
            f"  AgentClash is ready at {base}/\n"
            f"  log in as  {DEMO_USERNAME} / {DEMO_PASSWORD}   (admin console: {base}/admin/)\n"
        )
