"""``manage.py token create USERNAME [--workspace SLUG] [--name N]``."""

from __future__ import annotations

import argparse
from typing import Any

from django.contrib.auth import get_user_model

from agentclash_site.lib.cli import CliError, JsonCommand
from agentclash_site.workspaces.models import Workspace
from agentclash_site.workspaces.services import token_create


class Command(JsonCommand):
    help = "Manage API tokens."

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        create = sub.add_parser("create", help="issue a token; the secret is printed this once")
        create.add_argument("username")
        create.add_argument("--workspace", help="limit the token to this workspace")
        create.add_argument("--name", default="")
        self.add_json_argument(create)

    def handle(self, *args: Any, **options: Any) -> None:
        user = get_user_model().objects.filter(username=options["username"]).first()
        if user is None:
            raise CliError("unknown_user", f"no user named {options['username']!r}", field="username")
        workspace = None
        if options.get("workspace"):
            workspace = Workspace.objects.filter(slug=options["workspace"]).first()
            if workspace is None:
                raise CliError(
                    "unknown_workspace", f"no workspace with slug {options['workspace']!r}", field="workspace"
                )
        issued = token_create(user=user, workspace=workspace, name=options.get("name") or "")
        doc = {
            "token": issued.secret,
            "user": user.get_username(),
            "workspace": workspace.slug if workspace else None,
            "name": issued.token.name,
        }
        scope = f" for workspace {workspace.slug}" if workspace else ""
        self.emit(doc, f"{issued.secret}\n(token for {user.get_username()}{scope}; shown once, store it now)")
