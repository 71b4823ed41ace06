"""Bearer tokens in the store: created (the secret returned once, its hash kept), listed, revoked,
looked up to authenticate a call, and issued to an enrolling worker.

A worker or enrollment token may be limited to queues. An enrollment token (role ``enroll``) may be
limited to a number of uses: each enrollment spends one, in the same transaction as it stores the
worker's new token, conditional in SQL, so concurrent enrollments never exceed it.

A lookup reads the row on every call, so a revocation or an expiry takes effect on the next call
(``tests/e2e/test_auth.py::test_a_revoked_or_expired_token_is_refused_at_once``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from asyncpg import IntegrityConstraintViolationError

from schedd_auth.roles import ENROLL, ROLES, WORKER
from schedd_auth.tokens import Token, matches, new_token
from schedd_core.errors import AlreadyExists, InvalidArgument, NotFound, PermissionDenied, quote
from schedd_core.identifiers import check_id
from schedd_core.limits import MAX_ENROLLED_WORKER_ID_CHARS
from schedd_store import statements as sql
from schedd_store.database import Connection, Engine
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
    #: The queues a worker or enrollment token may subscribe to; empty: any.
    queues: tuple[str, ...] = ()
    #: How many workers an enrollment token may enroll (None: any number), and how many it did.
    max_uses: int | None = None
    uses: int = 0


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
        queues=tuple(row.queues or ()),  # type: ignore[attr-defined]
        max_uses=row.max_uses,  # type: ignore[attr-defined]
        uses=row.uses,  # type: ignore[attr-defined]
    )


async def create_token(
    engine: Engine,
    name: str,
    role: str,
    *,
    worker_id: str | None = None,
    expires_at: datetime | None = None,
    created_by: str = "",
    token: Token | None = None,
    queues: tuple[str, ...] = (),
    max_uses: int | None = None,
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
    _check_limits(role, queues, max_uses)
    if expires_at is not None and expires_at.tzinfo is None:
        raise InvalidArgument("expire_time", "must carry a time zone")
    async with engine.begin() as conn:
        return await _insert(
            conn,
            name,
            role,
            worker_id=worker_id,
            expires_at=expires_at,
            created_by=created_by,
            token=token or new_token(),
            queues=queues,
            max_uses=max_uses,
        )


def _check_limits(role: str, queues: tuple[str, ...], max_uses: int | None) -> None:
    if queues and role not in (WORKER, ENROLL):
        raise InvalidArgument("queues", "are only for tokens of role worker or enroll")
    for i, queue in enumerate(queues):
        check_id(f"queues[{i}]", queue)
    if len(set(queues)) != len(queues):
        raise InvalidArgument("queues", "must not repeat a queue")
    if max_uses is not None:
        if role != ENROLL:
            raise InvalidArgument("max_uses", "is only for tokens of role enroll")
        if max_uses <= 0:
            raise InvalidArgument("max_uses", f"must be positive, not {max_uses}")


async def _insert(
    conn: Connection,
    name: str,
    role: str,
    *,
    worker_id: str | None,
    expires_at: datetime | None,
    created_by: str,
    token: Token,
    queues: tuple[str, ...],
    max_uses: int | None,
) -> tuple[TokenRecord, Token]:
    params = {
        "token_id": token.token_id,
        "name": name,
        "secret_sha256": token.digest,
        "role": role,
        "worker_id": worker_id or None,
        "created_by": created_by,
        "expires_at": expires_at,
        "queues": list(queues),
        "max_uses": max_uses,
    }
    try:
        row = (await conn.execute(sql.INSERT_TOKEN, params)).one()
    except IntegrityConstraintViolationError as exc:
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


async def authenticate(engine: Engine, token: Token) -> Lookup:
    """The token's record if its secret matches and it is neither revoked nor expired; otherwise
    the reason (an unknown id and a wrong secret give the same one)."""
    async with engine.autocommit() as conn:  # one read, on every authenticated call: no transaction
        row = (await conn.execute(sql.TOKEN_BY_ID, {"token_id": token.token_id})).first()
    if row is None or not matches(token, row.secret_sha256):
        return Lookup(None, "unknown token")
    if row.revoked_at is not None:
        return Lookup(None, f"token {quote(row.name)} was revoked")
    if row.expired:
        return Lookup(None, f"token {quote(row.name)} has expired")
    if row.used_up:
        return Lookup(None, f"enrollment token {quote(row.name)} is used up ({row.uses} of {row.max_uses})")
    return Lookup(_record(row))


async def enroll(engine: Engine, enrollment_token_id: str, worker_id: str) -> tuple[TokenRecord, Token]:
    """Issue a worker token bound to ``worker_id`` and to the enrollment token's queues, spending one
    use of the enrollment token, in one transaction.

    Refused (nothing stored, no use spent) with AlreadyExists while a usable token is bound to that
    worker id (an enrollment never takes over a worker that has a credential), and with
    PermissionDenied when the enrollment token is no longer usable (revoked, expired or used up by
    an enrollment that committed first). The new token never expires; revoke it by name
    (``<worker id>.<token id>``)."""
    check_id("worker_id", worker_id)
    if len(worker_id) > MAX_ENROLLED_WORKER_ID_CHARS:
        raise InvalidArgument(
            "worker_id", f"must be at most {MAX_ENROLLED_WORKER_ID_CHARS} characters to enroll"
        )
    token = new_token()
    async with engine.begin() as conn:
        await conn.execute(sql.LOCK_WORKER_ID, {"worker_id": worker_id})
        holder = (await conn.execute(sql.LIVE_TOKEN_OF_WORKER, {"worker_id": worker_id})).scalar()
        if holder is not None:
            raise AlreadyExists(
                f"worker {quote(worker_id)} has a usable token already; revoke it to enroll again"
            )
        spent = (await conn.execute(sql.SPEND_ENROLLMENT, {"token_id": enrollment_token_id})).first()
        if spent is None:
            raise PermissionDenied("the enrollment token is revoked, expired or used up")
        return await _insert(
            conn,
            f"{worker_id}.{token.token_id}",
            WORKER,
            worker_id=worker_id,
            expires_at=None,
            created_by=spent.name,
            token=token,
            queues=tuple(spent.queues),
            max_uses=None,
        )


async def list_tokens(engine: Engine, *, after: str, limit: int, include_revoked: bool) -> list[TokenRecord]:
    async with engine.connect() as conn:
        rows = (
            await conn.execute(
                sql.LIST_TOKENS, {"after": after, "limit": limit, "include_revoked": include_revoked}
            )
        ).all()
    return [_record(r) for r in rows]


async def revoke_token(engine: Engine, name: str) -> TokenRecord:
    check_id("name", name)
    async with engine.begin() as conn:
        row = (await conn.execute(sql.REVOKE_TOKEN, {"name": name})).first()
    if row is None:
        raise NotFound(f"token {quote(name)} not found")
    return _record(row)
