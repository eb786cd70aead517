"""A logged-in user who is a member of no workspace sees every section page say so (as the
home page and /packs/ did), instead of a bare 404; writes are refused with the same page.
Objects of a workspace stay 404 to them, like to any outsider."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from packs.models import Draft
from runs.models import Deployment, Run
from runs.seeding import seed_run

pytestmark = pytest.mark.django_db

SECTIONS = ["/", "/packs/", "/runs/", "/runs/new/", "/runs/compare/", "/deployments/", "/deployments/new/"]
MESSAGE = "You are not a member of any workspace yet."


@pytest.fixture
def lonely(personas) -> Client:
    user = get_user_model().objects.create_user("lonely", password="pw-lonely-123")
    client = Client()
    client.force_login(user)
    return client


@pytest.mark.parametrize("url", SECTIONS)
def test_every_section_page_tells_a_user_without_a_workspace(lonely, url):
    response = lonely.get(url)
    assert response.status_code == 200
    assert MESSAGE in response.content.decode()


@pytest.mark.parametrize(
    ("url", "data"),
    [
        ("/packs/new/", {"template": ""}),
        ("/runs/new/", {"repetitions": "1"}),
        ("/deployments/new/", {"name": "agent", "kind": "trace_import"}),
    ],
)
def test_a_write_without_a_workspace_is_refused_with_the_same_page(lonely, url, data):
    response = lonely.post(url, data)
    assert response.status_code == 403
    assert MESSAGE in response.content.decode()
    assert not Draft.objects.exists() and not Deployment.objects.exists()


def test_objects_of_a_workspace_stay_404_to_them(personas, lonely):
    run = seed_run(workspace=personas.workspace, items=2, lanes=1)
    assert lonely.get(f"/runs/{run.id}/").status_code == 404
    assert lonely.get(f"/runs/compare/?baseline={run.id}&candidate={run.id}").status_code == 404
    assert Run.objects.count() == 1


@pytest.mark.parametrize("url", SECTIONS)
def test_a_member_sees_the_pages_themselves(personas, url):
    client = Client()
    client.force_login(personas.owner)
    response = client.get(url)
    assert response.status_code == 200 and MESSAGE not in response.content.decode()


def test_it_says_how_an_owner_adds_them(lonely):
    page = lonely.get("/").content.decode()
    assert (
        "add you on their workspace's Members page: give them your username, <strong>lonely</strong>" in page
    )
