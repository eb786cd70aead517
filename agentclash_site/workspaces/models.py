"""Tenancy: workspaces, memberships with roles, and per-user API tokens."""

from __future__ import annotations

import hashlib
import secrets
import uuid

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.db.models.functions import Concat
from django.utils import timezone

SLUG_PATTERN = r"^[a-z0-9][a-z0-9-]{0,62}$"


class Workspace(models.Model):
    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    slug = models.SlugField(max_length=63, unique=True)
    name = models.CharField(max_length=200)
    # Lets deployments and judges of this workspace reach loopback and private networks
    # (local agents, a judge on the LAN). Off by default: the outbound guard refuses them.
    allow_private_endpoints = models.BooleanField(default=False)
    created_at = models.DateTimeField(default=timezone.now)

    members = models.ManyToManyField(
        settings.AUTH_USER_MODEL, through="Membership", related_name="workspaces"
    )

    class Meta:
        ordering = ["slug"]
        constraints = [
            models.CheckConstraint(
                condition=Q(slug__regex=SLUG_PATTERN), name="workspaces_workspace_slug_format"
            ),
        ]

    def __str__(self) -> str:
        return self.slug

    # The slug is in every API URL, bookmark and CLI call naming the workspace: renaming it
    # would break them all silently. It is chosen once, on creation; the name is what changes.
    def save(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        stored = getattr(self, "_stored_slug", None)
        if not self._state.adding and stored is not None and self.slug != stored:
            raise ValueError(f"a workspace's slug never changes ({stored!r}); change its name instead")
        super().save(*args, **kwargs)
        self._stored_slug = self.slug

    @classmethod
    def from_db(cls, db, field_names, values):  # type: ignore[no-untyped-def]
        instance = super().from_db(db, field_names, values)
        instance._stored_slug = instance.__dict__.get("slug")
        return instance


class Role(models.TextChoices):
    OWNER = "owner", "Owner"
    EDITOR = "editor", "Editor"
    VIEWER = "viewer", "Viewer"


WRITE_ROLES = frozenset({Role.OWNER, Role.EDITOR})


class MembershipQuerySet(models.QuerySet):
    def for_members_page(self, workspace: Workspace) -> MembershipQuerySet:
        """The members of ``workspace`` with their users, owners first, then editors and
        viewers, each by username: one query whatever the count.

        That order is one text annotation, ``list_key`` (the role's rank digit, then the
        username), so the page can be a keyset page over it (``keyset_page`` sorts by one
        field and the id): it orders exactly as (rank, username) would."""
        rank = models.Case(
            *(models.When(role=role, then=models.Value(str(i))) for i, role in enumerate(Role.values)),
            default=models.Value(str(len(Role.values))),
        )
        return (
            self.filter(workspace=workspace)
            .select_related("user")
            .annotate(list_key=Concat(rank, "user__username", output_field=models.CharField()))
            .order_by("list_key", "id")
        )


class Membership(models.Model):
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=10, choices=Role.choices, default=Role.EDITOR)
    created_at = models.DateTimeField(default=timezone.now)

    objects = MembershipQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["workspace", "user"], name="workspaces_membership_unique"),
            models.CheckConstraint(
                condition=Q(role__in=[r.value for r in Role]), name="workspaces_membership_role_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.user} in {self.workspace} ({self.role})"

    @property
    def can_write(self) -> bool:
        return self.role in WRITE_ROLES

    @property
    def is_owner(self) -> bool:
        return self.role == Role.OWNER


TOKEN_PREFIX = "acl_"


def hash_token(raw: str) -> str:
    # Tokens carry 256 bits of randomness, so a fast hash is enough: there is nothing to
    # brute-force, and lookups stay one indexed equality match.
    return hashlib.sha256(raw.encode()).hexdigest()


class ApiTokenQuerySet(models.QuerySet):
    def active(self) -> ApiTokenQuerySet:
        """Tokens that still authenticate (not revoked)."""
        return self.filter(revoked_at__isnull=True)


class ApiToken(models.Model):
    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    # When set, the token is limited to this one workspace.
    workspace = models.ForeignKey(
        Workspace, on_delete=models.CASCADE, null=True, blank=True, related_name="api_tokens"
    )
    name = models.CharField(max_length=100, blank=True)
    digest = models.CharField(max_length=64, unique=True, editable=False)
    hint = models.CharField(max_length=12, editable=False, help_text="First characters, to recognise it.")
    created_at = models.DateTimeField(default=timezone.now)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    objects = ApiTokenQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.hint}… ({self.user})"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None

    @staticmethod
    def generate() -> str:
        return TOKEN_PREFIX + secrets.token_urlsafe(32)


class WorkerHeartbeat(models.Model):
    """Written by the ``health_ping`` task and by periodic tasks: proof a worker runs."""

    marker = models.CharField(max_length=100, unique=True)
    seen_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"{self.marker} @ {self.seen_at:%Y-%m-%d %H:%M:%S}"
