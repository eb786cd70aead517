"""Admin lists cost the same number of queries for any number of rows."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test.utils import CaptureQueriesContext

from agentclash_site.workspaces.models import Workspace
from agentclash_site.workspaces.services import token_create
from tests.clients import logged_in

pytestmark = pytest.mark.django_db


def queries(client, url: str) -> int:
    with CaptureQueriesContext(connection) as captured:
        assert client.get(url).status_code == 200
    return len(captured.captured_queries)


def test_the_api_token_list_does_not_query_each_tokens_workspace(personas):
    # Django's automatic select_related follows only non-null keys: the workspace column
    # (null for a token of all the user's workspaces) cost one query per row.
    client = logged_in(get_user_model().objects.create_superuser("root", password="pw-root-123"))
    token_create(user=personas.owner, workspace=personas.workspace, name="one")
    client.get("/admin/workspaces/apitoken/")  # the session and the like settle first
    one = queries(client, "/admin/workspaces/apitoken/")
    for n in range(4):
        workspace = Workspace.objects.create(slug=f"team-{n}", name=f"Team {n}")
        token_create(user=personas.editor, workspace=workspace, name=f"t{n}")
    assert queries(client, "/admin/workspaces/apitoken/") == one
