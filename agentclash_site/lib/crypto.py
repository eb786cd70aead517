"""Secret encryption at rest (Fernet, key from ``FIELD_ENCRYPTION_KEY``).

Key rotation, as Django's ``SECRET_KEY_FALLBACKS``: secrets are encrypted with
``FIELD_ENCRYPTION_KEY`` and decrypted with it or any of ``FIELD_ENCRYPTION_KEY_FALLBACKS``;
``manage.py encryption rotate`` re-encrypts every stored secret with the current key, after
which the old keys can be dropped.

``cryptography`` is imported when a secret is encrypted or decrypted: every process imports
this module with the models, and most (``eval start``, the web pages) never touch a secret."""

from __future__ import annotations

import base64
import binascii
from typing import TYPE_CHECKING

from agentclash_site.lib.env import ConfigError

if TYPE_CHECKING:
    from cryptography.fernet import MultiFernet


def validate_fernet_key(key: str, *, name: str) -> None:
    try:
        raw = base64.urlsafe_b64decode(key.encode())
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) != 32:
        raise ConfigError(
            f"{name} must be a Fernet key (urlsafe base64 of 32 bytes); generate one with "
            '(python -c "from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())")'
        )


def _fernet() -> MultiFernet:
    """The current key first (it encrypts), then the fallbacks (they only decrypt)."""
    from cryptography.fernet import Fernet, MultiFernet
    from django.conf import settings

    keys = [settings.FIELD_ENCRYPTION_KEY, *getattr(settings, "FIELD_ENCRYPTION_KEY_FALLBACKS", [])]
    return MultiFernet([Fernet(key.encode()) for key in keys])


def encrypt_text(plain: str) -> str:
    return _fernet().encrypt(plain.encode()).decode()


class DecryptionError(Exception):
    pass


def decrypt_text(token: str) -> str:
    from cryptography.fernet import InvalidToken

    try:
        return _fernet().decrypt(token.encode()).decode()
    except InvalidToken:
        raise DecryptionError(UNREADABLE) from None


UNREADABLE = (
    "stored secret cannot be decrypted with FIELD_ENCRYPTION_KEY or FIELD_ENCRYPTION_KEY_FALLBACKS "
    "(after changing the key, list the old one in FIELD_ENCRYPTION_KEY_FALLBACKS)"
)


def reencrypt_text(token: str) -> str:
    """The same secret encrypted with the current key (read with any key); DecryptionError
    when no key reads it."""
    from cryptography.fernet import InvalidToken

    try:
        return _fernet().rotate(token.encode()).decode()
    except InvalidToken:
        raise DecryptionError(UNREADABLE) from None
