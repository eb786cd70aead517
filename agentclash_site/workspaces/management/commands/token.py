"""``manage.py token create USERNAME [--workspace SLUG] [--name N]``."""

from __future__ import annotations

import argparse
from typing import Any

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError

from agentclash_site.lib.cli import CliError, JsonCommand
from agentclash_site.workspaces.management.commands._validation import invalid_option
from agentclash_site.workspaces.models import Membership, Workspace
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
        if options.get("workspace") is not None and not options["workspace"].strip():
            # `--workspace "$WS"` with WS unset: a token for every workspace was not asked for.
            raise CliError(
                "invalid",
                "--workspace is empty: give the slug of the workspace the token is limited to, or "
                "leave --workspace out for a token that acts in all of the user's workspaces",
                field="workspace",
            )
        if options.get("workspace"):
            workspace = Workspace.objects.filter(slug=options["workspace"]).first()
            if workspace is None:
                raise CliError(
                    "unknown_workspace", f"no workspace with slug {options['workspace']!r}", field="workspace"
                )
            if not Membership.objects.filter(workspace=workspace, user=user).exists():
                # A token acts as its user: limited to a workspace they cannot see, it reaches nothing.
                raise CliError(
                    "not_a_member",
                    f"--workspace: user {user.get_username()!r} is not a member of workspace "
                    f"{workspace.slug!r}, so the token could reach nothing; add them first with "
                    f"`python manage.py workspace member add {workspace.slug} {user.get_username()}` "
                    "(--role owner|editor|viewer), on the workspace's Members page (an owner adds "
                    "them) or in the admin console",
                    field="workspace",
                )
        try:
            issued = token_create(user=user, workspace=workspace, name=options.get("name") or "")
        except ValidationError as exc:
            raise invalid_option(exc, {"name": "--name"}) from exc
        doc = {
            "token": issued.secret,
            "user": user.get_username(),
            "workspace": workspace.slug if workspace else None,
            "name": issued.token.name,
        }
        scope = f" for workspace {workspace.slug}" if workspace else ""
        self.emit(doc, f"{issued.secret}\n(token for {user.get_username()}{scope}; shown once, store it now)")
