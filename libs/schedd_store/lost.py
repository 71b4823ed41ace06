"""Failing over lost attempts (the leader's side, fenced); see ``schedd_scheduler.lost_attempts``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from schedd_core.states import TaskState
from schedd_store import statements as sql
from schedd_store.database import Connection
from schedd_store.fence import FencedConnection


@dataclass(frozen=True)
class FailedOver:
    ti_id: int
    run_pk: int
    state: str
    queue: str
    reason: str


async def fail_over_lost_attempts(
    conn: FencedConnection,
    token: int,
    *,
    leased_workers: Sequence[str] | None,
    fallback_limit: float,
    max_lost: int,
) -> list[FailedOver]:
    """Fail over running attempts that are lost: reported lost by their worker's registry, or whose
    worker was not heard for longer than its registry allowed it to run unheard (its silence limit
    while it holds an etcd lease, its shorter fence window without one; ``leased_workers`` are the
    ids that hold one now; None when that is not known, which counts as held). Each is queued again
    with a new attempt (or failed after ``max_lost`` losses). Wakes the registries for the queued
    ones."""
    rows = (
        await conn.execute(
            sql.FAIL_OVER_LOST_ATTEMPTS,
            {
                "leased": None if leased_workers is None else list(leased_workers),
                "fallback_limit": fallback_limit,
                "max_lost": max_lost,
                "token": token,
            },
        )
    ).all()
    result = [
        FailedOver(ti_id=r.id, run_pk=r.run_pk, state=r.state, queue=r.queue, reason=r.reason) for r in rows
    ]
    if result:
        queues = sorted({f.queue for f in result if f.state == TaskState.QUEUED})
        queued = sum(1 for f in result if f.state == TaskState.QUEUED)
        runs = len({f.run_pk for f in result})
        await conn.execute(
            sql.RECORD_PASS, {"token": token, "runs": runs, "queued": queued, "queues": queues}
        )
    return result


async def seconds_until_attempt_lost(
    conn: Connection, *, leased_workers: Sequence[str] | None, fallback_limit: float
) -> float | None:
    """Seconds until the first running attempt can be lost (0 or less: now); None if none runs."""
    value = (
        await conn.execute(
            sql.SECONDS_UNTIL_ATTEMPT_LOST,
            {
                "leased": None if leased_workers is None else list(leased_workers),
                "fallback_limit": fallback_limit,
            },
        )
    ).scalar()
    return None if value is None else float(value)
