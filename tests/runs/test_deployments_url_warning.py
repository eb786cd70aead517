"""A deployment whose URL the outbound guard will refuse in its workspace is saved (the API
and the CLI accept it too), but the form and the detail page warn: every call will be
refused, and how to fix it. Only the URL's text is read: no request and no DNS lookup."""

from __future__ import annotations

import pytest
from django.urls import reverse

from agentclash_site.lib import outbound
from agentclash_site.lib.outbound import known_refusal
from runs.models import Deployment
from runs.services.deployments import deployment_create
from tests.clients import logged_in as login

pytestmark = pytest.mark.django_db

REFUSED = "Every call will be refused: this workspace does not allow private endpoints."
FIX = "python manage.py workspace create acme --allow-private-endpoints"
PRIVATE_URLS = [
    "http://127.0.0.1:9/run",
    "http://[::1]:9/run",
    "http://10.1.2.3/run",
    "http://[::ffff:10.0.0.1]/run",
    "http://localhost:9/run",
    "http://LOCALHOST.:9/run",
]
FINE_URLS = [
    "https://93.184.215.14/run",  # a public literal
    "https://[2606:4700:4700::1111]/run",
    "https://agent.example.com/run",  # a name: resolved (and checked) only when called
    "http://agent.internal:8000/run",
]


def form_data(url, **kw):
    return {
        "name": "careful",
        "kind": "hosted_http",
        "endpoint_url": url,
        "max_in_flight": "8",
        "timeout_seconds": "120",
        "max_attempts": "3",
        "evidence_level": "structured",
        **kw,
    }


@pytest.fixture(autouse=True)
def no_lookups(monkeypatch):
    """Rendering the pages never resolves a name (nor connects anywhere)."""

    def refuse(*args, **kwargs):
        raise AssertionError(f"a lookup at save or render time: {args}")

    monkeypatch.setattr("socket.getaddrinfo", refuse)
    monkeypatch.setattr("socket.gethostbyname", refuse)


def allow_private(personas):
    personas.workspace.allow_private_endpoints = True
    personas.workspace.save()


@pytest.mark.parametrize("url", PRIVATE_URLS)
def test_a_private_url_is_saved_with_a_warning_on_the_detail_page(personas, url):
    response = login(personas.editor).post("/deployments/new/", form_data(url), follow=True)
    deployment = Deployment.objects.get(name="careful")
    assert deployment.url == url
    assert response.redirect_chain == [(f"/deployments/{deployment.public_id}/", 302)]
    page = response.content.decode()
    assert "Deployment created." in page
    assert REFUSED in page and FIX in page and 'data-testid="url-warning"' in page
    # and every later visit, by anyone who may see the deployment
    page = login(personas.viewer).get(f"/deployments/{deployment.public_id}/").content.decode()
    assert REFUSED in page and FIX in page


@pytest.mark.parametrize("url", PRIVATE_URLS)
def test_the_form_warns_when_it_is_shown_again_and_when_editing(personas, url):
    client = login(personas.editor)
    # another field's error: the form comes back, with the warning under the URL
    response = client.post("/deployments/new/", form_data(url, max_attempts="0"))
    assert response.status_code == 400
    page = response.content.decode()
    assert REFUSED in page and FIX in page
    assert not Deployment.objects.exists()

    deployment = deployment_create(
        workspace=personas.workspace, name="careful", kind="hosted_http", url=url
    ).deployment
    edit = reverse("deployment-edit", args=[deployment.public_id])
    page = client.get(edit).content.decode()
    assert REFUSED in page and FIX in page
    response = client.post(edit, form_data(url, timeout_seconds="30"), follow=True)
    deployment.refresh_from_db()
    assert deployment.timeout_seconds == 30 and deployment.url == url  # saved all the same
    page = response.content.decode()
    assert "Deployment careful saved." in page and REFUSED in page


def test_an_ipv4_address_inside_ipv6_is_named(personas):
    url = "http://[::ffff:10.0.0.1]/run"
    deployment = deployment_create(
        workspace=personas.workspace, name="mapped", kind="hosted_http", url=url
    ).deployment
    page = login(personas.viewer).get(f"/deployments/{deployment.public_id}/").content.decode()
    assert "<code>::ffff:a00:1</code> carries 10.0.0.1, a private address," in page


