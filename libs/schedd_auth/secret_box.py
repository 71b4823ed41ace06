"""Encryption at rest of variable and connection values: a keyring of Fernet keys.

The keys come from ``SCHEDD_SECRETS_KEYS`` (comma-separated, newest first) or from the file named by
``SCHEDD_SECRETS_KEYS_FILE`` (one key a line, newest first; the file wins when both are set). The
first key encrypts; every key decrypts (:class:`cryptography.fernet.MultiFernet`), so rotating is:
put a new key first, restart the api, registry and scheduler, run ``schedctl secrets rotate`` (which
re-encrypts every stored value with the first key), then drop the old key.

Guaranteed: a stored value is a Fernet token (AES-128-CBC with HMAC-SHA256), so a database dump
without the key reveals neither a value nor, beyond its length, anything about it, and a tampered
token fails to decrypt (:class:`SecretKeyError`) instead of yielding another value. Not guaranteed:
anything once the key is read (a process holding the key reads every value), and the names of
variables and connections, which are stored in clear.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from cryptography.fernet import Fernet, InvalidToken, MultiFernet

from schedd_core.errors import FailedPrecondition

KEYS_ENV = "SCHEDD_SECRETS_KEYS"
KEYS_FILE_ENV = "SCHEDD_SECRETS_KEYS_FILE"


class SecretKeyError(FailedPrecondition):
    """The keys are missing or malformed, or a stored value does not decrypt with any of them."""


def new_key() -> str:
    """A fresh random key, as ``schedctl secrets new-key`` prints it."""
    return Fernet.generate_key().decode()


class SecretBox:
    """Encrypts with the first key, decrypts with any."""

    def __init__(self, keys: list[str]) -> None:
        if not keys:
            raise SecretKeyError(f"no encryption key: set {KEYS_ENV} or {KEYS_FILE_ENV}")
        fernets = []
        for number, key in enumerate(keys, start=1):
            try:
                fernets.append(Fernet(key.strip().encode()))
            except (ValueError, TypeError):
                raise SecretKeyError(
                    f"encryption key {number} is not a Fernet key (32 url-safe base64 bytes)"
                ) from None
        self._keys = MultiFernet(fernets)
        self._first = fernets[0]

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> SecretBox | None:
        """The keyring the environment names, or None when it names none."""
        path = env.get(KEYS_FILE_ENV, "")
        if path:
            try:
                text = Path(path).read_text()
            except OSError as exc:
                raise SecretKeyError(f"{KEYS_FILE_ENV}: cannot read the key file ({exc.strerror})") from None
            keys = [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")]
            return cls(keys)
        listed = [k.strip() for k in env.get(KEYS_ENV, "").split(",") if k.strip()]
        return cls(listed) if listed else None

    def encrypt(self, value: str) -> bytes:
        return self._first.encrypt(value.encode())

    def decrypt(self, token: bytes) -> str:
        try:
            return self._keys.decrypt(bytes(token)).decode()
        except InvalidToken:
            raise SecretKeyError("a stored value does not decrypt with any configured key") from None

    def rotate(self, token: bytes) -> bytes:
        """The same value encrypted with the first key (an old key may still decrypt ``token``)."""
        try:
            return self._keys.rotate(bytes(token))
        except InvalidToken:
            raise SecretKeyError("a stored value does not decrypt with any configured key") from None
