"""Every keyset-paged list page given a cursor an attacker made (edited values of every type,
another list's sort, nested or oversized JSON, not base64): a 400 page saying the link is not
valid, or the page's own rows; never a 500, never another workspace's rows."""

from __future__ import annotations

import base64
import json

import pytest

from packs import services as pack_services
from tests.clients import logged_in
from tests.paging import HTMX
from tests.runs.runfactory import publish
from tests.workspace_rows import bulk_deployments

pytestmark = pytest.mark.django_db

SORTS = ("slug", "-updated_at", "name", "-created_at", "list_key", "-number")
VALUES = (
    ["x", 1],
    [1, "x"],
    [{"dt": "not a date"}, 1],
    [{"dt": "2020-01-01T00:00:00"}, 1],
    [{"dt": "2020-01-01T00:00:00+00:00"}, "00000000-0000-4000-8000-000000000000"],
    [2**64, 1],
    [-(2**63) - 1, 2**63],
    [1.5, 1.5],
    [None, None],
    [True, False],
    [[], {}],
    [{"a": [1]}, [1]],
    ["x" * 20_000, 1],
    ["\u202e<script>", 1],
    [],
    [1],
    [1, 2, 3],
)


def raw(obj) -> str:
    return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")


def cursors() -> list[str]:
    made = [raw([sort, values]) for sort in SORTS for values in VALUES]
    made += [raw("slug"), raw(["slug"]), raw({"slug": 1}), raw(["slug", "x"]), raw(None)]
    made += ["!!!", "A", "A" * 100_001, raw(["slug", "[" * 5000]), "W" * 8 + "[" * 3000]
    made.append(base64.urlsafe_b64encode(b"[" * 2000).decode())
    return made


@pytest.fixture
def pages(personas):
    pack_services.draft_create(workspace=personas.other_workspace, user=personas.outsider, name="Theirs")
    bulk_deployments(personas.other_workspace, ["their-agent"])
    draft = pack_services.draft_create(workspace=personas.workspace, user=personas.owner, name="Ours")
    assert draft
    pack = publish(personas.workspace, cases=1).pack
    return [
        (f"/packs/{pack.public_id}/", "after"),
        ("/packs/", "after"),
        ("/packs/", "drafts_after"),
        ("/deployments/", "after"),
        ("/account/tokens/", "after"),
        ("/workspaces/acme/members/", "after"),
        ("/runs/", "after"),
    ]


def test_a_tampered_cursor_is_a_400_or_a_page_never_a_500(personas, pages):
    client = logged_in(personas.owner)
    made = cursors()
    for path, param in pages:
        for k, cursor in enumerate(made):
            headers = HTMX if k % 2 else {}  # the rows partial, or the whole page
            response = client.get(path, {param: cursor, "partial": "rows"}, **headers)
            assert response.status_code in (200, 400), (path, param, cursor[:80])
            body = response.content.decode()
            assert "Theirs" not in body and "their-agent" not in body
            if response.status_code == 400:
                assert "the cursor" in body  # what is wrong with it, and to start again
