"""Writes for tenancy: workspaces, memberships and API tokens."""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from agentclash_site.workspaces.models import ApiToken, Membership, Role, Workspace, hash_token


@dataclass(frozen=True)
class WorkspaceResult:
    workspace: Workspace
    created: bool


@transaction.atomic
def workspace_create_or_update(
    *,
    slug: str,
    name: str | None = None,
    owner: AbstractBaseUser | None = None,
    allow_private_endpoints: bool | None = None,
) -> WorkspaceResult:
    """Create the workspace, or update only the fields given (a rerun changes only those).

    Raises ``ValidationError`` (by field) for a value the model refuses, e.g. a name longer
    than 200 characters: PostgreSQL would refuse it with a ``DataError``, SQLite store it.
    """
    workspace = Workspace.objects.select_for_update().filter(slug=slug).first()
    created = workspace is None
    if workspace is None:
        workspace = Workspace(slug=slug, name=name or slug)
        if allow_private_endpoints is not None:
            workspace.allow_private_endpoints = allow_private_endpoints
        workspace.full_clean()
        workspace.save()
    else:
        changed = []
        if name is not None and name != workspace.name:
            workspace.name = name
            changed.append("name")
        if (
            allow_private_endpoints is not None
            and allow_private_endpoints != workspace.allow_private_endpoints
        ):
            workspace.allow_private_endpoints = allow_private_endpoints
            changed.append("allow_private_endpoints")
        if changed:
            workspace.full_clean()
            workspace.save(update_fields=changed)
    if owner is not None:
        membership_set_role(workspace=workspace, user=owner, role=Role.OWNER)
    return WorkspaceResult(workspace=workspace, created=created)


def membership_set_role(*, workspace: Workspace, user: AbstractBaseUser, role: str) -> Membership:
    membership, _ = Membership.objects.update_or_create(
        workspace=workspace, user=user, defaults={"role": role}
    )
    return membership


@dataclass(frozen=True)
class IssuedToken:
    token: ApiToken
    secret: str  # shown once; only its digest is stored


def token_create(
    *, user: AbstractBaseUser, workspace: Workspace | None = None, name: str = ""
) -> IssuedToken:
    """Issue a token. Raises ``ValidationError`` (by field) for a name over 100 characters."""
    secret = ApiToken.generate()
    token = ApiToken(user=user, workspace=workspace, name=name, digest=hash_token(secret), hint=secret[:10])
    token.full_clean(exclude=["user", "workspace"])  # both are saved rows already
    token.save()
    return IssuedToken(token=token, secret=secret)


def token_revoke(*, token: ApiToken) -> ApiToken:
    if token.revoked_at is None:
        token.revoked_at = timezone.now()
        token.save(update_fields=["revoked_at"])
    return token


def demo_user_get_or_create(*, username: str, password: str) -> AbstractBaseUser:
    User = get_user_model()
    user = User.objects.filter(username=username).first()
    if user is None:
        user = User.objects.create_user(username=username, password=password)
    elif not user.check_password(password):
        user.set_password(password)
        user.save(update_fields=["password"])
    return user
