"""Deployment pages: list, create (key shown once), edit (write-only secret), delete,
rotate, test connection via htmx, roles, and the admin."""

from __future__ import annotations

import json

import pytest
from django.test import Client
from django.urls import reverse
from django.utils.html import escape

from runs.models import Deployment
from runs.services.deployments import deployment_create
from tests.clients import logged_in as login
from tests.fakes.agent_server import FakeAgent, ok, server_error

pytestmark = pytest.mark.django_db

SECRET = "sk-PAGE-SECRET-31337"
HTMX = {"HTTP_HX_REQUEST": "true"}


def existing(personas, name="careful", **kw):
    fields = {"kind": "hosted_http", "url": "https://agent.example.com/run", "secret": SECRET, **kw}
    return deployment_create(workspace=personas.workspace, name=name, **fields)


def form_data(**kw):
    data = {
        "name": "careful",
        "kind": "hosted_http",
        "endpoint_url": "https://agent.example.com/run",
        "secret": SECRET,
        "max_in_flight": "8",
        "timeout_seconds": "120",
        "max_attempts": "3",
        "evidence_level": "structured",
        "extra_headers": "X-Team: evals",
    }
    data.update(kw)
    return data


def test_the_list_shows_the_current_workspaces_deployments(personas):
    existing(personas)
    deployment_create(workspace=personas.other_workspace, name="theirs", kind="trace_import")
    page = login(personas.viewer).get("/deployments/").content.decode()
    assert "careful" in page and "theirs" not in page
    assert SECRET not in page
    assert "Add a deployment" not in page  # viewers cannot write


def test_the_judge_provider_settings_are_linked_for_those_who_may_change_them(personas):
    # /workspaces/<slug>/judge/ was linked from no page: only a typed URL reached it.
    link = '<a href="/workspaces/acme/judge/">Judge provider</a>'
    assert link in login(personas.editor).get("/deployments/").content.decode()
    assert link not in login(personas.viewer).get("/deployments/").content.decode()  # 403 there


def test_an_empty_list_explains_what_to_do(personas):
    page = login(personas.owner).get("/deployments/").content.decode()
    assert "No deployments yet" in page and "Add a deployment" in page


def test_the_create_form_shows_fields_for_the_chosen_kind(personas):
    client = login(personas.owner)
    hosted = client.get("/deployments/new/").content.decode()
    assert 'name="endpoint_url"' in hosted and 'name="model"' not in hosted
    chat = client.get("/deployments/new/?kind=openai_chat").content.decode()
    assert 'name="base_url"' in chat and 'name="model"' in chat and 'name="endpoint_url"' not in chat
    assert 'hx-params="kind"' in chat  # the secret never goes into the GET query string


def test_the_kind_fields_partial_is_served_to_htmx(personas):
    response = login(personas.owner).get("/deployments/new/?partial=kind_fields&kind=openai_chat", **HTMX)
    body = response.content.decode()
    assert body.lstrip().startswith('<fieldset id="kind-fields"')
    assert 'name="model"' in body and "<html" not in body


def test_only_the_kind_that_signs_its_requests_mentions_the_signing_key_on_the_form(personas):
    """agent-protocol.md: the signature header is part of the hosted_http request; a chat
    model endpoint or a trace import never checks it, so "agents use it" misled there."""
    client = login(personas.owner)
    note = "X-AgentClash-Signature"
    assert note in client.get("/deployments/new/").content.decode()
    for kind in ("openai_chat", "trace_import"):
        assert note not in client.get(f"/deployments/new/?kind={kind}").content.decode(), kind
    # switching the kind swaps the note with the kind's fields
    swapped = client.get("/deployments/new/?partial=kind_fields&kind=hosted_http", **HTMX).content.decode()
    assert note in swapped
    chat = client.get("/deployments/new/?partial=kind_fields&kind=openai_chat", **HTMX).content.decode()
    assert note not in chat
    # editing: the key exists already, so nothing is "generated when you save"
    edit = client.get(
        reverse("deployment-edit", args=[existing(personas).deployment.public_id])
    ).content.decode()
    assert "A signing key is generated" not in edit


