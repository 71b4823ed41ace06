"""Bearer tokens in the store: created (the secret returned once, its hash kept), listed, revoked,
and looked up to authenticate a call.

A lookup reads the row on every call, so a revocation or an expiry takes effect on the next call
(``tests/e2e/test_auth.py::test_a_revoked_or_expired_token_is_refused_at_once``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine

from schedd_auth.roles import ROLES, WORKER
from schedd_auth.tokens import Token, matches, new_token
from schedd_core.errors import AlreadyExists, InvalidArgument, NotFound, quote
from schedd_core.spec import check_id
from schedd_store import statements as sql
from schedd_store.requests import constraint_error


@dataclass(frozen=True)
class TokenRecord:
    token_id: str
    name: str
    role: str
    worker_id: str | None
    created_at: datetime
    created_by: str
    expires_at: datetime | None
    revoked_at: datetime | None


def _record(row: object) -> TokenRecord:
    return TokenRecord(
        token_id=row.token_id,  # type: ignore[attr-defined]
        name=row.name,  # type: ignore[attr-defined]
        role=row.role,  # type: ignore[attr-defined]
        worker_id=row.worker_id,  # type: ignore[attr-defined]
        created_at=row.created_at,  # type: ignore[attr-defined]
        created_by=row.created_by,  # type: ignore[attr-defined]
        expires_at=row.expires_at,  # type: ignore[attr-defined]
        revoked_at=row.revoked_at,  # type: ignore[attr-defined]
    )


async def create_token(
    engine: AsyncEngine,
    name: str,
    role: str,
    *,
    worker_id: str | None = None,
    expires_at: datetime | None = None,
    created_by: str = "",
    token: Token | None = None,
) -> tuple[TokenRecord, Token]:
    """Store a new token (or ``token``, for a bootstrap token given by the operator) and return it
    with its secret; AlreadyExists when the name is taken."""
    check_id("name", name)
    if role not in ROLES:
        raise InvalidArgument("role", f"must be one of {', '.join(ROLES)}, not {quote(role)}")
    if worker_id:
        if role != WORKER:
            raise InvalidArgument("worker_id", "is only for tokens of role worker")
        check_id("worker_id", worker_id)
    if expires_at is not None and expires_at.tzinfo is None:
        raise InvalidArgument("expire_time", "must carry a time zone")
    token = token or new_token()
    params = {
        "token_id": token.token_id,
        "name": name,
        "secret_sha256": token.digest,
        "role": role,
        "worker_id": worker_id or None,
        "created_by": created_by,
        "expires_at": expires_at,
    }
    try:
        async with engine.begin() as conn:
            row = (await conn.execute(sql.INSERT_TOKEN, params)).one()
    except IntegrityError as exc:
        error = constraint_error(
            exc,
            {
                "api_tokens_name_key": AlreadyExists(f"token {quote(name)} exists already"),
                "api_tokens_pkey": AlreadyExists("that token exists already"),
            },
        )
        if error is None:
            raise
        raise error from None
    return _record(row), token


@dataclass(frozen=True)
class Lookup:
    """What a token string authenticates as: a record, or why not."""

    record: TokenRecord | None
    refusal: str = ""


async def authenticate(engine: AsyncEngine, token: Token) -> Lookup:
    """The token's record if its secret matches and it is neither revoked nor expired; otherwise
    the reason (an unknown id and a wrong secret give the same one)."""
    async with engine.connect() as conn:
        row = (await conn.execute(sql.TOKEN_BY_ID, {"token_id": token.token_id})).first()
    if row is None or not matches(token, row.secret_sha256):
        return Lookup(None, "unknown token")
    if row.revoked_at is not None:
        return Lookup(None, f"token {quote(row.name)} was revoked")
    if row.expired:
        return Lookup(None, f"token {quote(row.name)} has expired")
    return Lookup(_record(row))


async def list_tokens(
    engine: AsyncEngine, *, after: str, limit: int, include_revoked: bool
) -> list[TokenRecord]:
    async with engine.connect() as conn:
        rows = (
            await conn.execute(
                sql.LIST_TOKENS, {"after": after, "limit": limit, "include_revoked": include_revoked}
            )
        ).all()
    return [_record(r) for r in rows]


async def revoke_token(engine: AsyncEngine, name: str) -> TokenRecord:
    check_id("name", name)
    async with engine.begin() as conn:
        row = (await conn.execute(sql.REVOKE_TOKEN, {"name": name})).first()
    if row is None:
        raise NotFound(f"token {quote(name)} not found")
    return _record(row)
