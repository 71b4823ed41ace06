"""Statements: pools."""

from __future__ import annotations

from schedd_store.statements.guards import _sql
from schedd_store.statements.occupancy import OCCUPANCY_OF_POOLS

# --- pools -----------------------------------------------------------------------------------------

LIST_POOL_SIZES = _sql("SELECT name, slots FROM pools ORDER BY name")

LIST_POOLS = _sql(
    f"WITH wanted AS (SELECT name FROM pools), usage AS ({OCCUPANCY_OF_POOLS}) "
    "SELECT p.name, p.slots, p.description, p.backfill_share, "
    "COALESCE((SELECT sum(u.slots) FROM usage u WHERE u.pool = p.name), 0) AS used, "
    "(SELECT count(*) FROM task_instances w WHERE w.state = 'scheduled' AND w.pool = p.name) AS waiting "
    "FROM pools p ORDER BY p.name"
)

#: Creates or resizes a pool; a NULL :description or :backfill_share keeps the pool's ('' and 0.5 for
#: a new pool).
SET_POOL = _sql(
    "INSERT INTO pools (name, slots, description, backfill_share) "
    "VALUES (:name, :slots, COALESCE(CAST(:description AS text), ''), "
    "COALESCE(CAST(:backfill_share AS float8), 0.5)) "
    "ON CONFLICT (name) DO UPDATE SET slots = EXCLUDED.slots, "
    "description = COALESCE(CAST(:description AS text), pools.description), "
    "backfill_share = COALESCE(CAST(:backfill_share AS float8), pools.backfill_share)"
)

#: Runs with task instances waiting in a pool: evaluated again when the pool grows.
RUNS_WAITING_IN_POOL = _sql(
    "SELECT DISTINCT run_pk FROM task_instances WHERE state = 'scheduled' AND pool = :name"
)
