"""Secret encryption at rest (Fernet, key from ``FIELD_ENCRYPTION_KEY``).

``cryptography`` is imported when a secret is encrypted or decrypted: every process imports
this module with the models, and most (``eval start``, the web pages) never touch a secret."""

from __future__ import annotations

import base64
import binascii
from typing import TYPE_CHECKING

from agentclash_site.lib.env import ConfigError

if TYPE_CHECKING:
    from cryptography.fernet import Fernet


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


def _fernet() -> Fernet:
    from cryptography.fernet import Fernet
    from django.conf import settings

    return Fernet(settings.FIELD_ENCRYPTION_KEY.encode())


def encrypt_text(plain: str) -> str:
    return _fernet().encrypt(plain.encode()).decode()


class DecryptionError(Exception):
    pass


def decrypt_text(token: str) -> str:
    from cryptography.fernet import InvalidToken

    try:
        return _fernet().decrypt(token.encode()).decode()
    except InvalidToken:
        raise DecryptionError("stored secret cannot be decrypted with FIELD_ENCRYPTION_KEY") from None
