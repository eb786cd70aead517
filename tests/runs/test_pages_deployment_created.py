"""The page a new deployment opens on: its one-time signing key, and what the key is for."""

from __future__ import annotations

import pytest

from tests.clients import logged_in as login

pytestmark = pytest.mark.django_db


def test_a_new_trace_import_deployment_does_not_say_its_requests_are_signed(personas):
    """Its page said "Each request carries X-AgentClash-Signature" of a deployment never called."""
    owner = login(personas.owner)
    posted = {
        "name": "traces",
        "kind": "trace_import",
        "max_in_flight": "8",
        "timeout_seconds": "120",
        "max_attempts": "3",
        "evidence_level": "structured",
    }
    body = owner.post("/deployments/new/", posted, follow=True).content.decode()
    assert 'id="signing-key"' in body  # generated at creation for every kind (agent-protocol.md)
    assert "A trace import is never called" in body
    assert "Each request carries" not in body
    posted = {
        **posted,
        "name": "agent",
        "kind": "hosted_http",
        "endpoint_url": "https://agent.example.com/run",
    }
    body = owner.post("/deployments/new/", posted, follow=True).content.decode()
    assert "Each request carries" in body and "A trace import is never called" not in body


def test_a_get_of_the_test_connection_url_lands_on_the_deployments_page(personas):
    """Without JavaScript the test's outcome page keeps the URL .../test/; reloading it from the
    address bar (a GET) was a 405 error page. It calls nothing and lands on the deployment."""
    from runs.services.deployments import deployment_create

    deployment = deployment_create(
        workspace=personas.workspace, name="agent", kind="hosted_http", url="https://agent.example.com/run"
    ).deployment
    url = f"/deployments/{deployment.public_id}/test/"
    response = login(personas.viewer).get(url)
    assert response.status_code == 302 and response["Location"] == f"/deployments/{deployment.public_id}/"
    assert login(personas.viewer).post(url).status_code == 403  # testing still needs write access
    assert login(personas.outsider).get(url).status_code == 404
