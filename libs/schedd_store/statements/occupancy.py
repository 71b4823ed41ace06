"""Statements: the occupancy counters (see migration 0012)."""

from __future__ import annotations

from schedd_store.statements.guards import _sql

# --- occupancy counters ------------------------------------------------------------------------------

#: The slots held in the pools of ``wanted`` (a CTE with a ``name`` column), by pool and lane: the
#: compacted sums plus the deltas not yet compacted. A fragment for the statements that read usage.
OCCUPANCY_OF_POOLS = (
    "SELECT pool, backfill, sum(slots) AS slots FROM ("
    "  SELECT pool, backfill, slots FROM pool_occupancy WHERE pool IN (SELECT name FROM wanted) "
    "  UNION ALL "
    "  SELECT pool, backfill, slots FROM occupancy_deltas WHERE pool IN (SELECT name FROM wanted)"
    ") AS parts GROUP BY pool, backfill"
)

#: Folds the deltas into the sums (the leader does so every second); returns how many it folded.
COMPACT_OCCUPANCY = _sql("SELECT occupancy_compact()")

#: Occupancy recounted from the task instances, by pool and lane, for checking the counters.
RECOUNT_POOL_OCCUPANCY = _sql(
    "SELECT pool, backfill, sum(pool_slots) AS slots FROM task_instances "
    "WHERE state IN ('queued', 'running') GROUP BY pool, backfill"
)

#: The counters, by pool and lane (sums plus pending deltas), for every pool with any.
COUNTED_POOL_OCCUPANCY = _sql(
    "SELECT pool, backfill, sum(slots) AS slots FROM ("
    "  SELECT pool, backfill, slots FROM pool_occupancy UNION ALL "
    "  SELECT pool, backfill, slots FROM occupancy_deltas"
    ") AS parts GROUP BY pool, backfill HAVING sum(slots) <> 0"
)

RECOUNT_DAG_OCCUPANCY = _sql(
    "SELECT dag_id, count(*) AS tasks FROM task_instances WHERE state IN ('queued', 'running') "
    "GROUP BY dag_id"
)

COUNTED_DAG_OCCUPANCY = _sql(
    "SELECT dag_id, sum(tasks) AS tasks FROM ("
    "  SELECT dag_id, tasks FROM dag_occupancy UNION ALL SELECT dag_id, tasks FROM occupancy_deltas"
    ") AS parts GROUP BY dag_id HAVING sum(tasks) <> 0"
)
