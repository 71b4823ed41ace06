"""The occupancy counters: what pools and DAGs have queued or running, without counting rows.

The counters are kept by a trigger on ``task_instances`` in the same transactions as the changes
(migration 0012); :func:`compact` folds their pending deltas into the sums (the leader calls it
every second; readers add the deltas, so a late compaction only costs a few more rows to read).
:func:`recount` and :func:`counted` give both sides for checking the counters against the rows.
"""

from __future__ import annotations

from schedd_store import statements as sql
from schedd_store.database import Connection, Engine


async def compact(engine: Engine) -> int:
    """Fold the pending deltas into the sums; returns how many were folded."""
    async with engine.begin() as conn:
        folded: int = (await conn.execute(sql.COMPACT_OCCUPANCY)).scalar_one()
    return folded


async def counted(conn: Connection) -> tuple[dict[tuple[str, bool], int], dict[str, int]]:
    """What the counters say: slots by (pool, backfill lane), and task instances by DAG (non-zero)."""
    pools = {
        (r.pool, r.backfill): int(r.slots) for r in (await conn.execute(sql.COUNTED_POOL_OCCUPANCY)).all()
    }
    dags = {r.dag_id: int(r.tasks) for r in (await conn.execute(sql.COUNTED_DAG_OCCUPANCY)).all()}
    return pools, dags


async def recount(conn: Connection) -> tuple[dict[tuple[str, bool], int], dict[str, int]]:
    """The same, counted from the task instances themselves."""
    pools = {
        (r.pool, r.backfill): int(r.slots) for r in (await conn.execute(sql.RECOUNT_POOL_OCCUPANCY)).all()
    }
    dags = {r.dag_id: int(r.tasks) for r in (await conn.execute(sql.RECOUNT_DAG_OCCUPANCY)).all()}
    return pools, dags
