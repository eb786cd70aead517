"""Rotating FIELD_ENCRYPTION_KEY: the old key in FIELD_ENCRYPTION_KEY_FALLBACKS still reads
stored secrets, and ``manage.py encryption rotate`` re-encrypts them with the new key, so the
fallback can be dropped. Before, a changed key made every stored secret unreadable at once
(deployments failed secret_unreadable, judges stopped) and there was no way through."""

from __future__ import annotations

import contextlib

import pytest
from cryptography.fernet import Fernet
from django.test import override_settings

from agentclash_site.lib.crypto import DecryptionError
from grading.models import JudgeProviderConfig
from runs.models import Deployment
from runs.services.deployments import deployment_create
from tests.commands import json_command
from tests.site.test_settings import _manage

OLD, NEW, OTHER = (Fernet.generate_key().decode() for _ in range(3))


@pytest.fixture
def stored(personas):
    with override_settings(FIELD_ENCRYPTION_KEY=OLD, FIELD_ENCRYPTION_KEY_FALLBACKS=[]):
        created = deployment_create(
            workspace=personas.workspace,
            name="agent",
            kind="hosted_http",
            url="https://agent.example/run",
            secret="s3cret-value",
        )
        judge = JudgeProviderConfig(
            workspace=personas.workspace, kind="openai", base_url="https://judge.example/v1"
        )
        judge.set_api_key("sk-judge-key")
        judge.save()
    return created.deployment.pk, created.signing_key, judge.pk


def _read(deployment_pk, judge_pk):
    deployment = Deployment.objects.get(pk=deployment_pk)
    judge = JudgeProviderConfig.objects.get(pk=judge_pk)
    return deployment.get_secret(), deployment.get_signing_key(), judge.api_key()


def test_the_old_key_as_a_fallback_reads_secrets_and_rotate_rewrites_them_with_the_new_key(stored):
    deployment_pk, signing_key, judge_pk = stored
    with (
        override_settings(FIELD_ENCRYPTION_KEY=NEW, FIELD_ENCRYPTION_KEY_FALLBACKS=[]),
        pytest.raises(DecryptionError, match="FIELD_ENCRYPTION_KEY_FALLBACKS"),
    ):
        _read(deployment_pk, judge_pk)
    with override_settings(FIELD_ENCRYPTION_KEY=NEW, FIELD_ENCRYPTION_KEY_FALLBACKS=[OLD]):
        assert _read(deployment_pk, judge_pk) == ("s3cret-value", signing_key, "sk-judge-key")
        code, doc = json_command("encryption", "rotate", "--json")
    assert (code, doc) == (0, {"rotated": 3, "unreadable": []})
    with override_settings(FIELD_ENCRYPTION_KEY=NEW, FIELD_ENCRYPTION_KEY_FALLBACKS=[]):
        assert _read(deployment_pk, judge_pk) == ("s3cret-value", signing_key, "sk-judge-key")


def test_a_secret_no_key_reads_is_listed_and_left_as_it_is(stored, personas):
    deployment_pk, _signing_key, judge_pk = stored
    with override_settings(FIELD_ENCRYPTION_KEY=OTHER, FIELD_ENCRYPTION_KEY_FALLBACKS=[]):
        other = deployment_create(
            workspace=personas.workspace,
            name="other",
            kind="hosted_http",
            url="https://other.example/run",
            secret="other-secret",
        ).deployment
    before = Deployment.objects.get(pk=deployment_pk).secret_encrypted
    with override_settings(FIELD_ENCRYPTION_KEY=NEW, FIELD_ENCRYPTION_KEY_FALLBACKS=[OTHER]):
        code, doc = json_command("encryption", "rotate", "--json")
    assert code == 1
    error = doc["error"]
    assert error["code"] == "secrets_unreadable" and error["rotated"] == 2  # "other"'s two
    assert {(u["kind"], u["name"], u["field"]) for u in error["unreadable"]} == {
        ("deployment", "acme/agent", "secret_encrypted"),
        ("deployment", "acme/agent", "signing_key_encrypted"),
        ("judge_provider", "acme", "api_key_encrypted"),
    }
    assert "FIELD_ENCRYPTION_KEY_FALLBACKS" in error["message"]
    assert Deployment.objects.get(pk=deployment_pk).secret_encrypted == before  # untouched
    with override_settings(FIELD_ENCRYPTION_KEY=NEW, FIELD_ENCRYPTION_KEY_FALLBACKS=[]):
        assert Deployment.objects.get(pk=other.pk).get_secret() == "other-secret"


