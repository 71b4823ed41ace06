"""Bearer tokens: ``sdt_<token id>_<secret>``.

The token id (12 hex characters) is stored as is and finds the token's row; only the SHA-256 of
the secret (43 URL-safe characters, 256 random bits) is stored, so the table cannot be used to
call the API. A random secret of that length needs no slow hash: guessing one is as hard as
guessing the key of a SHA-256 preimage. Comparison is constant-time.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass

PREFIX = "sdt"
_FORM = re.compile(r"^sdt_([0-9a-f]{12})_([A-Za-z0-9_-]{43})$")


@dataclass(frozen=True)
class Token:
    token_id: str
    secret: str

    def __str__(self) -> str:
        return f"{PREFIX}_{self.token_id}_{self.secret}"

    @property
    def digest(self) -> str:
        return digest(self.secret)


def new_token() -> Token:
    return Token(secrets.token_hex(6), secrets.token_urlsafe(32))


def parse(text: str) -> Token | None:
    """The token in ``text``, or None if it does not have a token's form."""
    match = _FORM.match(text.strip())
    return Token(match.group(1), match.group(2)) if match else None


def digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def matches(token: Token, stored_digest: str) -> bool:
    return hmac.compare_digest(token.digest, stored_digest)
