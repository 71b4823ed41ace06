"""Creating the store's engine, and telling its failures apart. Nothing here reads configuration:
callers pass the URL."""

from __future__ import annotations

import asyncpg

from schedd_core.database_url import asyncpg_dsn
from schedd_store.database import Engine

#: SQLSTATEs (and classes) that say "try again": connection trouble, a server starting or shutting
#: down, too many connections, a serialization failure or a deadlock.
TRANSIENT_SQLSTATES = ("08", "57P01", "57P02", "57P03", "53300", "40001", "40P01")
#: The SQLSTATE of a statement cancelled by ``statement_timeout``.
STATEMENT_TIMEOUT_SQLSTATE = "57014"
#: Server settings for an engine whose statements all find their rows by key (ids, attempt ids,
#: worker ids) and write the states that partial indexes cover as literals, so that one generic plan
#: serves every execution. By default PostgreSQL plans such a statement afresh on every execution
#: when its generic plan's estimates (ten rows for each ``unnest`` of a parameter) look costlier:
#: for the registry's result statement that is about a fifth of its time. Not for a statement
#: whose best plan depends on its parameters' values (a state given as a parameter where a partial
#: index covers it; a join planned from a guessed row count, such as the rows a ``LIMIT`` of a
#: parameter lets through, unless it looks its rows up by key: ``statements.claimed``): its
#: generic plan may read a table through. ``tests/integration/test_query_plans.py`` checks the
#: generic plans of the statements that run on such an engine.
GENERIC_PLANS = {"plan_cache_mode": "force_generic_plan"}


def make_engine(
    database_url: str,
    *,
    pool_size: int = 5,
    application_name: str = "schedd",
    server_settings: dict[str, str] | None = None,
) -> Engine:
    """A pool of at most ``2 * pool_size`` connections to ``database_url`` (``postgresql://...`` or
    ``postgresql+asyncpg://...``), opened as they are needed (:class:`schedd_store.database.Engine`).

    ``server_settings`` are PostgreSQL settings for every connection of the engine, e.g.
    ``idle_in_transaction_session_timeout``. JIT compilation is off for every service: schedd's
    statements are short OLTP statements, for which compiling costs far more than it saves (and
    whether PostgreSQL compiles follows cost estimates that depend on statistics).
    """
    return Engine(
        asyncpg_dsn(database_url),
        max_size=2 * pool_size,
        server_settings={"application_name": application_name, "jit": "off", **(server_settings or {})},
    )


def is_transient(exc: BaseException) -> bool:
    """Whether ``exc`` says the database could not do it *now* (try again), rather than that what
    was asked is wrong: a broken or refused connection, a restart, a deadlock. asyncpg's
    ``InternalClientError`` is how a connection the server has just ended fails before asyncpg
    noticed the end (``schedd_store.database`` closes it)."""
    if isinstance(exc, OSError | TimeoutError | asyncpg.InterfaceError | asyncpg.InternalClientError):
        return True
    if isinstance(exc, asyncpg.PostgresError):
        return str(exc.sqlstate or "").startswith(TRANSIENT_SQLSTATES)
    return False


def is_statement_timeout(exc: BaseException) -> bool:
    """Whether ``exc`` says PostgreSQL cancelled a statement that ran past ``statement_timeout``."""
    return isinstance(exc, asyncpg.PostgresError) and exc.sqlstate == STATEMENT_TIMEOUT_SQLSTATE


class DatabaseErrors:
    """The database's failures as the gRPC servers' error table tells them apart
    (``schedd_rpc.errors.BackendErrors``): transient ones become UNAVAILABLE, statement timeouts
    DEADLINE_EXCEEDED."""

    def is_transient(self, exc: BaseException) -> bool:
        return is_transient(exc)

    def is_timeout(self, exc: BaseException) -> bool:
        return is_statement_timeout(exc)


DATABASE_ERRORS = DatabaseErrors()
