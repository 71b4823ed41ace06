"""Statements: deleting DAGs, runs and pools (the api's side).

Each deletion first locks the row it deletes (a DAG with ``LOCK_DAG``: the leader's schedule
timer locks the same row before it makes a run, and a trigger's insert waits on it for its foreign
key check), then checks nothing is in flight under it; the rows
below go with it by ``ON DELETE CASCADE`` (versions, runs, task instances, attempts, logs, backfills
and their intervals).
"""

from __future__ import annotations

from schedd_store.statements.guards import _sql

#: What keeps a DAG from being deleted: runs not finished, backfills not ended, task instances that
#: hold a slot or a worker.
DAG_IN_FLIGHT = _sql(
    "SELECT "
    "(SELECT count(*) FROM dag_runs r WHERE r.dag_id = :dag_id AND r.state IN ('queued', 'running')) "
    "AS active_runs, "
    "(SELECT count(*) FROM backfills b WHERE b.dag_id = :dag_id AND b.state IN ('running', 'paused')) "
    "AS active_backfills, "
    "(SELECT count(*) FROM task_instances ti JOIN dag_runs r ON r.id = ti.run_pk "
    "  WHERE r.dag_id = :dag_id AND ti.state IN ('queued', 'running')) AS active_tasks"
)

DELETE_DAG = _sql("DELETE FROM dags WHERE dag_id = :dag_id RETURNING dag_id")

#: A run's task instances that hold a slot or a worker.
RUN_TASKS_IN_FLIGHT = _sql(
    "SELECT count(*) FROM task_instances WHERE run_pk = :run_pk AND state IN ('queued', 'running')"
)

DELETE_RUN = _sql("DELETE FROM dag_runs WHERE id = :run_pk RETURNING id, dag_id")

LOCK_POOL = _sql("SELECT name FROM pools WHERE name = :name FOR UPDATE")

#: Task instances that hold the pool's slots or will wait for them (not finished).
POOL_TASKS_UNFINISHED = _sql(
    "SELECT count(*) FROM task_instances WHERE pool = :name "
    "AND state IN ('scheduled', 'queued', 'running', 'up_for_retry', 'up_for_reschedule')"
)

#: The specs of the DAGs' latest versions, a page at a time (to find the DAGs that name a pool).
LATEST_SPECS_AFTER = _sql(
    "SELECT d.dag_id, v.spec FROM dags d JOIN dag_versions v ON v.id = d.latest_version_id "
    "WHERE d.dag_id > :after ORDER BY d.dag_id LIMIT :limit"
)

DELETE_POOL = _sql("DELETE FROM pools WHERE name = :name RETURNING name")

#: The pool's slot counters (the DAG's are kept: they are zero and a DAG of the same id may come).
DELETE_POOL_OCCUPANCY = _sql("DELETE FROM pool_occupancy WHERE pool = :name")
