"""Deployment API: shapes, write-only secrets, signing key once, duplicates, roles."""

from __future__ import annotations

import json
import logging

import pytest

from runs.models import Deployment
from runs.services.deployments import deployment_create
from tests.fakes.agent_server import FakeAgent, ok

pytestmark = pytest.mark.django_db

SECRET = "sk-API-SECRET-4242"
BASE = "/api/v1/workspaces/acme/deployments"


def create_body(**kw):
    body = {
        "name": "careful",
        "kind": "hosted_http",
        "endpoint_url": "https://agent.example.com/run",
        "secret": SECRET,
        "max_in_flight": 4,
        "config": {"extra_headers": {"X-Team": "evals"}},
    }
    body.update(kw)
    return body


def existing(personas, name="careful", **kw):
    fields = {"kind": "hosted_http", "url": "https://agent.example.com/run", "secret": SECRET, **kw}
    return deployment_create(workspace=personas.workspace, name=name, **fields)


def test_create_answers_201_with_the_deployment_and_its_signing_key_once(personas):
    api = personas.api(personas.editor)
    response = api.post(BASE, create_body(), format="json")
    assert response.status_code == 201, response.content
    body = response.json()
    assert set(body) == {
        "id", "workspace", "name", "kind", "endpoint_url", "base_url", "model", "has_secret", "has_signing_key",
        "max_in_flight", "timeout_seconds", "max_attempts", "evidence_level", "config", "created_at", "updated_at",
        "signing_key",
    }  # fmt: skip
    assert body["endpoint_url"] == "https://agent.example.com/run" and body["base_url"] is None
    assert (body["has_secret"], body["max_in_flight"], body["max_attempts"]) == (True, 4, 3)
    key = body["signing_key"]
    assert Deployment.objects.get(public_id=body["id"]).get_signing_key() == key
    # ... and never again
    for response in (
        api.get(BASE),
        api.get(f"{BASE}/{body['id']}"),
        api.patch(f"{BASE}/{body['id']}", {"max_attempts": 2}, format="json"),
    ):
        assert key not in response.content.decode()
        assert "signing_key" not in response.content.decode().replace("has_signing_key", "")


def test_secrets_never_appear_in_any_api_response(personas):
    api = personas.api(personas.owner)
    created = api.post(BASE, create_body(), format="json").json()
    url = f"{BASE}/{created['id']}"
    responses = [
        json.dumps(created),
        api.get(BASE).content.decode(),
        api.get(url).content.decode(),
        api.patch(url, {"secret": "sk-ROTATED-SECRET"}, format="json").content.decode(),
        api.post(f"{url}/rotate-signing-key").content.decode(),
    ]
    schema = api.get("/api/v1/schema/")
    assert schema.status_code == 200
    responses.append(schema.content.decode())
    for text in responses:
        assert SECRET not in text
        assert "sk-ROTATED-SECRET" not in text
    assert Deployment.objects.get(public_id=created["id"]).get_secret() == "sk-ROTATED-SECRET"


def test_openai_chat_deployments_expose_base_url_and_model(personas):
    response = personas.api(personas.owner).post(
        BASE,
        {"name": "gpt", "kind": "openai_chat", "base_url": "https://api.example.com/v1", "model": "gpt-4o-mini",
         "config": {"temperature": 0}},
        format="json",
    )  # fmt: skip
    body = response.json()
    assert response.status_code == 201
    assert (body["base_url"], body["endpoint_url"], body["model"]) == (
        "https://api.example.com/v1",
        None,
        "gpt-4o-mini",
    )
    assert body["has_secret"] is False


def test_the_wrong_url_name_for_the_kind_is_refused(personas):
    body = {k: v for k, v in create_body(base_url="https://x.example.com/").items() if k != "endpoint_url"}
    response = personas.api(personas.owner).post(BASE, body, format="json")
    assert response.status_code == 400
    assert (response.json()["error"]["code"], response.json()["error"]["field"]) == (
        "wrong_url_field",
        "base_url",
    )


def test_a_duplicate_name_is_409_naming_the_field(personas):
    existing(personas)
    response = personas.api(personas.owner).post(BASE, create_body(), format="json")
    assert response.status_code == 409
    assert response.json()["error"] == {
        "code": "deployment_name_exists",
        "message": "a deployment named 'careful' already exists in this workspace",
        "field": "name",
    }
    assert Deployment.objects.count() == 1


