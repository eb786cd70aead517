"""Request signatures and signed asset download URLs."""

from __future__ import annotations

import hashlib
import hmac
from datetime import timedelta

import pytest
import time_machine

from agentclash_site.lib.signing import (
    SIGNATURE_HEADER,
    InvalidAssetToken,
    generate_signing_key,
    sign_body,
    signature_headers,
    signed_asset_url,
    verify_asset_token,
    verify_signature,
)


def test_the_signature_is_the_hex_hmac_sha256_of_the_exact_body():
    body = b'{"protocol_version":"1"}'
    expected = hmac.new(b"key-1", body, hashlib.sha256).hexdigest()
    assert sign_body(body, "key-1") == f"sha256={expected}"
    assert signature_headers(body, "key-1") == {SIGNATURE_HEADER: f"sha256={expected}"}


def test_no_key_means_no_signature_header():
    assert signature_headers(b"{}", None) == {}
    assert signature_headers(b"{}", "") == {}


def test_verification_fails_for_another_body_or_key():
    header = sign_body(b"a", "k")
    assert verify_signature(b"a", "k", header)
    assert not verify_signature(b"b", "k", header)
    assert not verify_signature(b"a", "other", header)
    assert not verify_signature(b"a", "k", None)


def test_signing_keys_are_random_and_long():
    a, b = generate_signing_key(), generate_signing_key()
    assert a != b
    assert len(a) >= 40


def test_a_signed_asset_url_carries_a_token_for_that_asset():
    url = signed_asset_url("6f1c", base_url="http://127.0.0.1:8000/", ttl=timedelta(minutes=5))
    assert url.startswith("http://127.0.0.1:8000/assets/signed/")
    assert verify_asset_token(url.rsplit("/", 1)[1]) == "6f1c"


def test_an_asset_token_expires():
    with time_machine.travel("2026-01-01 12:00:00Z", tick=False):
        token = signed_asset_url("a1", base_url="http://x", ttl=60).rsplit("/", 1)[1]
    with time_machine.travel("2026-01-01 12:00:59Z", tick=False):
        assert verify_asset_token(token) == "a1"
    with (
        time_machine.travel("2026-01-01 12:01:01Z", tick=False),
        pytest.raises(InvalidAssetToken, match="expired"),
    ):
        verify_asset_token(token)


def test_a_tampered_asset_token_is_refused():
    token = signed_asset_url("a1", base_url="http://x", ttl=60).rsplit("/", 1)[1]
    with pytest.raises(InvalidAssetToken):
        verify_asset_token(token[:-2] + ("AA" if not token.endswith("AA") else "BB"))
    with pytest.raises(InvalidAssetToken):
        verify_asset_token("garbage")
