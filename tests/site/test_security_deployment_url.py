"""A deployment URL may carry a key in its query (an Azure Functions ``?code=``): the run
page elides such values (``runs.lane_settings.shown_url``), and so do the deployment pages,
which every member, viewers included, reads. The edit form (editors) keeps the whole URL."""

from __future__ import annotations

import re

import pytest

from runs.services.deployments import deployment_create
from tests.clients import logged_in

pytestmark = pytest.mark.django_db

URL = "https://fn.example.com/api/agent?api-version=2&code=FUNCTION-KEY-123"


@pytest.fixture
def deployment(personas):
    return deployment_create(workspace=personas.workspace, name="fn", kind="hosted_http", url=URL).deployment


def test_the_deployment_pages_elide_a_key_in_the_urls_query(personas, deployment):
    viewer = logged_in(personas.viewer)
    for url in ("/deployments/", f"/deployments/{deployment.public_id}/"):
        page = viewer.get(url)
        assert page.status_code == 200, url
        body = page.content.decode()
        assert "FUNCTION-KEY-123" not in body, url
        assert "https://fn.example.com/api/agent?api-version=2&amp;code=…" in body, url


def test_the_edit_form_keeps_the_whole_url_for_editors(personas, deployment):
    form = logged_in(personas.editor).get(f"/deployments/{deployment.public_id}/edit/")
    assert form.status_code == 200
    assert "code=FUNCTION-KEY-123" in form.content.decode()


def test_the_detail_page_elides_headers_named_like_credentials(personas):
    # The run page records only the names of a deployment's extra headers ("an x-api-key is
    # as much a credential as the secret", runs.lane_settings); the detail page, which
    # viewers read, showed every value.
    config = {
        "extra_headers": {"X-Api-Key": "HEADER-KEY-456", "X-Auth-Token": "TOKEN-789", "X-Team": "evals"}
    }
    d = deployment_create(
        workspace=personas.workspace,
        name="h",
        kind="hosted_http",
        url="https://a.example.com/",
        config=config,
    ).deployment
    page = logged_in(personas.viewer).get(f"/deployments/{d.public_id}/").content.decode()
    assert "HEADER-KEY-456" not in page and "TOKEN-789" not in page
    shown = re.search(r'<th scope="row">Extra headers</th><td><code>(.*?)</code>', page).group(1)
    assert sorted(shown.split("<br>")) == ["X-Api-Key: …", "X-Auth-Token: …", "X-Team: evals"]
    form = logged_in(personas.editor).get(f"/deployments/{d.public_id}/edit/").content.decode()
    assert "X-Api-Key: HEADER-KEY-456" in form
