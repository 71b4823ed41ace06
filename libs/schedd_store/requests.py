"""Idempotent requests and the constraints behind domain errors.

A mutating API call may carry a ``request_id``. :func:`claim_request`, called first inside the
call's transaction, records ``(method, request_id)`` with a hash of the request body:

- the first time, it returns None and the caller goes on (and names what it made with
  :func:`record_resource` before committing);
- a retry with the same body returns the resource the first call made, and the caller answers
  with it, doing nothing twice (a concurrent retry waits for the first call to commit);
- the same request id with another body raises AlreadyExists naming the request id.

:func:`constraint_error` maps the name of a violated unique constraint to the domain error it
means, instead of guessing from ``ON CONFLICT DO NOTHING``.
"""

from __future__ import annotations

from collections.abc import Mapping

from asyncpg import IntegrityConstraintViolationError

from schedd_core.errors import AlreadyExists, InvalidArgument, ScheddError, quote
from schedd_core.limits import MAX_REQUEST_ID_CHARS
from schedd_core.request_key import RequestKey
from schedd_store import statements as sql
from schedd_store.database import Connection


async def claim_request(conn: Connection, method: str, request_id: str, body_hash: str) -> str | None:
    """Record the request; the resource an identical earlier request made, or None the first time."""
    if len(request_id) > MAX_REQUEST_ID_CHARS:
        raise InvalidArgument("request_id", f"is longer than {MAX_REQUEST_ID_CHARS} characters")
    params = {"method": method, "request_id": request_id, "body_hash": body_hash}
    if (await conn.execute(sql.CLAIM_REQUEST, params)).first() is not None:
        return None
    earlier = (await conn.execute(sql.FIND_REQUEST, params)).one()
    if earlier.body_hash != body_hash:
        raise AlreadyExists(
            f"request_id {quote(request_id)} was already used for a different {method} request"
        )
    return str(earlier.resource)


async def record_resource(conn: Connection, method: str, request_id: str, resource: str) -> None:
    await conn.execute(
        sql.RECORD_REQUEST_RESOURCE, {"method": method, "request_id": request_id, "resource": resource}
    )


async def earlier_outcome(conn: Connection, method: str, request: RequestKey | None) -> str | None:
    """For a call that may carry a request id: None when it is new (go on, then
    :func:`record_outcome`), else what the first call recorded (answer with it, do nothing)."""
    if request is None:
        return None
    return await claim_request(conn, method, request.request_id, request.body_hash)


async def record_outcome(conn: Connection, method: str, request: RequestKey | None, outcome: str) -> None:
    """Record what a call with a request id did (nothing to record without one)."""
    if request is not None:
        await record_resource(conn, method, request.request_id, outcome)


def constraint_error(
    exc: IntegrityConstraintViolationError, meanings: Mapping[str, ScheddError]
) -> ScheddError | None:
    """The domain error for the unique constraint ``exc`` violated, if ``meanings`` names it."""
    name = exc.constraint_name
    return meanings.get(name) if name else None
