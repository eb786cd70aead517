"""Shared personas and helpers: an owner, an editor teammate, a viewer and an outsider."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from agentclash_site.workspaces.models import Role, Workspace
from agentclash_site.workspaces.services import membership_set_role, token_create


@dataclass
class Personas:
    workspace: Workspace
    other_workspace: Workspace
    owner: object
    editor: object
    viewer: object
    outsider: object

    def api(self, user: object | None, *, workspace: Workspace | None = None) -> APIClient:
        """An API client authenticated with a fresh bearer token of ``user``."""
        client = APIClient()
        if user is not None:
            issued = token_create(user=user, workspace=workspace)
            client.credentials(HTTP_AUTHORIZATION=f"Bearer {issued.secret}")
        return client


@pytest.fixture
def personas(db) -> Personas:
    User = get_user_model()
    workspace = Workspace.objects.create(slug="acme", name="Acme")
    other = Workspace.objects.create(slug="globex", name="Globex")
    owner = User.objects.create_user("olive", password="pw-olive-123")
    editor = User.objects.create_user("eddie", password="pw-eddie-123")
    viewer = User.objects.create_user("vera", password="pw-vera-123")
    outsider = User.objects.create_user("oscar", password="pw-oscar-123")
    membership_set_role(workspace=workspace, user=owner, role=Role.OWNER)
    membership_set_role(workspace=workspace, user=editor, role=Role.EDITOR)
    membership_set_role(workspace=workspace, user=viewer, role=Role.VIEWER)
    membership_set_role(workspace=other, user=outsider, role=Role.OWNER)
    return Personas(workspace, other, owner, editor, viewer, outsider)
