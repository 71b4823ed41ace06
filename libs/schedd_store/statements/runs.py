"""Statements: runs."""

from __future__ import annotations

from schedd_store import channels
from schedd_store.statements.guards import _sql

# --- runs ------------------------------------------------------------------------------------------

#: Creates a run pinned to the DAG's latest version and wakes the scheduler. Zero rows: the DAG does not
#: exist. A taken run id or (for scheduled and backfill runs) logical date violates a unique constraint
#: (dag_runs_dag_run_id_key, dag_runs_dag_logical_date_key), mapped to a domain error by the caller.
INSERT_RUN = _sql(
    "WITH run AS ("
    "  INSERT INTO dag_runs (dag_id, run_id, dag_version_id, run_type, state, logical_date, conf, "
    "  trace_context) "
    "  SELECT d.dag_id, :run_id, d.latest_version_id, :run_type, 'queued', :logical_date, "
    "  CAST(:conf AS jsonb), NULLIF(:trace_context, '') FROM dags d WHERE d.dag_id = :dag_id RETURNING id"
    f") SELECT id, pg_notify('{channels.RUNS}', id::text) FROM run"
)

_RUN_COLUMNS = (
    "r.id, r.dag_id, r.run_id, r.run_type, r.state, r.logical_date, r.conf, r.created_at, "
    "r.started_at, r.ended_at, r.error, r.data_interval_start, r.data_interval_end, r.backfill_id, "
    "r.dag_version_id, v.version_hash, r.cancelled"
)

GET_RUN = _sql(
    f"SELECT {_RUN_COLUMNS} FROM dag_runs r JOIN dag_versions v ON v.id = r.dag_version_id "
    "WHERE r.dag_id = :dag_id AND r.run_id = :run_id"
)

#: The orders a list of runs can come in: (SQL order, keyset condition after the last row shown).
#: The keyset compares (:after_date, :after_pk), the last row of the previous page; an empty first page
#: passes NULL (logical date orders) or a bound beyond every id.
_RUN_ORDERS = {
    "create_time desc": ("r.id DESC", "r.id < :after_pk"),
    "create_time": ("r.id", "r.id > :after_pk"),
    "logical_date desc": (
        "r.logical_date DESC, r.id DESC",
        "(CAST(:after_date AS timestamptz) IS NULL "
        "OR (r.logical_date, r.id) < (CAST(:after_date AS timestamptz), :after_pk))",
    ),
    "logical_date": (
        "r.logical_date, r.id",
        "(CAST(:after_date AS timestamptz) IS NULL "
        "OR (r.logical_date, r.id) > (CAST(:after_date AS timestamptz), :after_pk))",
    ),
}

#: Runs matching the filters, one page, in each of the orders above (by order name).
LIST_RUNS = {
    order: _sql(
        f"SELECT {_RUN_COLUMNS} FROM dag_runs r JOIN dag_versions v ON v.id = r.dag_version_id "
        f"WHERE (CAST(:dag_id AS text) IS NULL OR r.dag_id = :dag_id) AND {keyset} "
        "AND (cardinality(CAST(:states AS text[])) = 0 OR r.state = ANY(CAST(:states AS text[]))) "
        "AND (CAST(:run_type AS text) IS NULL OR r.run_type = :run_type) "
        "AND (CAST(:date_from AS timestamptz) IS NULL OR r.logical_date >= CAST(:date_from AS timestamptz)) "
        "AND (CAST(:date_until AS timestamptz) IS NULL OR r.logical_date < CAST(:date_until AS timestamptz)) "
        f"ORDER BY {sql_order} LIMIT :limit"
    )
    for order, (sql_order, keyset) in _RUN_ORDERS.items()
}

#: A task instance's stored result (and whether it has one), by names; the task instance by task id and
#: map index (-1: not an instance of a mapped task).
GET_TASK_RESULT = _sql(
    "SELECT ti.state, ti.try_number, ti.result, ti.result IS NOT NULL AS has_result "
    "FROM task_instances ti JOIN dag_runs r ON r.id = ti.run_pk "
    "WHERE r.dag_id = :dag_id AND r.run_id = :run_id AND ti.task_id = :task_id AND ti.map_index = :map_index"
)

#: A run's task instances in the order they were made (the dependency order of the run's first plan; a
#: mapped task's instances come later, when it is expanded), each with the version hash its current (or
#: last) attempt ran (NULL before any attempt).
LIST_TASK_INSTANCES = _sql(
    "SELECT ti.task_id, ti.map_index, ti.state, ti.try_number, ti.max_tries, ti.attempt_id, ti.worker_id, "
    "ti.queued_at, ti.started_at, ti.ended_at, ti.exit_code, ti.error, ti.priority_weight, ti.pool, "
    "ti.queue, av.version_hash AS attempt_version "
    "FROM task_instances ti LEFT JOIN task_attempts a ON a.ti_id = ti.id AND a.attempt_id = ti.attempt_id "
    "LEFT JOIN dag_versions av ON av.id = a.dag_version_id "
    "WHERE ti.run_pk = :run_pk ORDER BY ti.id"
)

#: How many of a run's task instances are in each state (a summary read: one index range, no rows out).
COUNT_TASK_STATES = _sql(
    "SELECT state, count(*) AS n FROM task_instances WHERE run_pk = :run_pk GROUP BY state"
)

#: What a run holds of one task, to say why a key names none of its task instances: whether the run
#: exists (no row: it does not), its spec, and the task's placeholder state (NULL: none) and how many
#: mapped instances it has.
TASK_INSTANCES_OF_TASK = _sql(
    "SELECT v.spec, "
    "(SELECT ti.state FROM task_instances ti WHERE ti.run_pk = r.id AND ti.task_id = :task_id "
    "  AND ti.map_index = -1) AS placeholder_state, "
    "(SELECT count(*) FROM task_instances ti WHERE ti.run_pk = r.id AND ti.task_id = :task_id "
    "  AND ti.map_index >= 0) AS instances "
    "FROM dag_runs r JOIN dag_versions v ON v.id = r.dag_version_id "
    "WHERE r.dag_id = :dag_id AND r.run_id = :run_id"
)

#: A run's attempts (every try) with their task instance's task id and map index: by task instance in
#: the order they were made, then try number and claim time.
LIST_RUN_ATTEMPTS = _sql(
    "SELECT ti.task_id, ti.map_index, a.try_number, a.worker_id, a.state, a.claimed_at, a.started_at, "
    "a.ended_at, a.exit_code, a.error "
    "FROM task_attempts a JOIN task_instances ti ON ti.id = a.ti_id "
    "WHERE ti.run_pk = :run_pk ORDER BY ti.id, a.try_number, a.claimed_at LIMIT :limit"
)
