"""Occupancy counters and control versions.

Occupancy counters: the slots each pool's queued and running task instances hold, and the task
instances each DAG has queued or running, kept by the transactions that change them.

A statement-level trigger on ``task_instances`` (``schedd_count_occupancy``) compares the rows a
statement changed before and after (transition tables) and, where occupancy moved, appends one
*delta* row per (pool, lane, DAG) to ``occupancy_deltas`` in the same transaction: insert-only, so
writers (the leader's passes, the registries' result batches, manual control) never wait for each
other on a counter row, and a claim (queued -> running) writes nothing. ``pool_occupancy`` and
``dag_occupancy`` hold the compacted sums; a reader adds the deltas not yet compacted
(``occupancy_compact()`` folds them in, atomically, and is called by the leader every second). So
the scheduler reads a pool's usage in time that does not grow with the task instances queued.

``dag_runs.control_version`` is raised by every manual change of a run (clear, mark, cancel, a
backfill's rerun) under the run's lock; the leader keeps the task instances of runs it evaluates in
memory between passes and reads a run whose version moved in full.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-01
"""

from schedd_store.migrations.steps import execute_all

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

OCCUPYING = "('queued', 'running')"

UPGRADE = [
    "ALTER TABLE dag_runs ADD COLUMN control_version integer NOT NULL DEFAULT 0",
    "CREATE TABLE pool_occupancy ("
    " pool text NOT NULL, backfill boolean NOT NULL, slots bigint NOT NULL DEFAULT 0,"
    " PRIMARY KEY (pool, backfill))",
    "CREATE TABLE dag_occupancy (dag_id text PRIMARY KEY, tasks bigint NOT NULL DEFAULT 0)",
    "CREATE TABLE occupancy_deltas ("
    " id bigserial PRIMARY KEY, pool text NOT NULL, backfill boolean NOT NULL, dag_id text NOT NULL,"
    " slots bigint NOT NULL, tasks bigint NOT NULL)",
    "CREATE INDEX occupancy_deltas_pool_idx ON occupancy_deltas (pool)",
    "CREATE INDEX occupancy_deltas_dag_idx ON occupancy_deltas (dag_id)",
    f"""
    CREATE FUNCTION schedd_count_occupancy() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF TG_OP = 'INSERT' THEN
        INSERT INTO occupancy_deltas (pool, backfill, dag_id, slots, tasks)
        SELECT pool, backfill, dag_id, sum(pool_slots), count(*) FROM new_rows
        WHERE state IN {OCCUPYING} GROUP BY pool, backfill, dag_id;
      ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO occupancy_deltas (pool, backfill, dag_id, slots, tasks)
        SELECT pool, backfill, dag_id, -sum(pool_slots), -count(*) FROM old_rows
        WHERE state IN {OCCUPYING} GROUP BY pool, backfill, dag_id;
      ELSE
        INSERT INTO occupancy_deltas (pool, backfill, dag_id, slots, tasks)
        SELECT pool, backfill, dag_id, sum(slots), sum(tasks) FROM (
          SELECT pool, backfill, dag_id, pool_slots AS slots, 1 AS tasks FROM new_rows
          WHERE state IN {OCCUPYING}
          UNION ALL
          SELECT pool, backfill, dag_id, -pool_slots, -1 FROM old_rows WHERE state IN {OCCUPYING}
        ) AS moved GROUP BY pool, backfill, dag_id HAVING sum(slots) <> 0 OR sum(tasks) <> 0;
      END IF;
      RETURN NULL;
    END $$
    """,
    "CREATE TRIGGER task_instances_occupancy_insert AFTER INSERT ON task_instances "
    "REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION schedd_count_occupancy()",
    "CREATE TRIGGER task_instances_occupancy_update AFTER UPDATE ON task_instances "
    "REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT "
    "EXECUTE FUNCTION schedd_count_occupancy()",
    "CREATE TRIGGER task_instances_occupancy_delete AFTER DELETE ON task_instances "
    "REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION schedd_count_occupancy()",
    # Folds the deltas into the sums: the deltas this statement's snapshot sees are deleted and added
    # in one statement (data-modifying CTEs all run), so a reader (sums plus deltas) never counts one
    # twice or misses one; a concurrent compaction waits for the rows this one deletes and skips them.
    # Returns the number of deltas folded.
    """
    CREATE FUNCTION occupancy_compact() RETURNS bigint LANGUAGE sql AS $$
      WITH taken AS (DELETE FROM occupancy_deltas RETURNING pool, backfill, dag_id, slots, tasks),
      pools AS (
        INSERT INTO pool_occupancy (pool, backfill, slots)
        SELECT pool, backfill, sum(slots) FROM taken GROUP BY pool, backfill
        ON CONFLICT (pool, backfill) DO UPDATE SET slots = pool_occupancy.slots + EXCLUDED.slots
      ), dags AS (
        INSERT INTO dag_occupancy (dag_id, tasks)
        SELECT dag_id, sum(tasks) FROM taken GROUP BY dag_id
        ON CONFLICT (dag_id) DO UPDATE SET tasks = dag_occupancy.tasks + EXCLUDED.tasks
      )
      SELECT count(*) FROM taken
    $$
    """,
    # What is queued or running now.
    f"INSERT INTO occupancy_deltas (pool, backfill, dag_id, slots, tasks) "
    f"SELECT pool, backfill, dag_id, sum(pool_slots), count(*) FROM task_instances "
    f"WHERE state IN {OCCUPYING} GROUP BY pool, backfill, dag_id",
    "SELECT occupancy_compact()",
]

DOWNGRADE = [
    "DROP FUNCTION occupancy_compact()",
    "DROP TRIGGER task_instances_occupancy_delete ON task_instances",
    "DROP TRIGGER task_instances_occupancy_update ON task_instances",
    "DROP TRIGGER task_instances_occupancy_insert ON task_instances",
    "DROP FUNCTION schedd_count_occupancy()",
    "DROP TABLE occupancy_deltas",
    "DROP TABLE dag_occupancy",
    "DROP TABLE pool_occupancy",
    "ALTER TABLE dag_runs DROP COLUMN control_version",
]


def upgrade() -> None:
    execute_all(UPGRADE)


def downgrade() -> None:
    execute_all(DOWNGRADE)