def test_the_chat_base_url_is_checked_too(personas):
    data = form_data("", kind="openai_chat", base_url="http://[::1]:11434/v1", model="llama3")
    page = login(personas.editor).post("/deployments/new/", data, follow=True).content.decode()
    assert Deployment.objects.get(name="careful").url == "http://[::1]:11434/v1"
    assert REFUSED in page and FIX in page


@pytest.mark.parametrize("url", FINE_URLS)
def test_no_warning_for_a_public_literal_or_a_host_name(personas, url):
    client = login(personas.editor)
    page = client.post("/deployments/new/", form_data(url), follow=True).content.decode()
    deployment = Deployment.objects.get(name="careful")
    assert deployment.url == url and "Deployment created." in page
    assert "url-warning" not in page and "Every call will be refused" not in page
    edit = client.get(reverse("deployment-edit", args=[deployment.public_id])).content.decode()
    assert "url-warning" not in edit


@pytest.mark.parametrize("url", PRIVATE_URLS)
def test_no_warning_when_the_workspace_allows_private_endpoints(personas, url):
    allow_private(personas)
    client = login(personas.editor)
    page = client.post("/deployments/new/", form_data(url), follow=True).content.decode()
    deployment = Deployment.objects.get(name="careful")
    assert deployment.url == url and "Deployment created." in page
    assert "url-warning" not in page
    edit = client.get(reverse("deployment-edit", args=[deployment.public_id])).content.decode()
    assert "url-warning" not in edit


@pytest.mark.parametrize(
    ("url", "what"),
    [
        ("http://169.254.169.254/latest", "is a cloud metadata address"),
        ("http://metadata.google.internal/x", "is a cloud metadata host name"),
        ("http://0x7f.1/run", "is not a canonical IPv4 address"),
    ],
)
@pytest.mark.parametrize("allowed", [False, True])
def test_what_no_workspace_setting_allows_is_said_without_the_setting(personas, url, what, allowed):
    if allowed:
        allow_private(personas)
    page = login(personas.editor).post("/deployments/new/", form_data(url), follow=True).content.decode()
    assert Deployment.objects.get(name="careful").url == url
    assert "Every call will be refused." in page and what in page
    assert "which no workspace setting allows" in page
    assert "--allow-private-endpoints" not in page


def test_a_trace_import_has_no_url_and_no_warning(personas):
    deployment = deployment_create(
        workspace=personas.workspace, name="traces", kind="trace_import"
    ).deployment
    page = login(personas.viewer).get(f"/deployments/{deployment.public_id}/").content.decode()
    assert "url-warning" not in page


def test_the_host_in_the_warning_is_escaped(personas):
    # An IPv6 zone id is whatever the URL says: the host is shown as text, never as markup.
    url = "http://[fe80::1%25<i>&zone]/run"
    deployment = deployment_create(
        workspace=personas.workspace, name="odd", kind="hosted_http", url=url
    ).deployment
    page = login(personas.viewer).get(f"/deployments/{deployment.public_id}/").content.decode()
    assert REFUSED in page and "is a link-local address" in page
    assert "<i>" not in page
    assert "<code>fe80::1%25&lt;i&gt;&amp;zone</code>" in page
    form = login(personas.editor).post("/deployments/new/", form_data(url, max_attempts="0"))
    body = form.content.decode()
    assert REFUSED in body and "<code>fe80::1%25&lt;i&gt;&amp;zone</code>" in body and "<i>" not in body


# --- the helper agrees with the guard ------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    PRIVATE_URLS[:4]
    + FINE_URLS[:2]
    + [
        "http://[fe80::1%25eth0]/",
        "http://[64:ff9b::a00:1]/",
        "http://100.64.0.1/",
        "http://0.0.0.0/",
        "http://[ff02::1]/",
        "http://169.254.169.254/",
        "http://metadata/",
        "http://2130706433/",
        "http://127.1/",
        "http://127.0.0.1./",
    ],
)
@pytest.mark.parametrize("allowed", [False, True])
def test_known_refusal_is_the_guards_own_verdict_on_a_literal(url, allowed):
    try:
        outbound.check_url(url, allow_private=allowed)
    except (outbound.BlockedAddress, outbound.InvalidURL):
        refused = True
    else:
        refused = False
    found = known_refusal(url, allow_private=allowed)
    assert (found is not None) == refused
    if found is not None:
        # "private": the workspace setting is what refuses it
        assert found.private == (not allowed and outbound.known_refusal(url, allow_private=True) is None)
