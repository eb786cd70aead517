"""Deployment model and services: validation, constraints, secrets, signing keys, test connection."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, connection, transaction
from django.test.utils import CaptureQueriesContext

from agentclash_site.lib.signing import verify_signature
from runs.executors import AttemptCategory, DeploymentTarget
from runs.models import Deployment
from runs.services.deployments import (
    DeploymentError,
    DeploymentNameExists,
    deployment_create,
    deployment_create_or_update,
    deployment_delete,
    deployment_rotate_signing_key,
    deployment_test_connection,
    deployment_update,
)
from tests.fakes.agent_server import FakeAgent, chat_ok, ok
from tests.fakes.network import loopback_only

pytestmark = pytest.mark.django_db

SECRET = "sk-live-SECRET-value-9876"


def hosted(workspace, name="careful", **kw):
    fields = {"kind": "hosted_http", "url": "https://agent.example.com/run", "secret": SECRET}
    fields.update(kw)
    return deployment_create(workspace=workspace, name=name, **fields)


# --- create ------------------------------------------------------------------------------


def test_create_stores_defaults_and_an_encrypted_secret_and_signing_key(personas):
    created = hosted(personas.workspace)
    d = Deployment.objects.get(pk=created.deployment.pk)
    assert (d.max_in_flight, d.timeout_seconds, d.max_attempts, d.evidence_level) == (
        8,
        120.0,
        3,
        "structured",
    )
    assert d.endpoint_url == "https://agent.example.com/run" and d.base_url is None
    assert d.has_secret and d.get_secret() == SECRET
    assert SECRET not in d.secret_encrypted
    assert created.signing_key and d.get_signing_key() == created.signing_key
    assert created.signing_key not in d.signing_key_encrypted


def test_each_deployment_gets_its_own_signing_key(personas):
    a = hosted(personas.workspace, "a").signing_key
    b = hosted(personas.workspace, "b").signing_key
    assert a != b


def test_duplicate_names_in_a_workspace_are_refused_with_a_clear_code(personas):
    hosted(personas.workspace)
    with pytest.raises(DeploymentNameExists) as info:
        hosted(personas.workspace, "careful")
    assert (info.value.code, info.value.field, info.value.status_code) == (
        "deployment_name_exists",
        "name",
        409,
    )
    hosted(personas.other_workspace, "careful")  # another workspace may use the name


def test_the_database_enforces_the_unique_name_constraint(personas):
    hosted(personas.workspace)
    with pytest.raises(IntegrityError, match="runs_deployment_name_unique"), transaction.atomic():
        Deployment.objects.create(workspace=personas.workspace, name="careful", kind="trace_import")


@pytest.mark.parametrize(
    ("fields", "constraint"),
    [
        ({"kind": "carrier_pigeon"}, "runs_deployment_kind_valid"),
        ({"max_in_flight": 0}, "runs_deployment_max_in_flight_range"),
        ({"timeout_seconds": 0}, "runs_deployment_timeout_range"),
        ({"max_attempts": 0}, "runs_deployment_max_attempts_range"),
        ({"evidence_level": "everything"}, "runs_deployment_evidence_level_valid"),
        ({"kind": "hosted_http", "url": ""}, "runs_deployment_url_required"),
        ({"kind": "openai_chat", "url": "https://x", "model": ""}, "runs_deployment_model_required"),
        ({"name": ""}, "runs_deployment_name_not_blank"),
    ],
)
def test_check_constraints_hold_in_the_database(personas, fields, constraint):
    row = {"workspace": personas.workspace, "name": "x", "kind": "trace_import", **fields}
    with pytest.raises(IntegrityError, match=constraint), transaction.atomic():
        Deployment.objects.create(**row)


@pytest.mark.parametrize(
    ("fields", "code", "field"),
    [
        ({"kind": "hosted_http", "url": ""}, "missing_url", "endpoint_url"),
        ({"kind": "openai_chat", "url": "", "model": "m"}, "missing_url", "base_url"),
        ({"kind": "hosted_http", "url": "ftp://x/"}, "invalid_url", "endpoint_url"),
        ({"kind": "hosted_http", "url": "https://user:pw@x/"}, "invalid_url", "endpoint_url"),
        ({"kind": "hosted_http", "url": "/relative"}, "invalid_url", "endpoint_url"),
        ({"kind": "openai_chat", "url": "https://x/v1"}, "missing_model", "model"),
        ({"kind": "hosted_http", "url": "https://x", "model": "m"}, "model_not_allowed", "model"),
        ({"kind": "trace_import", "url": "https://x"}, "url_not_allowed", "endpoint_url"),
        ({"kind": "nope"}, "invalid_kind", "kind"),
        ({"kind": "trace_import", "max_in_flight": 0}, "invalid_max_in_flight", "max_in_flight"),
        ({"kind": "trace_import", "max_in_flight": 10_000}, "invalid_max_in_flight", "max_in_flight"),
        ({"kind": "trace_import", "timeout_seconds": -1}, "invalid_timeout_seconds", "timeout_seconds"),
        ({"kind": "trace_import", "max_attempts": 11}, "invalid_max_attempts", "max_attempts"),
        ({"kind": "trace_import", "evidence_level": "x"}, "invalid_evidence_level", "evidence_level"),
        ({"kind": "trace_import", "name": "  "}, "invalid_name", "name"),
    ],
)
def test_invalid_fields_are_refused_with_a_code_and_the_field(personas, fields, code, field):
    fields = {"name": "x", **fields}
    with pytest.raises(DeploymentError) as info:
        deployment_create(workspace=personas.workspace, **fields)
    assert (info.value.code, info.value.field) == (code, field)
    assert not Deployment.objects.exists()


@pytest.mark.parametrize(
    ("kind", "config", "field"),
    [
        ("openai_chat", {"temprature": 0.5}, "config.temprature"),
        ("openai_chat", {"temperature": 9}, "config.temperature"),
        ("openai_chat", {"extra_headers": {"Authorization": "x"}}, "config.extra_headers"),
        ("openai_chat", {"extra_headers": {"X-A": "a\r\nInjected: 1"}}, "config.extra_headers"),
        ("openai_chat", {"extra_body": {"model": "other"}}, "config.extra_body"),
        ("hosted_http", {"temperature": 0.1}, "config.temperature"),
        ("hosted_http", "not an object", "config"),
        ("openai_chat", {"max_token": 5}, "config.max_token"),
        ("openai_chat", {"messages": []}, "config.messages"),
        ("hosted_http", {"frequency_penalty": 0.1}, "config.frequency_penalty"),
        # A streamed reply is server-sent events, never the one JSON completion read: every
        # case of every run was a config_error "the response body is not JSON".
        ("openai_chat", {"stream": True}, "config.stream"),
        ("openai_chat", {"extra_body": {"stream": True}}, "config.extra_body.stream"),
    ],
)
def test_config_is_validated_against_its_typed_schema(personas, kind, config, field):
    url = "https://x/v1"
    with pytest.raises(DeploymentError) as info:
        deployment_create(
            workspace=personas.workspace,
            name="x",
            kind=kind,
            url=url,
            model="m" if kind == "openai_chat" else "",
            config=config,
        )
    assert (info.value.code, info.value.field) == ("invalid_config", field)


def test_a_valid_chat_config_is_stored_in_its_json_form(personas):
    created = deployment_create(
        workspace=personas.workspace,
        name="gpt",
        kind="openai_chat",
        url="https://api.example.com/v1",
        model="gpt-4o-mini",
        config={
            "temperature": 0,
            "max_tokens": 50,
            "system_prompt": "Be brief.",
            "extra_headers": {"X-Org": "a"},
        },
    )
    d = created.deployment
    assert d.base_url == "https://api.example.com/v1" and d.endpoint_url is None
    assert d.config == {
        "temperature": 0.0,
        "max_tokens": 50,
        "system_prompt": "Be brief.",
        "extra_headers": {"X-Org": "a"},
    }
    assert d.typed_config.chat_params() == {"temperature": 0.0, "max_tokens": 50}


# --- update, rotate, delete ----------------------------------------------------------------


def test_update_changes_only_the_given_fields_and_keeps_the_secret(personas):
    d = hosted(personas.workspace).deployment
    deployment_update(deployment=d, max_in_flight=2)
    d.refresh_from_db()
    assert d.max_in_flight == 2 and d.get_secret() == SECRET and d.url == "https://agent.example.com/run"


def test_update_can_replace_or_clear_the_secret(personas):
    d = hosted(personas.workspace).deployment
    deployment_update(deployment=d, secret="new-secret")
    assert Deployment.objects.get(pk=d.pk).get_secret() == "new-secret"
    deployment_update(deployment=d, secret=None)
    assert not Deployment.objects.get(pk=d.pk).has_secret


def test_renaming_onto_an_existing_name_is_refused(personas):
    hosted(personas.workspace, "a")
    b = hosted(personas.workspace, "b").deployment
    with pytest.raises(DeploymentNameExists):
        deployment_update(deployment=b, name="a")


def test_changing_kind_needs_the_new_kinds_url(personas):
    d = hosted(personas.workspace).deployment
    with pytest.raises(DeploymentError) as info:
        deployment_update(deployment=d, kind="openai_chat", model="m")
    assert info.value.field == "base_url"
    deployment_update(deployment=d, kind="openai_chat", model="m", url="https://llm.example.com/v1")
    d.refresh_from_db()
    assert (d.kind, d.base_url, d.model) == ("openai_chat", "https://llm.example.com/v1", "m")
    deployment_update(deployment=d, kind="trace_import")
    d.refresh_from_db()
    assert (d.kind, d.url, d.model) == ("trace_import", "", "")


def test_rotation_replaces_the_signing_key(personas):
    created = hosted(personas.workspace)
    rotated = deployment_rotate_signing_key(deployment=created.deployment)
    assert rotated.signing_key != created.signing_key
    assert Deployment.objects.get(pk=created.deployment.pk).get_signing_key() == rotated.signing_key


def test_delete_removes_the_deployment(personas):
    d = hosted(personas.workspace).deployment
    deployment_delete(deployment=d)
    assert not Deployment.objects.exists()


def test_create_or_update_creates_once_then_updates_the_given_fields(personas):
    first = deployment_create_or_update(
        workspace=personas.workspace, name="ci", kind="hosted_http", url="https://a.example.com/"
    )
    assert first.created and first.signing_key
    again = deployment_create_or_update(
        workspace=personas.workspace, name="ci", kind="hosted_http", max_attempts=5
    )
    assert not again.created and again.signing_key is None
    d = Deployment.objects.get(name="ci")
    assert (d.url, d.max_attempts, d.get_signing_key()) == ("https://a.example.com/", 5, first.signing_key)


def test_the_list_query_is_one_query(personas):
    for i in range(5):
        hosted(personas.workspace, f"d{i}")
    with CaptureQueriesContext(connection) as queries:
        names = [d.name for d in Deployment.objects.for_workspace(personas.workspace)]
    assert names == [f"d{i}" for i in range(5)]
    assert len(queries) == 1


# --- execution target and test connection ----------------------------------------------------


def test_the_execution_target_carries_decrypted_settings_and_the_workspace_flag(personas):
    created = hosted(personas.workspace, config={"extra_headers": {"X-A": "1"}})
    target = DeploymentTarget.from_deployment(created.deployment)
    assert (target.secret, target.signing_key, target.allow_private) == (SECRET, created.signing_key, False)
    assert target.config.extra_headers == {"X-A": "1"}
    assert SECRET not in repr(target) and created.signing_key not in repr(target)


def test_test_connection_sends_a_signed_protocol_request_when_private_endpoints_are_allowed(personas):
    personas.workspace.allow_private_endpoints = True
    personas.workspace.save()
    with FakeAgent() as agent:
        agent.default = ok({"final_output": "pong"})
        created = hosted(personas.workspace, url=agent.url)
        outcome = deployment_test_connection(deployment=Deployment.objects.get(pk=created.deployment.pk))
        assert outcome.category == AttemptCategory.OK
        sent = agent.requests[0]
        assert sent.json["protocol_version"] == "1"
        assert sent.json["case"]["key"] == "ping"
        assert verify_signature(sent.body, created.signing_key, sent.headers["X-AgentClash-Signature"])


def test_test_connection_is_refused_for_loopback_without_allow_private_endpoints(personas):
    with FakeAgent() as agent:
        created = hosted(personas.workspace, url=agent.url)
        outcome = deployment_test_connection(deployment=created.deployment)
        assert (outcome.category, outcome.error_code) == ("config_error", "blocked_address")
        assert agent.calls == 0


def test_test_connection_of_a_private_endpoint_is_a_guard_decision_only(personas):
    created = hosted(personas.workspace, url="http://10.0.0.1:8080/agent")
    with loopback_only() as attempts:
        outcome = deployment_test_connection(deployment=created.deployment)
    assert outcome.error_code == "blocked_address"
    assert attempts == []


def test_test_connection_of_a_chat_model_sends_one_message(personas):
    personas.workspace.allow_private_endpoints = True
    personas.workspace.save()
    with FakeAgent() as agent:
        agent.default = chat_ok("pong")
        created = deployment_create(
            workspace=personas.workspace,
            name="m",
            kind="openai_chat",
            url=agent.base_url + "/v1",
            model="tiny",
        )
        outcome = deployment_test_connection(deployment=created.deployment)
        assert outcome.ok and outcome.evidence.final_output == "pong"
        assert agent.requests[0].path == "/v1/chat/completions"
        assert [m["role"] for m in agent.requests[0].json["messages"]] == ["user"]


def test_trace_imports_cannot_be_tested(personas):
    created = deployment_create(workspace=personas.workspace, name="t", kind="trace_import")
    with pytest.raises(DeploymentError) as info:
        deployment_test_connection(deployment=created.deployment)
    assert info.value.code == "not_callable"


def test_test_connection_explains_an_unreadable_secret(personas):
    d = hosted(personas.workspace).deployment
    Deployment.objects.filter(pk=d.pk).update(secret_encrypted="gAAAAA-not-a-valid-token")
    with pytest.raises(DeploymentError) as info:
        deployment_test_connection(deployment=Deployment.objects.get(pk=d.pk))
    assert info.value.code == "secret_unreadable"


def test_a_typo_of_a_known_key_is_named_with_the_key_meant(personas):
    with pytest.raises(DeploymentError) as info:
        deployment_create(
            workspace=personas.workspace, name="x", kind="openai_chat", url="https://x/v1", model="m",
            config={"temprature": 0.5},
        )  # fmt: skip
    assert info.value.message == 'config.temprature: unknown key; did you mean "temperature"?'


def test_any_other_openai_chat_config_key_is_a_request_parameter(personas):
    # The config is free (agent-protocol.md): frequency_penalty was refused as unknown.
    dep = deployment_create(
        workspace=personas.workspace, name="x", kind="openai_chat", url="https://x/v1", model="m",
        config={"frequency_penalty": 0.1, "response_format": {"type": "json_object"}, "top_k": 40,
                "temperature": 0.2, "extra_body": {"user": "ci"}},
    ).deployment  # fmt: skip
    assert dep.typed_config.chat_params() == {
        "user": "ci",
        "frequency_penalty": 0.1,
        "response_format": {"type": "json_object"},
        "top_k": 40,
        "temperature": 0.2,
    }


def test_test_connection_never_shows_a_secret_the_agent_echoes(personas):
    personas.workspace.allow_private_endpoints = True
    personas.workspace.save()
    with FakeAgent() as agent:
        agent.default = ok(lambda recorded: {"headers": dict(recorded.headers)}, status=401)
        created = hosted(personas.workspace, url=agent.url)
        outcome = deployment_test_connection(deployment=Deployment.objects.get(pk=created.deployment.pk))
    assert outcome.category == AttemptCategory.CONFIG_ERROR
    assert SECRET not in outcome.body_excerpt and "[redacted]" in outcome.body_excerpt


@pytest.mark.parametrize("bad", ["\x00", "\x1b[0m", "\x7f", "\x0b"])
def test_a_secret_or_header_value_http_cannot_carry_is_refused_when_saved(personas, bad):
    # Only CR and LF were refused: the deployment was saved and every call of every run
    # ended config_error invalid_header.
    with pytest.raises(DeploymentError) as info:
        hosted(personas.workspace, secret=f"sk-{bad}-x")
    assert (info.value.code, info.value.field) == ("invalid_secret", "secret")
    assert "control characters" in info.value.message and bad not in info.value.message
    with pytest.raises(DeploymentError) as info:
        hosted(personas.workspace, config={"extra_headers": {"X-Team": f"a{bad}b"}})
    assert info.value.field == "config.extra_headers" and "X-Team" in info.value.message
    assert not Deployment.objects.exists()
    # a tab is a valid header character
    assert hosted(
        personas.workspace, secret="sk-\t-x", config={"extra_headers": {"X-Team": "a\tb"}}
    ).deployment


def test_a_header_value_stored_before_the_check_still_loads_and_its_calls_say_why(personas):
    from runs.lane_settings import CallSettings

    created = hosted(personas.workspace).deployment
    Deployment.objects.filter(id=created.id).update(config={"extra_headers": {"X-Team": "a\x01b"}})
    deployment = Deployment.objects.get(id=created.id)
    target = CallSettings.of_deployment(deployment).target(deployment)  # no ValidationError
    assert "extra header X-Team contains a control character" in target.header_problem()


@pytest.mark.parametrize(
    ("url", "base"),
    [
        ("https://api.example.com/v1/chat/completions", "https://api.example.com/v1"),
        ("https://api.example.com/v1/chat/completions/", "https://api.example.com/v1"),
        ("https://res.example.com/openai/deployments/d/chat/completions?api-version=2024-10-21",
         "https://res.example.com/openai/deployments/d?api-version=2024-10-21"),
    ],
)  # fmt: skip
def test_a_chat_base_url_that_already_ends_in_chat_completions_is_refused_with_the_base(personas, url, base):
    with pytest.raises(DeploymentError) as info:
        deployment_create(workspace=personas.workspace, name="gpt", kind="openai_chat", url=url, model="m")
    assert (info.value.code, info.value.field) == ("invalid_url", "base_url")
    assert info.value.message.endswith(f"use {base}")
    assert deployment_create(
        workspace=personas.workspace, name="gpt", kind="openai_chat", url=base, model="m"
    )