def test_a_fallback_that_is_not_a_fernet_key_is_refused_at_start_up():
    env = {"FIELD_ENCRYPTION_KEY": NEW, "FIELD_ENCRYPTION_KEY_FALLBACKS": f"{OLD}, not-a-key"}
    result = _manage(["check"], env)
    assert result.returncode != 0
    assert "each entry of FIELD_ENCRYPTION_KEY_FALLBACKS must be a Fernet key" in result.stderr


def test_fallbacks_with_spaces_empty_entries_and_repeats_are_read_as_the_distinct_keys():
    from agentclash_site.lib.env import env_list

    raw = f" {OLD} ,, {OLD},{NEW} , "
    assert env_list("K", [], {"K": raw}) == [OLD, OLD, NEW]
    env = {"FIELD_ENCRYPTION_KEY": NEW, "FIELD_ENCRYPTION_KEY_FALLBACKS": raw}
    result = _manage(["check"], env)
    assert result.returncode == 0, result.stderr
    bad = _manage(
        ["check"], {"FIELD_ENCRYPTION_KEY": NEW, "FIELD_ENCRYPTION_KEY_FALLBACKS": f"{OLD}, {OTHER[:30]}"}
    )
    assert bad.returncode != 0 and OTHER[:30] not in bad.stderr + bad.stdout  # the key is never echoed


@pytest.mark.parametrize("fallbacks", [[OLD, OLD, NEW], []], ids=["readable", "unreadable"])
def test_rotate_never_prints_or_logs_a_secret_or_a_key(stored, fallbacks, caplog):
    from io import StringIO

    from django.core.management import call_command

    deployment_pk, signing_key, judge_pk = stored
    tokens = [
        Deployment.objects.get(pk=deployment_pk).secret_encrypted,
        JudgeProviderConfig.objects.get(pk=judge_pk).api_key_encrypted,
    ]
    said = []
    for json_flag in ([], ["--json"]):
        out, err = StringIO(), StringIO()
        with (
            override_settings(FIELD_ENCRYPTION_KEY=NEW, FIELD_ENCRYPTION_KEY_FALLBACKS=fallbacks),
            contextlib.suppress(SystemExit),  # exit 1 when some are unreadable
        ):
            call_command("encryption", "rotate", *json_flag, stdout=out, stderr=err)
        said += [out.getvalue(), err.getvalue()]
    said.append(caplog.text)
    text = "\n".join(said)
    assert "acme/agent" in text or "re-encrypted" in text  # it did say something
    for secret in ("s3cret-value", signing_key, "sk-judge-key", OLD, NEW, *tokens):
        assert secret not in text


@pytest.mark.django_db(transaction=True)
def test_a_rotation_interrupted_inside_a_row_leaves_that_row_as_it_was(stored, monkeypatch):
    from agentclash_site.workspaces.management.commands import encryption

    deployment_pk, signing_key, judge_pk = stored
    before = Deployment.objects.filter(pk=deployment_pk).values_list(
        "secret_encrypted", "signing_key_encrypted"
    )
    before = list(before)
    original, calls = encryption.reencrypt_text, []

    def interrupted(token):
        calls.append(token)
        if len(calls) == 2:  # the deployment's second field
            raise KeyboardInterrupt
        return original(token)

    monkeypatch.setattr(encryption, "reencrypt_text", interrupted)
    with (
        override_settings(FIELD_ENCRYPTION_KEY=NEW, FIELD_ENCRYPTION_KEY_FALLBACKS=[OLD]),
        pytest.raises(KeyboardInterrupt),
    ):
        encryption.rotate_all()
    after = list(
        Deployment.objects.filter(pk=deployment_pk).values_list("secret_encrypted", "signing_key_encrypted")
    )
    assert after == before  # not one field of the two re-encrypted
    monkeypatch.setattr(encryption, "reencrypt_text", original)
    with override_settings(FIELD_ENCRYPTION_KEY=NEW, FIELD_ENCRYPTION_KEY_FALLBACKS=[OLD]):
        assert encryption.rotate_all() == {"rotated": 3, "unreadable": []}  # run again, it completes
    with override_settings(FIELD_ENCRYPTION_KEY=NEW, FIELD_ENCRYPTION_KEY_FALLBACKS=[]):
        assert _read(deployment_pk, judge_pk) == ("s3cret-value", signing_key, "sk-judge-key")