@pytest.mark.parametrize(
    ("body", "code", "field"),
    [
        (create_body(endpoint_url=""), "missing_url", "endpoint_url"),
        (
            create_body(kind="openai_chat", endpoint_url=None, base_url="https://x/v1"),
            "missing_model",
            "model",
        ),
        (create_body(max_in_flight=0), "invalid_max_in_flight", "max_in_flight"),
        (create_body(config={"temperature": 1}), "invalid_config", "config.temperature"),
        (create_body(kind="teleport"), "invalid", "kind"),
        (create_body(max_in_flight="many"), "invalid", "max_in_flight"),
        (create_body(signing_key="mine"), "invalid", "signing_key"),
    ],
)
def test_invalid_input_is_400_with_code_and_field(personas, body, code, field):
    body = {k: v for k, v in body.items() if v is not None}
    response = personas.api(personas.owner).post(BASE, body, format="json")
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert (error["code"], error["field"]) == (code, field)


@pytest.mark.parametrize(
    ("method", "body", "field", "choices"),
    [
        ("post", create_body(kind="teleport"), "kind", ["hosted_http", "openai_chat", "trace_import"]),
        ("post", create_body(evidence_level="everything"), "evidence_level", ["structured", "black_box"]),
        ("patch", {"evidence_level": "x"}, "evidence_level", ["structured", "black_box"]),
    ],
)
def test_a_value_a_choice_field_does_not_take_lists_its_choices(personas, method, body, field, choices):
    # "\"teleport\" is not a valid choice." named the field but not the fix; the CLI's
    # --kind lists them (interfaces.md §2 and §7: "choices"?).
    url = BASE if method == "post" else f"{BASE}/{existing(personas, name='other').deployment.public_id}"
    response = getattr(personas.api(personas.owner), method)(url, body, format="json")
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert (error["code"], error["field"], error["choices"]) == ("invalid", field, choices)
    assert error["message"].startswith('"')


def test_patch_updates_given_fields_and_null_clears_the_secret(personas):
    d = existing(personas).deployment
    api = personas.api(personas.editor)
    response = api.patch(
        f"{BASE}/{d.public_id}", {"timeout_seconds": 30, "evidence_level": "black_box"}, format="json"
    )
    assert response.status_code == 200
    assert (response.json()["timeout_seconds"], response.json()["has_secret"]) == (30.0, True)
    response = api.patch(f"{BASE}/{d.public_id}", {"secret": None}, format="json")
    assert response.json()["has_secret"] is False


def test_delete_answers_204(personas):
    d = existing(personas).deployment
    assert personas.api(personas.owner).delete(f"{BASE}/{d.public_id}").status_code == 204
    assert not Deployment.objects.exists()


def test_rotate_returns_a_new_key_once(personas):
    created = existing(personas)
    response = personas.api(personas.owner).post(f"{BASE}/{created.deployment.public_id}/rotate-signing-key")
    assert response.status_code == 200
    assert response.json()["signing_key"] not in ("", created.signing_key)


def test_test_connection_reports_the_attempt_category(personas):
    personas.workspace.allow_private_endpoints = True
    personas.workspace.save()
    with FakeAgent() as agent:
        agent.default = ok({"final_output": "pong"})
        d = existing(personas, url=agent.url).deployment
        response = personas.api(personas.owner).post(f"{BASE}/{d.public_id}/test")
    assert response.status_code == 200
    assert response.json()["category"] == "ok" and response.json()["status_code"] == 200


# --- roles ------------------------------------------------------------------------------------


def every_route(d_id):
    return [
        ("get", BASE, None),
        ("post", BASE, create_body(name="new")),
        ("get", f"{BASE}/{d_id}", None),
        ("patch", f"{BASE}/{d_id}", {"max_attempts": 1}),
        ("delete", f"{BASE}/{d_id}", None),
        ("post", f"{BASE}/{d_id}/rotate-signing-key", None),
        ("post", f"{BASE}/{d_id}/test", None),
    ]


def test_an_outsider_gets_404_on_every_deployment_endpoint(personas):
    d = existing(personas).deployment
    api = personas.api(personas.outsider)
    for method, url, body in every_route(d.public_id):
        response = getattr(api, method)(url, body, format="json")
        assert response.status_code == 404, (method, url)
        assert SECRET not in response.content.decode()
    # and through their own workspace's path too
    assert api.get(f"/api/v1/workspaces/globex/deployments/{d.public_id}").status_code == 404
    assert Deployment.objects.get(pk=d.pk).max_attempts == 3


def test_a_viewer_reads_but_gets_403_on_every_write(personas):
    d = existing(personas).deployment
    api = personas.api(personas.viewer)
    for method, url, body in every_route(d.public_id):
        response = getattr(api, method)(url, body, format="json")
        expected = 200 if method == "get" else 403
        assert response.status_code == expected, (method, url, response.content)
    assert Deployment.objects.count() == 1
    assert Deployment.objects.get(pk=d.pk).max_attempts == 3


def test_the_api_requires_authentication(personas):
    assert personas.api(None).get(BASE).status_code == 401


