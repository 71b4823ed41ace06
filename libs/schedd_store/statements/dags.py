"""Statements: DAGs."""

from __future__ import annotations

from schedd_store.statements.guards import _sql

# --- DAGs ------------------------------------------------------------------------------------------

#: Creates the DAG, paused or not, unless it exists; returns a row only when it created it.
ENSURE_DAG = _sql(
    "INSERT INTO dags (dag_id, paused) VALUES (:dag_id, :paused) ON CONFLICT (dag_id) DO NOTHING "
    "RETURNING dag_id"
)

LOCK_DAG = _sql("SELECT latest_version_id FROM dags WHERE dag_id = :dag_id FOR UPDATE")

#: The DAG's current version hash (NULL for a DAG with none), its row locked.
LOCK_DAG_CURRENT_VERSION = _sql(
    "SELECT v.version_hash FROM dags d LEFT JOIN dag_versions v ON v.id = d.latest_version_id "
    "WHERE d.dag_id = :dag_id FOR UPDATE OF d"
)

INSERT_DAG_VERSION = _sql(
    "INSERT INTO dag_versions (dag_id, version_hash, spec, task_count) "
    "VALUES (:dag_id, :version_hash, :spec, :task_count) "
    "ON CONFLICT ON CONSTRAINT dag_versions_dag_hash_key DO NOTHING RETURNING id"
)

FIND_DAG_VERSION = _sql("SELECT id FROM dag_versions WHERE dag_id = :dag_id AND version_hash = :version_hash")

SET_LATEST_VERSION = _sql(
    "UPDATE dags SET latest_version_id = :version_id, updated_at = now() WHERE dag_id = :dag_id"
)

_DAG_COLUMNS = (
    "d.dag_id, d.paused, d.created_at, d.updated_at, v.version_hash, v.spec, "
    "v.created_at AS version_created_at"
)

GET_DAG = _sql(
    f"SELECT {_DAG_COLUMNS} FROM dags d JOIN dag_versions v ON v.id = d.latest_version_id "
    "WHERE d.dag_id = :dag_id"
)

LIST_DAGS = _sql(
    f"SELECT {_DAG_COLUMNS} FROM dags d JOIN dag_versions v ON v.id = d.latest_version_id "
    "WHERE d.dag_id > :after ORDER BY d.dag_id LIMIT :limit"
)

GET_VERSION_SPECS = _sql("SELECT id, spec FROM dag_versions WHERE id = ANY(:ids)")

#: Newest first, below the version id :before.
LIST_DAG_VERSIONS = _sql(
    "SELECT v.id, v.version_hash, v.created_at, v.task_count, v.id = d.latest_version_id AS current "
    "FROM dag_versions v JOIN dags d ON d.dag_id = v.dag_id "
    "WHERE v.dag_id = :dag_id AND v.id < :before ORDER BY v.id DESC LIMIT :limit"
)

GET_DAG_VERSION = _sql(
    "SELECT v.id, v.version_hash, v.created_at, v.task_count, v.spec, v.id = d.latest_version_id AS current "
    "FROM dag_versions v JOIN dags d ON d.dag_id = v.dag_id "
    "WHERE v.dag_id = :dag_id AND v.version_hash = :version_hash"
)

DAG_EXISTS = _sql("SELECT 1 FROM dags WHERE dag_id = :dag_id")
