"""The store's pool of PostgreSQL connections and the connections it lends, on asyncpg directly.

An :class:`Engine` lends pooled connections in two ways:

- ``async with engine.begin() as conn``: a transaction, committed when the block ends and rolled
  back when it raises;
- ``async with engine.connect() as conn``: a connection for reading. Its first statement begins a
  transaction that is rolled back when the block ends, so nothing written there is kept; or the
  block opens one itself first with ``async with conn.begin(isolation=...)``;
- ``async with engine.autocommit() as conn``: each statement is a transaction of its own (PostgreSQL's
  implicit one: committed when the statement succeeds, nothing of it kept when it fails), at one
  round trip where ``begin`` takes three (``BEGIN``, the statement, ``COMMIT``). Also for reads on a
  path every call takes (a token, the DAG and the run a ``CreateRun`` reads) where no statement
  needs another's transaction: under read committed each statement reads its own snapshot inside a
  transaction too, and ``connect`` would add ``BEGIN`` and ``ROLLBACK``.

Statements are :class:`schedd_store.named_sql.Statement` (or their text), run with a mapping of
parameters; each returns a :class:`schedd_store.rows.Result`. asyncpg prepares each statement once
per connection (its statement cache) and the pool opens connections when they are first needed.

What a connection guarantees: ``json`` and ``jsonb`` values are read as Python values and written
from JSON text; each connection carries the engine's server settings from its start. A connection
the server closed (PostgreSQL restarted, the backend was terminated) is replaced when it is next
lent, without a round trip; one the server ended a moment ago, before asyncpg noticed, fails its
block with a transient error and is closed, so the next block gets a new one. What it does not:
a session-level ``SET`` or advisory lock survives the connection's return to the pool (the store
takes neither; ``SET LOCAL`` and transaction-level locks end with their transaction). asyncpg's
exceptions propagate unchanged (``schedd_store.engine.is_transient`` tells the passing ones apart).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import asyncpg

from schedd_store.named_sql import Statement
from schedd_store.rows import Result

#: Seconds to wait for a pooled connection before giving up (a TimeoutError: try again later).
ACQUIRE_TIMEOUT = 30.0
#: Seconds ``dispose`` waits for lent connections to come back before closing them anyway.
DISPOSE_TIMEOUT = 5.0
#: Prepared statements kept per connection (each service runs fewer distinct statements).
STATEMENT_CACHE_SIZE = 256


class Connection:
    """A connection lent by an :class:`Engine` (see the module docstring)."""

    def __init__(self, raw: asyncpg.Connection, *, begins_on_use: bool) -> None:
        self._raw = raw
        self._begins_on_use = begins_on_use
        self._begun: asyncpg.transaction.Transaction | None = None

    async def execute(
        self, statement: Statement | str, parameters: Mapping[str, Any] | None = None
    ) -> Result:
        """Run ``statement`` with ``parameters`` (by name); its rows, all of them."""
        if isinstance(statement, str):
            statement = Statement(statement)
        if self._begins_on_use and self._begun is None:
            self._begun = self._raw.transaction()
            await self._begun.start()
        text, args = statement.arguments(parameters)
        return Result(await self._raw.fetch(text, *args))

    @asynccontextmanager
    async def begin(self, *, isolation: str | None = None) -> AsyncIterator[None]:
        """A transaction of this connection (of ``isolation``: ``repeatable_read``, ``serializable``;
        the server's default when None) for the block, before any statement of a ``connect`` block."""
        if self._begun is not None:
            raise RuntimeError("a statement of this connection already began its transaction")
        begins_on_use, self._begins_on_use = self._begins_on_use, False
        try:
            async with self._raw.transaction(isolation=isolation):
                yield
        finally:
            self._begins_on_use = begins_on_use

    async def end(self) -> None:
        """Roll back the transaction a statement began, if any (the end of a ``connect`` block)."""
        begun, self._begun = self._begun, None
        if begun is not None and not self._raw.is_closed():
            await begun.rollback()


class Engine:
    """A pool of connections to one database (see the module docstring)."""

    def __init__(self, dsn: str, *, max_size: int, server_settings: Mapping[str, str]) -> None:
        self._dsn = dsn
        self._max_size = max_size
        self._server_settings = dict(server_settings)
        self._pool: asyncpg.Pool | None = None
        self._opening: asyncio.Lock | None = None

    async def _ready_pool(self) -> asyncpg.Pool:
        if self._pool is not None:
            return self._pool
        if self._opening is None:
            self._opening = asyncio.Lock()
        async with self._opening:
            if self._pool is None:
                self._pool = await asyncpg.create_pool(
                    self._dsn,
                    min_size=0,
                    max_size=self._max_size,
                    server_settings=self._server_settings,
                    statement_cache_size=STATEMENT_CACHE_SIZE,
                    init=_register_json_codecs,
                    reset=_keep_session,
                )
            return self._pool

    @asynccontextmanager
    async def _lend(self) -> AsyncIterator[asyncpg.Connection]:
        """A pooled connection for the block. One that fails with asyncpg's ``InternalClientError``
        is closed, never lent again: that is how a connection the server has just ended (its FATAL
        message read, its end of stream not yet) fails, and the next block must get a new one."""
        pool = await self._ready_pool()
        async with pool.acquire(timeout=ACQUIRE_TIMEOUT) as raw:
            try:
                yield raw
            except asyncpg.InternalClientError:
                raw.terminate()
                raise

    @asynccontextmanager
    async def begin(self) -> AsyncIterator[Connection]:
        """A connection in a transaction, committed when the block ends, rolled back if it raises."""
        async with self._lend() as raw, raw.transaction():
            yield Connection(raw, begins_on_use=False)

    @asynccontextmanager
    async def autocommit(self) -> AsyncIterator[Connection]:
        """A connection each of whose statements commits on its own (see the module docstring)."""
        async with self._lend() as raw:
            yield Connection(raw, begins_on_use=False)

    @asynccontextmanager
    async def connect(self) -> AsyncIterator[Connection]:
        """A connection whose writes are rolled back when the block ends (see the module docstring)."""
        async with self._lend() as raw:
            conn = Connection(raw, begins_on_use=True)
            try:
                yield conn
            finally:
                await conn.end()

    async def dispose(self) -> None:
        """Close every connection: those lent out once they come back (or after ``DISPOSE_TIMEOUT``).
        The engine opens new ones if it is used again."""
        pool, self._pool = self._pool, None
        if pool is None:
            return
        try:
            await asyncio.wait_for(pool.close(), DISPOSE_TIMEOUT)
        except TimeoutError:
            pool.terminate()


async def _register_json_codecs(raw: asyncpg.Connection) -> None:
    """``json`` and ``jsonb`` read as Python values and written from JSON text (binary format: a
    ``jsonb`` value starts with its version byte, 1)."""
    await raw.set_type_codec(
        "json", schema="pg_catalog", format="binary", encoder=str.encode, decoder=lambda b: json.loads(b)
    )
    await raw.set_type_codec(
        "jsonb",
        schema="pg_catalog",
        format="binary",
        encoder=lambda s: b"\x01" + s.encode(),
        decoder=lambda b: json.loads(b[1:]),
    )


async def _keep_session(_raw: asyncpg.Connection) -> None:
    """A connection returned to the pool keeps its session: asyncpg's default reset (``RESET ALL``,
    ``UNLISTEN *``, ...) would cost a round trip per use, and the store leaves nothing to reset."""
