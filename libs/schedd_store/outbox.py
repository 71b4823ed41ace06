"""Reading and settling outbox rows (events that must reach the outside).

Rows are written in the same transaction as the state change they report (task
results in the registry's result batch, run outcomes in the scheduler's pass), so
an event exists exactly when its change committed. Delivery is at least once: a
relay takes due rows with a lease, delivers, then marks them delivered; a relay
that dies mid-delivery leaves them to another after the lease.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from schedd_store import statements as sql
from schedd_store.database import Engine


@dataclass(frozen=True)
class OutboxEvent:
    id: int
    topic: str
    payload: dict[str, Any]
    attempts: int
    run_id: str
    dag_version_id: int | None


async def take_due(engine: Engine, *, limit: int, lease: float) -> list[OutboxEvent]:
    async with engine.begin() as conn:
        rows = (await conn.execute(sql.CLAIM_OUTBOX, {"limit": limit, "lease": lease})).all()
        run_pks = sorted({int(r.payload["run_pk"]) for r in rows if r.payload.get("run_pk") is not None})
        runs = (
            {r.id: r for r in (await conn.execute(sql.RUNS_FOR_EVENTS, {"ids": run_pks})).all()}
            if run_pks
            else {}
        )
    events = []
    for r in rows:
        run = runs.get(int(r.payload.get("run_pk", 0) or 0))
        events.append(
            OutboxEvent(
                id=r.id,
                topic=r.topic,
                payload=dict(r.payload),
                attempts=r.attempts,
                run_id=run.run_id if run else "",
                dag_version_id=run.dag_version_id if run else None,
            )
        )
    return events


async def mark_delivered(engine: Engine, ids: list[int]) -> None:
    async with engine.begin() as conn:
        await conn.execute(sql.MARK_DELIVERED, {"ids": ids})


async def mark_failed(engine: Engine, event_id: int, *, error: str, delay: float, max_attempts: int) -> None:
    async with engine.begin() as conn:
        await conn.execute(
            sql.MARK_DELIVERY_FAILED,
            {"id": event_id, "error": error[:2000], "delay": delay, "max_attempts": max_attempts},
        )


async def seconds_until_due(engine: Engine) -> float | None:
    async with engine.connect() as conn:
        value = (await conn.execute(sql.SECONDS_UNTIL_OUTBOX_DUE)).scalar()
    return None if value is None else float(value)
