"""Request signatures for agents, and signed expiring download URLs for assets.

Request signing (spec/agent-protocol.md "hosted_http request"): the HMAC-SHA256 of the
exact request body bytes, keyed with the deployment's signing key (its UTF-8 bytes), sent
as ``X-AgentClash-Signature: sha256=<hex>``. An agent verifies with
:func:`verify_signature` (or the same three lines in any language). No key, no header.

Asset URLs: agents download case assets without an API token through
``{PUBLIC_BASE_URL}/assets/signed/<token>``, where the token is a
``django.core.signing`` value carrying the asset's public id and an expiry. The download
view (packs app) calls :func:`verify_asset_token` and serves the file.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from datetime import timedelta

from django.core import signing

SIGNATURE_HEADER = "X-AgentClash-Signature"
SIGNATURE_PREFIX = "sha256="
SIGNING_KEY_PREFIX = "acsk_"

ASSET_TOKEN_SALT = "agentclash.asset-download"
ASSET_DOWNLOAD_PATH = "/assets/signed/{token}"
DEFAULT_ASSET_TTL = timedelta(hours=24)


def generate_signing_key() -> str:
    """A new random signing key (256 bits), shown once to the user."""
    return SIGNING_KEY_PREFIX + secrets.token_urlsafe(32)


def sign_body(body: bytes, key: str) -> str:
    """The header value: ``sha256=`` and the hex HMAC-SHA256 of ``body`` under ``key``."""
    return SIGNATURE_PREFIX + hmac.new(key.encode(), body, hashlib.sha256).hexdigest()


def signature_headers(body: bytes, key: str | None) -> dict[str, str]:
    """``{X-AgentClash-Signature: ...}``, or nothing when there is no key."""
    if not key:
        return {}
    return {SIGNATURE_HEADER: sign_body(body, key)}


def verify_signature(body: bytes, key: str, header_value: str | None) -> bool:
    """Constant-time check of a received signature header against ``body``."""
    if not header_value or not key:
        return False
    return hmac.compare_digest(sign_body(body, key), header_value.strip())


# --- signed asset download URLs ----------------------------------------------------------


class InvalidAssetToken(signing.BadSignature):
    """The token was tampered with, is malformed, or has expired."""


def asset_token(asset_public_id: object, *, ttl: timedelta | float = DEFAULT_ASSET_TTL) -> str:
    seconds = ttl.total_seconds() if isinstance(ttl, timedelta) else float(ttl)
    if seconds <= 0:
        raise ValueError("ttl must be positive")
    expires = int(time.time() + seconds)
    return signing.dumps({"a": str(asset_public_id), "e": expires}, salt=ASSET_TOKEN_SALT, compress=False)


def signed_asset_url(
    asset_public_id: object, *, base_url: str, ttl: timedelta | float = DEFAULT_ASSET_TTL
) -> str:
    """An absolute URL an agent can fetch without credentials until ``ttl`` passes."""
    token = asset_token(asset_public_id, ttl=ttl)
    return base_url.rstrip("/") + ASSET_DOWNLOAD_PATH.format(token=token)


def verify_asset_token(token: str) -> str:
    """The asset public id (a string) the token grants; raises :class:`InvalidAssetToken`."""
    try:
        data = signing.loads(token, salt=ASSET_TOKEN_SALT)
    except signing.BadSignature:
        raise InvalidAssetToken("invalid asset link") from None
    if not isinstance(data, dict) or not isinstance(data.get("a"), str) or not isinstance(data.get("e"), int):
        raise InvalidAssetToken("invalid asset link")
    if data["e"] < time.time():
        raise InvalidAssetToken("this asset link has expired")
    return data["a"]