def test_creating_shows_the_signing_key_exactly_once(personas):
    # The page used to be rendered in the POST's response at /deployments/new/: a reload
    # posted again ("already exists"). Now POST/redirect/GET, the key shown once.
    client = login(personas.editor)
    response = client.post("/deployments/new/", form_data(), follow=True)
    deployment = Deployment.objects.get(name="careful")
    assert response.redirect_chain == [(f"/deployments/{deployment.public_id}/", 302)]
    assert response["Cache-Control"] == "no-store"
    key = deployment.get_signing_key()
    page = response.content.decode()
    assert page.count(key) == 1 and "Deployment created." in page
    assert SECRET not in page
    assert deployment.get_secret() == SECRET
    assert deployment.config == {"extra_headers": {"X-Team": "evals"}}
    for url in (
        "/deployments/",
        f"/deployments/{deployment.public_id}/",
        f"/deployments/{deployment.public_id}/edit/",
    ):
        assert key not in client.get(url).content.decode()


def test_the_one_time_key_waits_in_the_session_encrypted(personas):
    from django.contrib.sessions.models import Session

    client = login(personas.editor)
    client.post("/deployments/new/", form_data())
    key = Deployment.objects.get(name="careful").get_signing_key()
    stored = [s.get_decoded() for s in Session.objects.all()]
    assert any("deployment_signing_key" in data for data in stored)
    assert not any(key in repr(data) for data in stored)


def test_creating_a_chat_deployment_stores_its_model_settings(personas):
    login(personas.owner).post(
        "/deployments/new/",
        form_data(
            name="gpt", kind="openai_chat", endpoint_url="", base_url="https://api.example.com/v1", model="gpt-x",
            temperature="0.3", max_tokens="64", system_prompt="Be brief.", extra_body='{"top_k": 4}',
        ),
    )  # fmt: skip
    d = Deployment.objects.get(name="gpt")
    assert (d.base_url, d.model) == ("https://api.example.com/v1", "gpt-x")
    assert d.config == {
        "temperature": 0.3, "max_tokens": 64, "system_prompt": "Be brief.", "extra_body": {"top_k": 4},
        "extra_headers": {"X-Team": "evals"},
    }  # fmt: skip


def test_extra_body_nested_too_deeply_is_a_form_error_not_a_500(personas):
    deep = "[" * 5000 + "]" * 5000
    response = login(personas.owner).post(
        "/deployments/new/",
        form_data(name="gpt", kind="openai_chat", endpoint_url="", base_url="https://api.example.com/v1",
                  model="gpt-x", extra_body=deep),
    )  # fmt: skip
    assert response.status_code == 400
    assert "not valid JSON" in response.content.decode()
    assert not Deployment.objects.filter(name="gpt").exists()


def test_a_duplicate_name_is_shown_on_the_name_field(personas):
    existing(personas)
    response = login(personas.owner).post("/deployments/new/", form_data())
    assert response.status_code == 400
    assert "already exists" in response.content.decode()
    assert Deployment.objects.count() == 1


def test_service_errors_land_on_their_fields(personas):
    response = login(personas.owner).post("/deployments/new/", form_data(endpoint_url="ftp://nope"))
    assert response.status_code == 400
    assert "must be an absolute http(s) URL" in response.content.decode()
    assert SECRET not in response.content.decode()  # the password field is not re-rendered


def test_the_edit_form_never_renders_the_secret_and_empty_keeps_it(personas):
    d = existing(personas).deployment
    client = login(personas.editor)
    page = client.get(f"/deployments/{d.public_id}/edit/").content.decode()
    assert SECRET not in page and "A secret is stored" in page
    response = client.post(f"/deployments/{d.public_id}/edit/", form_data(secret="", max_attempts="5"))
    assert response.status_code == 302
    d.refresh_from_db()
    assert (d.max_attempts, d.get_secret()) == (5, SECRET)


def test_the_edit_form_can_replace_and_clear_the_secret(personas):
    d = existing(personas).deployment
    client = login(personas.editor)
    client.post(f"/deployments/{d.public_id}/edit/", form_data(secret="another"))
    d.refresh_from_db()
    assert d.get_secret() == "another"
    client.post(f"/deployments/{d.public_id}/edit/", form_data(secret="", clear_secret="on"))
    d.refresh_from_db()
    assert not d.has_secret


def test_editing_keeps_config_keys_the_form_does_not_show(personas):
    d = deployment_create(
        workspace=personas.workspace, name="gpt", kind="openai_chat", url="https://x/v1", model="m",
        config={"seed": 7, "temperature": 0.5},
    ).deployment  # fmt: skip
    login(personas.owner).post(
        f"/deployments/{d.public_id}/edit/",
        form_data(
            name="gpt",
            kind="openai_chat",
            base_url="https://x/v1",
            model="m",
            temperature="0.1",
            extra_headers="",
        ),
    )
    d.refresh_from_db()
    assert d.config == {"seed": 7, "temperature": 0.1}


