"""Writes for tenancy: workspaces, memberships and API tokens."""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.db import models, transaction
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


class MembershipError(Exception):
    """A membership write that cannot be done; ``code`` is stable snake_case and ``field``
    names the input at fault (``member``, ``role``) when there is one."""

    def __init__(self, code: str, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.field = field


LAST_OWNER_FIX = "make another member an owner first"


def _last_owner_error(workspace: Workspace, user: AbstractBaseUser, doing: str) -> MembershipError:
    return MembershipError(
        "last_owner",
        f"{user.get_username()} is the last owner of {workspace.name}, so they cannot be {doing}: "
        f"a workspace keeps at least one owner; {LAST_OWNER_FIX}.",
        field="member",
    )


def _lock_memberships(workspace: Workspace) -> None:
    """Serialise the membership writes of one workspace. Two owners demoting each other at
    once would each see the other still an owner and both go ahead; locking the workspace's
    row makes the second wait and then count the owners the first left."""
    Workspace.objects.select_for_update().filter(pk=workspace.pk).first()


def is_last_owner(membership: Membership) -> bool:
    """Whether ``membership`` (as stored) is its workspace's only owner."""
    if membership.role != Role.OWNER:
        return False
    others = Membership.objects.filter(workspace_id=membership.workspace_id, role=Role.OWNER)
    return not others.exclude(pk=membership.pk).exists()


def _check_role(role: str) -> None:
    if role not in Role.values:
        raise MembershipError(
            "invalid_role", f"Role must be one of {', '.join(Role.values)}, not {role!r}.", field="role"
        )


@transaction.atomic
def membership_set_role(*, workspace: Workspace, user: AbstractBaseUser, role: str) -> Membership:
    """Add ``user`` with ``role``, or change the role they have. Refuses (``last_owner``) to
    demote the workspace's last owner."""
    _check_role(role)
    _lock_memberships(workspace)
    membership = Membership.objects.filter(workspace=workspace, user=user).first()
    if membership is None:
        return Membership.objects.create(workspace=workspace, user=user, role=role)
    if membership.role != role:
        if role != Role.OWNER and is_last_owner(membership):
            raise _last_owner_error(workspace, user, f"made {role}")
        membership.role = role
        membership.save(update_fields=["role"])
    return membership


@transaction.atomic
def membership_add(*, workspace: Workspace, user: AbstractBaseUser, role: str) -> Membership:
    """Add a new member; refuses (``already_member``) someone who is one already."""
    _check_role(role)
    _lock_memberships(workspace)
    existing = Membership.objects.filter(workspace=workspace, user=user).first()
    if existing is not None:
        raise MembershipError(
            "already_member",
            f"{user.get_username()} is already a member ({existing.role}); "
            "change their role in the list of members instead.",
            field="member",
        )
    return Membership.objects.create(workspace=workspace, user=user, role=role)


@transaction.atomic
def membership_remove(*, workspace: Workspace, user: AbstractBaseUser) -> None:
    """Remove ``user`` from the workspace (they may be leaving themselves). Refuses
    (``last_owner``) to remove the last owner, and (``not_a_member``) a non-member."""
    _lock_memberships(workspace)
    membership = Membership.objects.filter(workspace=workspace, user=user).first()
    if membership is None:
        raise MembershipError(
            "not_a_member", f"{user.get_username()} is not a member of {workspace.name}.", field="member"
        )
    if is_last_owner(membership):
        raise _last_owner_error(workspace, user, "removed")
    membership.delete()


def last_owner_memberships(memberships: models.QuerySet[Membership]) -> list[Membership]:
    """Those of ``memberships`` (about to be deleted, alone or with their users) whose
    workspace would be left without an owner; an empty list means the deletion is safe.
    Call it with the workspaces locked (``lock_workspaces_of``) to act on the answer."""
    going = list(memberships.filter(role=Role.OWNER).select_related("workspace", "user"))
    workspace_ids = {m.workspace_id for m in going}
    staying = set(
        Membership.objects.filter(workspace_id__in=workspace_ids, role=Role.OWNER)
        .exclude(pk__in=[m.pk for m in going])
        .values_list("workspace_id", flat=True)
    )
    return [m for m in going if m.workspace_id not in staying]


def lock_workspaces_of(memberships: models.QuerySet[Membership]) -> None:
    """Take the membership lock (see ``_lock_memberships``) of every workspace of
    ``memberships``, in id order so two such calls cannot deadlock."""
    ids = memberships.values_list("workspace_id", flat=True)
    list(Workspace.objects.select_for_update().filter(pk__in=ids).order_by("pk").values_list("pk"))


def last_owner_message(membership: Membership) -> str:
    """Why ``membership`` cannot go, for the admin's "cannot delete" list."""
    return (
        f"{membership.user.get_username()} is the last owner of workspace {membership.workspace.slug}: "
        f"a workspace keeps at least one owner; {LAST_OWNER_FIX}"
    )


def _check_owners_kept(memberships: models.QuerySet[Membership]) -> None:
    lock_workspaces_of(memberships)
    stranded = last_owner_memberships(memberships)
    if stranded:
        raise MembershipError("last_owner", "; ".join(last_owner_message(m) for m in stranded) + ".")


@transaction.atomic
def memberships_delete(*, memberships: models.QuerySet[Membership]) -> None:
    """Delete ``memberships`` together (the admin's bulk delete), or none of them when that
    would leave a workspace without an owner (``last_owner``)."""
    _check_owners_kept(memberships)
    memberships.delete()


@transaction.atomic
def users_delete(*, users: models.QuerySet[AbstractBaseUser]) -> None:
    """Delete ``users`` (their memberships and tokens go with them), or none of them when
    that would leave a workspace without an owner (``last_owner``)."""
    _check_owners_kept(Membership.objects.filter(user__in=users))
    users.delete()


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
