"""Fencing scheduler writes with the leadership term's token.

A scheduler that wins an election raises the fence row to its term's token
(the create revision of its etcd leader key, which only grows). Every write
transaction of a scheduler goes through :meth:`Fence.transaction`, which first
takes a shared lock on the fence row and compares the token *inside the same
transaction*. Consequences, under READ COMMITTED:

- Raising the fence needs an exclusive row lock, so it waits until every write
  transaction of the old term that already passed the check has committed or
  rolled back. Nothing of the old term can commit after the fence is raised.
- Every transaction that starts after the raise sees the new token and fails
  with :class:`FencedOut` before writing anything.

What this does not guarantee: that a deposed leader never *computes* stale
decisions, only that none of them land.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from schedd_core.errors import FencedOut
from schedd_store import statements as sql


class Fence:
    """Opens scheduler write transactions that commit only while ``token`` is the fence's value."""

    def __init__(
        self, engine: AsyncEngine, token: int, *, on_rejected: Callable[[FencedOut], None] | None = None
    ) -> None:
        self._engine = engine
        self.token = token
        self._on_rejected = on_rejected

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[AsyncConnection]:
        """A transaction holding a shared lock on the fence row; raises FencedOut when stale."""
        async with self._engine.begin() as conn:
            current = (await conn.execute(sql.LOCK_FENCE_FOR_WRITE)).scalar_one()
            if current != self.token:
                error = FencedOut(self.token, current)
                if self._on_rejected is not None:
                    self._on_rejected(error)
                raise error
            yield conn


async def raise_fence(engine: AsyncEngine, token: int, holder: str) -> None:
    """Raise the fence to ``token`` for a new term. Raises FencedOut if the fence is already at or
    above it (a newer term has begun). Waits for the old term's write transactions in flight."""
    async with engine.begin() as conn:
        raised = (await conn.execute(sql.RAISE_FENCE, {"token": token, "holder": holder})).first()
        if raised is None:
            current = (await conn.execute(sql.READ_FENCE)).one()
            raise FencedOut(token, int(current.token))


async def read_fence(engine: AsyncEngine) -> tuple[int, str]:
    async with engine.connect() as conn:
        row = (await conn.execute(sql.READ_FENCE)).one()
        return int(row.token), str(row.holder)
