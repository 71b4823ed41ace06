"""schedd_store.engine tells transient database failures from others, as asyncpg raises them (every
statement runs on asyncpg: ``schedd_store.database``)."""

from __future__ import annotations

import asyncpg

from schedd_store.engine import is_statement_timeout, is_transient


def _error(kind: type[asyncpg.PostgresError]) -> asyncpg.PostgresError:
    return kind(kind.__name__)


def test_asyncpg_errors_that_say_try_again_are_transient() -> None:
    assert is_transient(_error(asyncpg.DeadlockDetectedError))
    assert is_transient(_error(asyncpg.SerializationError))
    assert is_transient(_error(asyncpg.AdminShutdownError))
    assert is_transient(asyncpg.ConnectionDoesNotExistError("closed"))
    # a connection the server ended before asyncpg read its end of stream
    assert is_transient(
        asyncpg.InternalClientError("cannot switch to state 15; another operation (2) is in progress")
    )


def test_asyncpg_errors_that_say_the_request_is_wrong_are_not() -> None:
    assert not is_transient(_error(asyncpg.UniqueViolationError))
    assert not is_transient(_error(asyncpg.InvalidTextRepresentationError))
    assert not is_statement_timeout(_error(asyncpg.UniqueViolationError))
    assert is_statement_timeout(_error(asyncpg.QueryCanceledError))
