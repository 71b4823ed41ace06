"""Creating the async engine. Nothing here reads configuration: callers pass the URL."""

from __future__ import annotations

from typing import Any

import asyncpg
from sqlalchemy import event
from sqlalchemy.exc import DBAPIError, DisconnectionError, InterfaceError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

#: SQLSTATEs (and classes) that say "try again": connection trouble, a server starting or shutting
#: down, too many connections, a serialization failure or a deadlock.
TRANSIENT_SQLSTATES = ("08", "57P01", "57P02", "57P03", "53300", "40001", "40P01")
#: The SQLSTATE of a statement cancelled by ``statement_timeout``.
STATEMENT_TIMEOUT_SQLSTATE = "57014"


def make_engine(
    database_url: str,
    *,
    pool_size: int = 5,
    application_name: str = "schedd",
    server_settings: dict[str, str] | None = None,
) -> AsyncEngine:
    """An engine over asyncpg. ``database_url`` is ``postgresql+asyncpg://...``.

    ``server_settings`` are PostgreSQL settings for every connection of the engine, e.g.
    ``idle_in_transaction_session_timeout``. JIT compilation is off for every service: schedd's
    statements are short OLTP statements, for which compiling costs far more than it saves (and
    whether PostgreSQL compiles follows cost estimates that depend on statistics).

    A pooled connection that the server closed (PostgreSQL restarted, the backend was
    terminated) is noticed when it is checked out and replaced with a new one, so the first
    request after a database restart does not fail on a dead connection. This costs no round
    trip: asyncpg learns that its socket closed as soon as the server closes it.
    """
    engine = create_async_engine(
        database_url,
        pool_size=pool_size,
        max_overflow=pool_size,
        pool_pre_ping=False,
        pool_recycle=3600,
        connect_args={
            "server_settings": {"application_name": application_name, "jit": "off", **(server_settings or {})}
        },
    )
    event.listen(engine.sync_engine.pool, "checkout", _replace_closed)
    return engine


def _replace_closed(dbapi_connection: Any, _record: Any, _proxy: Any) -> None:
    raw = getattr(dbapi_connection, "_connection", None)
    if raw is not None and raw.is_closed():
        # The pool discards this connection and checks out (or opens) another.
        raise DisconnectionError("the server closed this pooled connection")


def is_transient(exc: BaseException) -> bool:
    """Whether ``exc`` says the database could not do it *now* (try again), rather than that what
    was asked is wrong: a broken or refused connection, a restart, a deadlock."""
    if isinstance(exc, OSError | InterfaceError | TimeoutError | asyncpg.InterfaceError):
        return True
    if isinstance(exc, asyncpg.PostgresError):  # raised by statements run directly (schedd_store.direct)
        return str(exc.sqlstate or "").startswith(TRANSIENT_SQLSTATES)
    if isinstance(exc, DBAPIError):
        if exc.connection_invalidated:
            return True
        return str(getattr(exc.orig, "sqlstate", "") or "").startswith(TRANSIENT_SQLSTATES)
    return False


def is_statement_timeout(exc: BaseException) -> bool:
    """Whether ``exc`` says PostgreSQL cancelled a statement that ran past ``statement_timeout``."""
    if isinstance(exc, asyncpg.PostgresError):
        return bool(exc.sqlstate == STATEMENT_TIMEOUT_SQLSTATE)
    return isinstance(exc, DBAPIError) and getattr(exc.orig, "sqlstate", None) == STATEMENT_TIMEOUT_SQLSTATE


class DatabaseErrors:
    """The database's failures as the gRPC servers' error table tells them apart
    (``schedd_rpc.errors.BackendErrors``): transient ones become UNAVAILABLE, statement timeouts
    DEADLINE_EXCEEDED."""

    def is_transient(self, exc: BaseException) -> bool:
        return is_transient(exc)

    def is_timeout(self, exc: BaseException) -> bool:
        return is_statement_timeout(exc)


DATABASE_ERRORS = DatabaseErrors()
