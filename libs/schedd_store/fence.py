"""Fencing scheduler writes with the leadership term's token and the term's lease.

A scheduler that wins an election raises the fence row to its term's token
(the create revision of its etcd leader key, which only grows). Every write
transaction of a scheduler goes through :meth:`Fence.transaction`, which first
takes a shared lock on the fence row and compares the token *inside the same
transaction*, and which checks, immediately before COMMIT, that the term's lease
is still valid for at least ``commit_margin`` seconds. Consequences, under READ
COMMITTED:

- Raising the fence needs an exclusive row lock, so it waits until every write
  transaction of the old term that already passed the check has committed or
  rolled back. Nothing of the old term can commit after the fence is raised.
- Every transaction that starts after the raise sees the new token and fails
  with :class:`FencedOut` before writing anything.
- A leader whose lease ran out while it computed (a busy event loop, a pause
  between statements) rolls back with :class:`LeaseExpired` instead of
  committing: a commit starts only while the lease is trusted.
- A leader frozen while it holds the shared lock does not block the next term
  for long: the scheduler's sessions run with ``idle_in_transaction_session_timeout``
  and ``statement_timeout`` below the lease's renew deadline (see the scheduler's
  config), so PostgreSQL ends such a session and releases the lock, and
  :func:`raise_fence` waits for a lock only in bounded steps, while its own
  lease is valid.

Writes are typed: a scheduler write takes a :class:`FencedConnection`, which only
:meth:`Fence.transaction` creates, so an unfenced scheduler write does not type-check.

What this does not guarantee: that a deposed leader never *computes* stale
decisions, only that none of them land.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any, Protocol

import asyncpg

from schedd_core.errors import FencedOut, LeaseExpired
from schedd_faults import FaultPoints
from schedd_store import statements as sql
from schedd_store.database import Connection, Engine
from schedd_store.named_sql import Statement
from schedd_store.rows import Result

#: The PostgreSQL error raised when ``lock_timeout`` passes (lock_not_available).
LOCK_NOT_AVAILABLE = "55P03"
#: Seconds a raise of the fence waits for the lock in one step before checking its lease again.
RAISE_LOCK_STEP = 0.2


class LeaseCheck(Protocol):
    """What the fence needs to know of a lease: how long it may still be trusted."""

    def remaining(self) -> float: ...


class FencedConnection:
    """A connection inside a fenced transaction; only :meth:`Fence.transaction` makes one."""

    __slots__ = ("_conn", "token")

    def __init__(self, conn: Connection, token: int, key: object) -> None:
        if key is not _FENCE_KEY:
            raise TypeError("a FencedConnection is made by Fence.transaction only")
        self._conn = conn
        self.token = token

    async def execute(
        self, statement: Statement | str, parameters: Mapping[str, Any] | None = None
    ) -> Result:
        return await self._conn.execute(statement, parameters)


_FENCE_KEY = object()


class Fence:
    """Opens scheduler write transactions that commit only while ``token`` is the fence's value
    and ``lease`` (when given) is trusted for at least ``commit_margin`` more seconds."""

    def __init__(
        self,
        engine: Engine,
        token: int,
        *,
        lease: LeaseCheck | None = None,
        commit_margin: float = 0.05,
        on_rejected: Callable[[FencedOut], None] | None = None,
        faults: FaultPoints | None = None,
    ) -> None:
        self._engine = engine
        self.token = token
        self._lease = lease
        self._commit_margin = commit_margin
        self._on_rejected = on_rejected
        self._faults = faults or FaultPoints()

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[FencedConnection]:
        """A transaction holding a shared lock on the fence row. Raises FencedOut when the token is
        stale and LeaseExpired when the lease ran out before COMMIT; either way nothing commits."""
        async with self._engine.begin() as conn:
            current = (await conn.execute(sql.LOCK_FENCE_FOR_WRITE)).scalar_one()
            if current != self.token:
                error = FencedOut(self.token, current)
                if self._on_rejected is not None:
                    self._on_rejected(error)
                raise error
            self._faults.hit("fence.locked")
            yield FencedConnection(conn, self.token, _FENCE_KEY)
            self._faults.hit("fence.before_commit")
            if self._lease is not None:
                remaining = self._lease.remaining()
                if remaining < self._commit_margin:
                    raise LeaseExpired(
                        f"term {self.token}: the lease had {remaining:.3f}s left at commit; rolled back"
                    )


async def raise_fence(engine: Engine, token: int, holder: str, *, lease: LeaseCheck | None = None) -> None:
    """Raise the fence to ``token`` for a new term.

    Raises FencedOut if the fence is already at or above it (a newer term has begun). Waits for
    the old term's write transactions in flight, in steps of at most ``RAISE_LOCK_STEP`` seconds,
    and gives up with LeaseExpired once ``lease`` is no longer trusted.
    """
    while True:
        if lease is not None and lease.remaining() <= 0:
            raise LeaseExpired(f"term {token}: the lease ran out while raising the fence")
        wait_ms = RAISE_LOCK_STEP if lease is None else min(RAISE_LOCK_STEP, lease.remaining())
        try:
            async with engine.begin() as conn:
                await conn.execute(sql.set_local_lock_timeout(max(1, int(wait_ms * 1000))))
                raised = (await conn.execute(sql.RAISE_FENCE, {"token": token, "holder": holder})).first()
                if raised is None:
                    current = (await conn.execute(sql.READ_FENCE)).one()
                    raise FencedOut(token, int(current.token))
                return
        except asyncpg.PostgresError as exc:
            if exc.sqlstate != LOCK_NOT_AVAILABLE:
                raise


async def read_fence(engine: Engine) -> tuple[int, str]:
    async with engine.connect() as conn:
        row = (await conn.execute(sql.READ_FENCE)).one()
        return int(row.token), str(row.holder)