def test_the_detail_page_shows_settings_under_the_form_labels_as_the_form_takes_them(personas):
    """The settings table listed config as ``config.extra_body`` with Python reprs
    (``{'top_k': 4}``): labels the form never shows, and text the form refuses as JSON when
    pasted back. The form's labels and text now; a key the form does not edit keeps its name."""
    d = deployment_create(
        workspace=personas.workspace, name="gpt", kind="openai_chat", url="https://x/v1", model="m",
        config={"extra_body": {"top_k": 4, "stop": ["é"]}, "extra_headers": {"X-Team": "evals", "X-B": "2"},
                "temperature": 0.5, "response_format": {"type": "json_object"}},
    ).deployment  # fmt: skip
    page = login(personas.viewer).get(f"/deployments/{d.public_id}/").content.decode()
    body = json.dumps({"stop": ["é"], "top_k": 4}, ensure_ascii=False)  # as PostgreSQL's jsonb orders keys
    assert (
        f'<th scope="row">Extra request parameters (JSON object)</th><td><code>{escape(body)}</code>' in page
    )
    assert '<th scope="row">Extra headers</th><td><code>X-B: 2<br>X-Team: evals</code>' in page
    assert '<th scope="row">Temperature</th><td><code>0.5</code>' in page
    assert (
        '<th scope="row">config.response_format</th><td><code>{&quot;type&quot;: &quot;json_object&quot;}</code>'
        in page
    )
    assert "config.extra_body" not in page and "{&#x27;" not in page
    assert login(personas.outsider).get(f"/deployments/{d.public_id}/").status_code == 404


def test_delete_asks_first_then_deletes(personas):
    d = existing(personas).deployment
    client = login(personas.owner)
    assert "cannot be undone" in client.get(f"/deployments/{d.public_id}/delete/").content.decode()
    assert client.post(f"/deployments/{d.public_id}/delete/").status_code == 302
    assert not Deployment.objects.exists()


def test_rotating_shows_the_new_key_once(personas):
    created = existing(personas)
    client = login(personas.owner)
    url = f"/deployments/{created.deployment.public_id}/rotate-signing-key/"
    assert created.signing_key not in client.get(url).content.decode()
    response = client.post(url, follow=True)
    assert response.redirect_chain == [(f"/deployments/{created.deployment.public_id}/", 302)]
    page = response.content.decode()
    new_key = Deployment.objects.get(pk=created.deployment.pk).get_signing_key()
    assert new_key != created.signing_key
    assert page.count(new_key) == 1 and created.signing_key not in page
    assert "New signing key." in page
    assert new_key not in client.get(f"/deployments/{created.deployment.public_id}/").content.decode()


def test_the_one_time_key_is_shown_only_on_its_own_deployments_page(personas):
    client = login(personas.editor)
    client.post("/deployments/new/", form_data())
    deployment = Deployment.objects.get(name="careful")
    other = existing(personas, name="other")
    # another deployment's page does not take (or consume) it
    assert (
        deployment.get_signing_key()
        not in client.get(f"/deployments/{other.deployment.public_id}/").content.decode()
    )
    assert (
        deployment.get_signing_key() in client.get(f"/deployments/{deployment.public_id}/").content.decode()
    )


def test_test_connection_renders_the_result_in_place_with_htmx(personas):
    personas.workspace.allow_private_endpoints = True
    personas.workspace.save()
    with FakeAgent() as agent:
        agent.default = ok({"final_output": "pong"})
        d = existing(personas, url=agent.url).deployment
        response = login(personas.editor).post(f"/deployments/{d.public_id}/test/", **HTMX)
        body = response.content.decode()
        assert body.lstrip().startswith('<div id="test-result"')
        assert ">ok<" in body and "HTTP 200" in body and "pong" in body
        assert SECRET not in body
        agent.default = server_error(503, "overloaded")
        page = login(personas.editor).post(f"/deployments/{d.public_id}/test/").content.decode()
        assert "<html" in page and "infra_error" in page and "overloaded" in page


