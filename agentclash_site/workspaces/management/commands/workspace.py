"""``manage.py workspace create SLUG [--name N] [--owner USERNAME] [--allow-private-endpoints]``
and ``manage.py workspace member add|remove|list SLUG [USERNAME] [--role ROLE]``."""

from __future__ import annotations

import argparse
import re
from datetime import UTC
from typing import Any

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError

from agentclash_site.lib.cli import CliError, JsonCommand
from agentclash_site.workspaces.management.commands._validation import invalid_option
from agentclash_site.workspaces.models import SLUG_PATTERN, Membership, Role, Workspace
from agentclash_site.workspaces.services import (
    MembershipError,
    membership_add,
    membership_remove,
    membership_set_role,
    workspace_create_or_update,
)

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

        member = sub.add_parser("member", help="add, remove or list a workspace's members")
        member_sub = member.add_subparsers(dest="member_action", required=True)
        add = member_sub.add_parser(
            "add", help="add a user to the workspace, or change the role of a member (--role)"
        )
        add.add_argument("workspace", help="the workspace's slug")
        add.add_argument("username")
        add.add_argument("--role", help=f"{' | '.join(Role.values)} (default for a new member: editor)")
        self.add_json_argument(add)
        remove = member_sub.add_parser("remove", help="remove a member (never the last owner)")
        remove.add_argument("workspace", help="the workspace's slug")
        remove.add_argument("username")
        self.add_json_argument(remove)
        listing = member_sub.add_parser("list", help="list the members: owners, editors, viewers")
        listing.add_argument("workspace", help="the workspace's slug")
        self.add_json_argument(listing)

    def handle(self, *args: Any, **options: Any) -> None:
        if options["action"] == "member":
            {"add": self.member_add, "remove": self.member_remove, "list": self.member_list}[
                options["member_action"]
            ](options)
            return
        slug = options["slug"]
        if not re.fullmatch(SLUG_PATTERN, slug):
            raise CliError(
                "invalid_slug",
                "slug must match [a-z0-9][a-z0-9-]{0,62} (lower-case letters, digits and hyphens)",
                field="slug",
            )
        owner = None
        if options.get("owner") is not None and not options["owner"].strip():
            raise CliError(
                "invalid", "--owner is empty: give a username, or leave --owner out", field="owner"
            )
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

    # --- members ---------------------------------------------------------------------------

    @staticmethod
    def _workspace(options: dict[str, Any]) -> Workspace:
        workspace = Workspace.objects.filter(slug=options["workspace"]).first()
        if workspace is None:
            raise CliError(
                "unknown_workspace", f"no workspace with slug {options['workspace']!r}", field="workspace"
            )
        return workspace

    @staticmethod
    def _user(options: dict[str, Any]) -> Any:
        user = get_user_model().objects.filter(username=options["username"]).first()
        if user is None:
            raise CliError("unknown_user", f"no user named {options['username']!r}", field="username")
        return user

    @staticmethod
    def _refused(exc: MembershipError) -> CliError:
        # The services name the member they refuse as "member"; here it is the USERNAME argument.
        field = "username" if exc.field == "member" else exc.field
        choices = list(Role.values) if exc.code == "invalid_role" else None
        return CliError(exc.code, exc.message, field=field, choices=choices)

    @staticmethod
    def _member_doc(membership: Membership) -> dict[str, Any]:
        return {
            "username": membership.user.get_username(),
            "role": membership.role,
            "since": membership.created_at.astimezone(UTC).isoformat().replace("+00:00", "Z"),
        }

    def member_add(self, options: dict[str, Any]) -> None:
        workspace, user = self._workspace(options), self._user(options)
        role = options.get("role")
        existing = Membership.objects.filter(workspace=workspace, user=user).first()
        try:
            if existing is None:
                membership = membership_add(workspace=workspace, user=user, role=role or Role.EDITOR)
            elif role is not None:
                membership = membership_set_role(workspace=workspace, user=user, role=role)
            else:
                membership = existing
        except MembershipError as exc:
            raise self._refused(exc) from exc
        name = user.get_username()
        if existing is None:
            text = f"{name} added to {workspace.slug} as {membership.role}"
        elif existing.role == membership.role:
            text = f"{name} is already a member of {workspace.slug} ({membership.role})"
        else:
            text = f"{name} is now {membership.role} of {workspace.slug} (was {existing.role})"
        doc = {
            "workspace": workspace.slug,
            "member": self._member_doc(membership),
            "created": existing is None,
        }
        self.emit(doc, text)

    def member_remove(self, options: dict[str, Any]) -> None:
        workspace, user = self._workspace(options), self._user(options)
        membership = Membership.objects.filter(workspace=workspace, user=user).first()
        try:
            membership_remove(workspace=workspace, user=user)
        except MembershipError as exc:
            raise self._refused(exc) from exc
        assert membership is not None  # the service refuses a non-member
        doc = {"workspace": workspace.slug, "removed": self._member_doc(membership)}
        self.emit(doc, f"{user.get_username()} ({membership.role}) removed from {workspace.slug}")

    def member_list(self, options: dict[str, Any]) -> None:
        workspace = self._workspace(options)
        members = [self._member_doc(m) for m in Membership.objects.for_members_page(workspace)]
        doc = {"workspace": workspace.slug, "members": members}
        text = "\n".join(f"{m['username']}\t{m['role']}\tsince {m['since'][:10]}" for m in members)
        self.emit(doc, text or f"{workspace.slug} has no members")
