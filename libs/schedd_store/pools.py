"""Pools: named slot counts that cap how many task instances run at once."""

from __future__ import annotations

from dataclasses import dataclass

from schedd_core.errors import InvalidArgument
from schedd_core.identifiers import check_id
from schedd_core.limits import MAX_CONCURRENCY
from schedd_store import channels, statements as sql
from schedd_store.database import Engine


async def pool_sizes(engine: Engine) -> dict[str, int]:
    """Every pool's number of slots, by name."""
    async with engine.connect() as conn:
        return {r.name: int(r.slots) for r in (await conn.execute(sql.LIST_POOL_SIZES)).all()}


@dataclass(frozen=True)
class PoolRecord:
    name: str
    slots: int
    description: str
    used: int
    waiting: int
    #: The share of the slots backfill runs may hold while other runs wait (and the other runs the rest).
    backfill_share: float = 0.5


async def list_pools(engine: Engine) -> list[PoolRecord]:
    async with engine.connect() as conn:
        rows = (await conn.execute(sql.LIST_POOLS)).all()
    return [
        PoolRecord(r.name, r.slots, r.description, int(r.used), int(r.waiting), float(r.backfill_share))
        for r in rows
    ]


async def set_pool(
    engine: Engine,
    name: str,
    slots: int,
    description: str | None = None,
    backfill_share: float | None = None,
) -> PoolRecord:
    """Create the pool or change its size (and, when given, its description and backfill share);
    runs waiting for it are evaluated again."""
    check_id("pool", name)
    if not 0 <= slots <= MAX_CONCURRENCY:
        raise InvalidArgument("slots", f"must be between 0 and {MAX_CONCURRENCY}")
    if backfill_share is not None and not 0.0 <= backfill_share <= 1.0:
        raise InvalidArgument("backfill_share", "must be between 0 and 1")
    async with engine.begin() as conn:
        await conn.execute(
            sql.SET_POOL,
            {"name": name, "slots": slots, "description": description, "backfill_share": backfill_share},
        )
        runs = [r[0] for r in (await conn.execute(sql.RUNS_WAITING_IN_POOL, {"name": name})).all()]
        for payload in channels.encode_ids(runs):
            await conn.execute(sql.NOTIFY, {"channel": channels.RUNS, "payload": payload})
    return next(p for p in await list_pools(engine) if p.name == name)
