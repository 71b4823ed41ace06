"""Deleting what is old enough, in bounded batches, each in a fenced transaction of the leader.

Nothing grows without bound: finished runs (with their task instances, attempts and output),
output older than its own age, the pass log, delivered (or abandoned) outbox events, the request
log, workers that left and audit records. :class:`Retention` says how old each may get (0 keeps it forever).
Each batch is one short fenced transaction (a run batch holds at most ``RUN_BUDGET`` task
instances), so retention never holds locks for long and a deposed leader deletes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from schedd_store import statements as sql
from schedd_store.fence import Fence
from schedd_store.named_sql import Statement

DAY = 86_400.0
#: Rows one batch deletes at most (for runs: runs; see RUN_BUDGET).
BATCH = 1_000
#: Task instances that go with one batch of runs at most (at least one run is deleted).
RUN_BUDGET = 5_000


@dataclass(frozen=True)
class Retention:
    """Seconds each kind of record is kept after it is done; 0 keeps it forever."""

    runs: float = 30 * DAY
    logs: float = 30 * DAY
    passes: float = 7 * DAY
    outbox: float = 7 * DAY
    requests: float = 7 * DAY
    workers: float = 7 * DAY
    audit: float = 365 * DAY

    def __post_init__(self) -> None:
        for name in ("runs", "logs", "passes", "outbox", "requests", "workers", "audit"):
            if getattr(self, name) < 0:
                raise ValueError(f"retention of {name} must not be negative")


async def purge_batch(fence: Fence, statement: Statement, age: float, *, batch: int = BATCH) -> int:
    """Delete one batch of what ``statement`` deletes that is older than ``age``; the count."""
    async with fence.transaction() as conn:
        rows = (await conn.execute(statement, {"age": age, "batch": batch, "budget": RUN_BUDGET})).all()
    return len(rows)


def purges(retention: Retention) -> list[tuple[str, Statement, float]]:
    """(name, statement, age) of every kind of record retention deletes, kept-forever ones left out."""
    kinds = [
        ("runs", sql.PURGE_FINISHED_RUNS, retention.runs),
        ("logs", sql.PURGE_LOGS, retention.logs),
        ("passes", sql.PURGE_PASSES, retention.passes),
        ("outbox", sql.PURGE_OUTBOX, retention.outbox),
        ("requests", sql.PURGE_REQUESTS, retention.requests),
        ("workers", sql.PURGE_GONE_WORKERS, retention.workers),
        ("audit", sql.PURGE_AUDIT_RECORDS, retention.audit),
    ]
    return [(name, statement, age) for name, statement, age in kinds if age > 0]