def test_test_connection_shows_the_guard_refusal(personas):
    with FakeAgent() as agent:
        d = existing(personas, url=agent.url).deployment
        body = login(personas.owner).post(f"/deployments/{d.public_id}/test/", **HTMX).content.decode()
        assert "config_error" in body and "blocked_address" in body
        assert agent.calls == 0


# --- roles --------------------------------------------------------------------------------------


def pages(d_id):
    return {
        "read": [("get", f"/deployments/{d_id}/")],
        "write": [
            ("get", "/deployments/new/"),
            ("post", "/deployments/new/"),
            ("get", f"/deployments/{d_id}/edit/"),
            ("post", f"/deployments/{d_id}/edit/"),
            ("get", f"/deployments/{d_id}/delete/"),
            ("post", f"/deployments/{d_id}/delete/"),
            ("get", f"/deployments/{d_id}/rotate-signing-key/"),
            ("post", f"/deployments/{d_id}/rotate-signing-key/"),
            ("post", f"/deployments/{d_id}/test/"),
        ],
    }


def test_an_outsider_gets_404_on_every_deployment_page(personas):
    d = existing(personas).deployment
    client = login(personas.outsider)
    routes = pages(d.public_id)
    for method, url in routes["read"] + [r for r in routes["write"] if "/new/" not in r[1]]:
        response = getattr(client, method)(url, form_data(name="x") if method == "post" else None)
        assert response.status_code == 404, (method, url)
        assert SECRET not in response.content.decode()
    # the outsider's own list does not show it
    assert "careful" not in client.get("/deployments/").content.decode()
    assert Deployment.objects.filter(pk=d.pk, name="careful").exists()


def test_a_viewer_sees_the_pages_but_gets_403_on_writes(personas):
    d = existing(personas).deployment
    client = login(personas.viewer)
    routes = pages(d.public_id)
    for method, url in routes["read"]:
        page = getattr(client, method)(url)
        assert page.status_code == 200
        assert "Rotate signing key" not in page.content.decode()
    for method, url in routes["write"]:
        response = getattr(client, method)(url, form_data(name="x") if method == "post" else None)
        assert response.status_code == 403, (method, url)
    assert Deployment.objects.get(pk=d.pk).name == "careful"
    assert Deployment.objects.count() == 1


def test_pages_require_login(personas):
    d = existing(personas).deployment
    for url in ("/deployments/", f"/deployments/{d.public_id}/"):
        response = Client().get(url)
        assert response.status_code == 302 and reverse("login") in response["Location"]


def test_pages_are_accessible_on_a_phone(personas):
    d = existing(personas).deployment
    client = login(personas.owner)
    form = client.get("/deployments/new/").content.decode()
    assert 'name="viewport"' in form
    for field in ("id_name", "id_kind", "id_endpoint_url", "id_secret", "id_max_in_flight"):
        assert f'for="{field}"' in form  # every input has a label
    detail = client.get(f"/deployments/{d.public_id}/").content.decode()
    assert 'aria-live="polite"' in detail and 'class="table-wrap"' in detail


# --- admin ---------------------------------------------------------------------------------------


def test_the_admin_lists_and_filters_deployments_without_secrets(personas):
    from django.contrib.auth import get_user_model

    admin = get_user_model().objects.create_superuser("root", password="pw-root-123")
    created = existing(personas)
    client = login(admin)
    listing = client.get("/admin/runs/deployment/?kind__exact=hosted_http&q=care").content.decode()
    assert "careful" in listing
    change = client.get(f"/admin/runs/deployment/{created.deployment.pk}/change/").content.decode()
    for text in (listing, change):
        assert SECRET not in text
        assert created.signing_key not in text
        assert created.deployment.secret_encrypted not in text
    assert client.get("/admin/runs/deployment/add/").status_code == 403


def test_a_trace_import_created_with_a_secret_typed_before_the_kind_changed_stores_none(personas):
    # The form kept the hosted agent's secret field for a deployment that is never called.
    response = login(personas.owner).post(
        "/deployments/new/", form_data(name="uploads", kind="trace_import", endpoint_url="")
    )
    assert response.status_code == 302
    d = Deployment.objects.get(name="uploads")
    assert d.kind == "trace_import" and not d.has_secret and "extra_headers" not in d.config


def test_the_form_marks_what_only_calls_use(personas):
    body = login(personas.owner).get("/deployments/new/?kind=trace_import").content.decode()
    assert 'id="kind-fields" class="stack" data-kind="trace_import"' in body
    assert 'class="stack calls-only" data-testid="credentials"' in body
