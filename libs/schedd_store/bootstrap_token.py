"""The bootstrap admin token: ``SCHEDD_BOOTSTRAP_TOKEN`` stored as ``bootstrap-admin`` at start-up,
and rotated when it changes.

At each start of an api replica, in one transaction serialised with every other replica's:

* no ``bootstrap-admin`` yet: the given token is stored under that name (role admin);
* ``bootstrap-admin`` is the given token: nothing changes (revoked, it stays revoked);
* ``bootstrap-admin`` is another token: that one is revoked and renamed
  ``bootstrap-admin-retired-<its id>``, and the given one is stored as ``bootstrap-admin``. The old
  token is refused from the next call on;
* the given token was stored before under another name (a retired bootstrap token, or any other
  token), or carries the stored token's id with another secret: nothing changes and the start-up
  is refused (:class:`~schedd_core.errors.InvalidArgument` naming ``SCHEDD_BOOTSTRAP_TOKEN``), so a
  replica still configured with a replaced token can never bring it back.

Not guaranteed: that calls already admitted under the old token end; each call looks its token up
when it starts.
"""

from __future__ import annotations

from dataclasses import dataclass

from schedd_auth.tokens import Token, matches
from schedd_core.errors import InvalidArgument, quote
from schedd_store import statements as sql
from schedd_store.database import Engine

#: The name under which ``SCHEDD_BOOTSTRAP_TOKEN`` is stored.
NAME = "bootstrap-admin"
#: The name a replaced bootstrap token keeps: ``bootstrap-admin-retired-<token id>``.
RETIRED_PREFIX = f"{NAME}-retired-"
_FIELD = "SCHEDD_BOOTSTRAP_TOKEN"


@dataclass(frozen=True)
class Outcome:
    """What a start-up did: stored the token (``stored``), and which token it replaced, if any."""

    stored: bool
    retired_token_id: str = ""


async def ensure(engine: Engine, token: Token) -> Outcome:
    """Store or rotate the bootstrap token as the module docstring says; InvalidArgument when the
    given token may not become the bootstrap token (nothing is changed then)."""
    async with engine.begin() as conn:
        await conn.execute(sql.LOCK_BOOTSTRAP_TOKEN)
        current = (await conn.execute(sql.TOKEN_BY_NAME, {"name": NAME})).first()
        known = (await conn.execute(sql.TOKEN_BY_ID, {"token_id": token.token_id})).first()
        if current is not None and current.token_id == token.token_id:
            if not matches(token, current.secret_sha256):
                raise InvalidArgument(
                    _FIELD, f"has the id of the stored {NAME} token but another secret; nothing was changed"
                )
            return Outcome(stored=False)
        if known is not None:
            raise InvalidArgument(_FIELD, _reused(known.name))
        if current is not None:
            await conn.execute(
                sql.RETIRE_TOKEN,
                {"token_id": current.token_id, "retired_name": RETIRED_PREFIX + current.token_id},
            )
        await conn.execute(
            sql.INSERT_BOOTSTRAP_TOKEN,
            {"token_id": token.token_id, "name": NAME, "secret_sha256": token.digest},
        )
    return Outcome(stored=True, retired_token_id=current.token_id if current is not None else "")


def _reused(name: str) -> str:
    if name.startswith(RETIRED_PREFIX):
        return (
            f"was the {NAME} token until a newer one replaced and revoked it ({quote(name)}); "
            "set the current bootstrap token, or a new one to rotate again"
        )
    return f"is the token {quote(name)} already; a bootstrap token must be a new token"
