"""``manage.py workspace create SLUG [--name N] [--owner USERNAME] [--allow-private-endpoints]``."""

from __future__ import annotations

import argparse
import re
from typing import Any

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError

from agentclash_site.lib.cli import CliError, JsonCommand
from agentclash_site.workspaces.management.commands._validation import invalid_option
from agentclash_site.workspaces.models import SLUG_PATTERN
from agentclash_site.workspaces.services import workspace_create_or_update

# The model field each option sets, for validation errors.
_OPTIONS = {"slug": "slug", "name": "--name", "allow_private_endpoints": "--allow-private-endpoints"}


class Command(JsonCommand):
    help = "Manage workspaces."

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        create = sub.add_parser("create", help="create a workspace, or update the flags given")
        create.add_argument("slug")
        create.add_argument("--name")
        create.add_argument("--owner", help="username that becomes an owner")
        create.add_argument(
            "--allow-private-endpoints",
            dest="allow_private_endpoints",
            action=argparse.BooleanOptionalAction,
            default=None,
            help="let deployments and judges reach loopback and private addresses",
        )
        self.add_json_argument(create)

    def handle(self, *args: Any, **options: Any) -> None:
        slug = options["slug"]
        if not re.fullmatch(SLUG_PATTERN, slug):
            raise CliError(
                "invalid_slug",
                "slug must match [a-z0-9][a-z0-9-]{0,62} (lower-case letters, digits and hyphens)",
                field="slug",
            )
        owner = None
        if options.get("owner"):
            owner = get_user_model().objects.filter(username=options["owner"]).first()
            if owner is None:
                raise CliError("unknown_user", f"no user named {options['owner']!r}", field="owner")
        name = options.get("name")
        if name is not None and not name.strip():
            # The model takes "   " (only "" is blank to it); a name is what the UI shows.
            raise CliError(
                "invalid", "--name: must not be blank (the workspace's display name)", field="name"
            )
        try:
            result = workspace_create_or_update(
                slug=slug,
                name=name,
                owner=owner,
                allow_private_endpoints=options.get("allow_private_endpoints"),
            )
        except ValidationError as exc:
            raise invalid_option(exc, _OPTIONS) from exc
        ws = result.workspace
        doc = {
            "workspace": {
                "slug": ws.slug,
                "name": ws.name,
                "allow_private_endpoints": ws.allow_private_endpoints,
            },
            "created": result.created,
        }
        verb = "created" if result.created else "updated"
        self.emit(
            doc,
            f"workspace {ws.slug} {verb} (name {ws.name!r}, private endpoints "
            f"{'allowed' if ws.allow_private_endpoints else 'refused'})",
        )
