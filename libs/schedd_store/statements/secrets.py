"""Statements: variables, connections and deadline misses."""

from __future__ import annotations

from schedd_store.statements.guards import _sql

# --- variables and connections (values are encrypted before they get here) --------------------------

UPSERT_VARIABLE = _sql(
    "INSERT INTO variables (key, value, description, dag_ids) VALUES (:name, :value, :description, :dag_ids) "
    "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, description = EXCLUDED.description, "
    "dag_ids = EXCLUDED.dag_ids, updated_at = now() "
    "RETURNING key AS name, value, description, dag_ids, updated_at"
)
GET_VARIABLE = _sql(
    "SELECT key AS name, value, description, dag_ids, updated_at FROM variables WHERE key = :name"
)
LIST_VARIABLES = _sql(
    "SELECT key AS name, value, description, dag_ids, updated_at FROM variables ORDER BY key"
)
DELETE_VARIABLE = _sql("DELETE FROM variables WHERE key = :name RETURNING key")
LOCK_VARIABLES = _sql("SELECT key AS name, value FROM variables ORDER BY key FOR UPDATE")
REENCRYPT_VARIABLE = _sql("UPDATE variables SET value = :value WHERE key = :name")

UPSERT_CONNECTION = _sql(
    "INSERT INTO connections (conn_id, value, description, dag_ids) "
    "VALUES (:name, :value, :description, :dag_ids) "
    "ON CONFLICT (conn_id) DO UPDATE SET value = EXCLUDED.value, description = EXCLUDED.description, "
    "dag_ids = EXCLUDED.dag_ids, updated_at = now() "
    "RETURNING conn_id AS name, value, description, dag_ids, updated_at"
)
GET_CONNECTION = _sql(
    "SELECT conn_id AS name, value, description, dag_ids, updated_at FROM connections WHERE conn_id = :name"
)
LIST_CONNECTIONS = _sql(
    "SELECT conn_id AS name, value, description, dag_ids, updated_at FROM connections ORDER BY conn_id"
)
DELETE_CONNECTION = _sql("DELETE FROM connections WHERE conn_id = :name RETURNING conn_id")
LOCK_CONNECTIONS = _sql("SELECT conn_id AS name, value FROM connections ORDER BY conn_id FOR UPDATE")
REENCRYPT_CONNECTION = _sql("UPDATE connections SET value = :value WHERE conn_id = :name")

#: The DAG of a running attempt, when the worker :worker_id holds it (the check is in the statement).
ATTEMPT_DAG = _sql(
    "SELECT r.dag_id FROM task_attempts a JOIN task_instances ti ON ti.id = a.ti_id "
    "JOIN dag_runs r ON r.id = ti.run_pk "
    "WHERE a.attempt_id = CAST(:attempt_id AS uuid) AND a.worker_id = :worker_id AND a.state = 'running' "
    "AND ti.attempt_id = a.attempt_id"
)