def test_a_token_limited_to_another_workspace_sees_nothing(personas):
    d = existing(personas).deployment
    api = personas.api(personas.owner, workspace=personas.other_workspace)
    assert api.get(f"{BASE}/{d.public_id}").status_code == 404


def test_secrets_never_reach_the_logs(personas, caplog):
    personas.workspace.allow_private_endpoints = True
    personas.workspace.save()
    api = personas.api(personas.owner)
    with caplog.at_level(logging.DEBUG), FakeAgent() as agent:
        agent.default = ok({"final_output": "pong"})
        created = api.post(BASE, create_body(endpoint_url=agent.url), format="json").json()
        url = f"{BASE}/{created['id']}"
        api.patch(url, {"secret": "sk-SECOND-SECRET", "max_in_flight": "lots"}, format="json")
        api.post(f"{url}/test")
        api.post(BASE, create_body(), format="json")  # a 409, logged as a client error
    assert agent.requests[0].headers["Authorization"] == f"Bearer {SECRET}"
    assert caplog.records, "expected some log output to inspect"
    for secret in (SECRET, "sk-SECOND-SECRET", created["signing_key"]):
        assert secret not in caplog.text


def test_a_response_holding_the_signing_key_is_never_stored_by_a_cache(personas):
    api = personas.api(personas.owner)
    created = api.post(BASE, create_body(), format="json")
    rotated = api.post(f"{BASE}/{created.json()['id']}/rotate-signing-key")
    for response in (created, rotated):
        assert "signing_key" in response.json()
        assert "no-store" in response.get("Cache-Control", "")


def test_the_kind_of_a_deployment_an_unfinished_run_uses_cannot_change(personas):
    """A hosted_http deployment PATCHed to trace_import while a run of it was queued: the run
    called it anyway through the trace_import executor, and every case ended config_error
    "AgentClash failed on this attempt (NotExecutable ...); please report it" (a changed
    openai_chat one was called with the other protocol). Its kind now stays while a queued,
    running or scoring run uses it (409, naming the run); other fields still change, and
    once the run has finished the kind can change."""
    from runs.models import Run
    from runs.services.operations import run_cancel
    from tests.runs.runfactory import create_run, hosted, publish

    version = publish(personas.workspace, cases=1)
    dep = hosted(personas.workspace, "http://127.0.0.1:9/agent", name="busy")
    run = create_run(personas.workspace, version, [dep])
    api = personas.api(personas.owner)
    refused = api.patch(f"{BASE}/{dep.public_id}", {"kind": "trace_import"}, format="json")
    assert refused.status_code == 409
    error = refused.json()["error"]
    assert (error["code"], error["field"]) == ("deployment_in_use", "kind")
    assert str(run.pk) in error["message"] and "queued" in error["message"]
    dep.refresh_from_db()
    assert dep.kind == "hosted_http"
    assert api.patch(f"{BASE}/{dep.public_id}", {"max_in_flight": 3}, format="json").status_code == 200
    run_cancel(run=Run.objects.get(pk=run.pk))
    changed = api.patch(f"{BASE}/{dep.public_id}", {"kind": "trace_import"}, format="json")
    assert changed.status_code == 200 and changed.json()["kind"] == "trace_import"


def test_a_viewer_reads_credential_named_headers_and_query_keys_elided(personas):
    """The deployment pages elide them for every member; the API gave a viewer the values
    (an X-Api-Key, an Azure function's ?code=). Editors still read them whole: they write
    the config back."""
    deployment = existing(
        personas,
        url="https://agent.example.com/run?api-version=2&code=FUNCKEY123",
        config={"extra_headers": {"X-Api-Key": "HDRKEY456", "X-Team": "evals"}},
    ).deployment
    viewer, editor = personas.api(personas.viewer), personas.api(personas.editor)
    for response in (viewer.get(f"{BASE}/{deployment.public_id}"), viewer.get(BASE)):
        assert response.status_code == 200
        text = response.content.decode()
        assert "FUNCKEY123" not in text and "HDRKEY456" not in text
    body = viewer.get(f"{BASE}/{deployment.public_id}").json()
    assert body["endpoint_url"] == "https://agent.example.com/run?api-version=2&code=…"
    assert body["config"]["extra_headers"] == {"X-Api-Key": "…", "X-Team": "evals"}
    whole = editor.get(f"{BASE}/{deployment.public_id}").json()
    assert whole["endpoint_url"].endswith("code=FUNCKEY123")
    assert whole["config"]["extra_headers"]["X-Api-Key"] == "HDRKEY456"
    assert editor.get(BASE).json()["results"][0]["config"]["extra_headers"]["X-Api-Key"] == "HDRKEY456"
