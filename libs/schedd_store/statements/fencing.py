"""Statements: fencing."""

from __future__ import annotations

from schedd_store.named_sql import Statement
from schedd_store.statements.guards import _sql

# --- fencing -------------------------------------------------------------------------------------

#: Shared lock on the fence row, held until the end of the scheduler's transaction. Raising the
#: fence (an UPDATE, which needs an exclusive lock) therefore waits for every write transaction of
#: the old term in flight, and every transaction that starts later sees the new token.
LOCK_FENCE_FOR_WRITE = _sql("SELECT token FROM scheduler_fence WHERE id = 1 FOR SHARE")

#: Raises the fence to a new term's token; never lowers it. Zero rows: the token is not newer.
RAISE_FENCE = _sql(
    "UPDATE scheduler_fence SET token = :token, holder = :holder, raised_at = now() "
    "WHERE id = 1 AND token < :token RETURNING token"
)

READ_FENCE = _sql("SELECT token, holder, raised_at FROM scheduler_fence WHERE id = 1")


def set_local_lock_timeout(milliseconds: int) -> Statement:
    """Bounds how long the rest of the transaction waits for any lock (SET takes no parameters)."""
    return _sql(f"SET LOCAL lock_timeout = {int(milliseconds)}")
