"""Reading workers and asking them to drain (the api's side)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from schedd_core.errors import NotFound, quote
from schedd_store import channels, statements as sql
from schedd_store.database import Engine


@dataclass(frozen=True)
class WorkerRecord:
    worker_id: str
    hostname: str
    queues: list[str]
    capacity: int
    running: int
    state: str
    code_version: str
    registry: str
    registered_at: datetime
    last_seen_at: datetime


async def list_workers(engine: Engine, *, after: str, limit: int, include_gone: bool) -> list[WorkerRecord]:
    async with engine.connect() as conn:
        rows = (
            await conn.execute(
                sql.LIST_WORKERS, {"after": after, "limit": limit, "include_gone": include_gone}
            )
        ).all()
    return [_worker(r._mapping) for r in rows]


async def request_drain(engine: Engine, worker_id: str) -> WorkerRecord:
    """Record the request and tell the registries; the worker's registry forwards it."""
    async with engine.begin() as conn:
        if (await conn.execute(sql.REQUEST_DRAIN, {"worker_id": worker_id})).first() is None:
            raise NotFound(f"worker {quote(worker_id)} is not connected")
        await conn.execute(sql.NOTIFY, {"channel": channels.WORKERS, "payload": worker_id})
        row = (await conn.execute(sql.GET_WORKER, {"worker_id": worker_id})).one()
    return _worker(row._mapping)


def _worker(m: Any) -> WorkerRecord:
    return WorkerRecord(
        worker_id=m["worker_id"],
        hostname=m["hostname"],
        queues=list(m["queues"]),
        capacity=m["capacity"],
        running=m["running"],
        state=m["state"],
        code_version=m["code_version"],
        registry=m["registry"],
        registered_at=m["registered_at"],
        last_seen_at=m["last_seen_at"],
    )
