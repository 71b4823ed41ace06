"""Statements: assets, their events (from tasks, the api and watchers) and the runs they trigger."""

from __future__ import annotations

from schedd_store import channels
from schedd_store.statements.guards import _sql

# --- registration and lineage ----------------------------------------------------------------------

#: Creates the assets named (URI, name); a name is kept once one is given.
ENSURE_ASSETS = _sql(
    "INSERT INTO assets (uri, name) SELECT u.uri, u.name "
    "FROM unnest(CAST(:uris AS text[]), CAST(:names AS text[])) AS u(uri, name) "
    "ON CONFLICT ON CONSTRAINT assets_uri_key DO UPDATE SET name = EXCLUDED.name "
    "WHERE assets.name = '' AND EXCLUDED.name <> ''"
)

#: The assets a DAG version names, by role; written once per version.
INSERT_ASSET_REFS = _sql(
    "INSERT INTO dag_asset_refs (version_id, dag_id, role, task_id, asset_id) "
    "SELECT :version_id, :dag_id, u.role, u.task_id, a.id "
    "FROM unnest(CAST(:roles AS text[]), CAST(:task_ids AS text[]), CAST(:uris AS text[])) "
    "AS u(role, task_id, uri) JOIN assets a ON a.uri = u.uri ON CONFLICT DO NOTHING"
)

#: Assets by URI after :after (with a prefix), each with the current versions' refs to it.
LIST_ASSETS = _sql(
    "SELECT a.id, a.uri, a.name, "
    "(SELECT max(e.created_at) FROM asset_events e WHERE e.asset_id = a.id) AS last_event_at, "
    "COALESCE((SELECT array_agg(r.role || '|' || r.dag_id || '|' || r.task_id "
    "  ORDER BY r.role, r.dag_id, r.task_id) FROM dag_asset_refs r "
    "  JOIN dags d ON d.dag_id = r.dag_id AND d.latest_version_id = r.version_id "
    "  WHERE r.asset_id = a.id), ARRAY[]::text[]) AS refs "
    "FROM assets a WHERE a.uri > :after AND starts_with(a.uri, :prefix) ORDER BY a.uri LIMIT :limit"
)

# --- events ----------------------------------------------------------------------------------------

#: Queues each new event for every DAG whose current version is scheduled on its asset and notifies
#: the leader once per DAG: the CTEs ``queued`` and ``notified`` (which runs only where the statement
#: reads it), appended to the statements that insert events (as CTE ``ev``: id, asset_id).
_QUEUE_EVENTS = (
    ", queued AS ("
    "  INSERT INTO asset_dag_queue (dag_id, event_id) "
    "  SELECT s.dag_id, ev.id FROM ev JOIN dag_asset_refs s ON s.asset_id = ev.asset_id "
    "  AND s.role = 'schedule' JOIN dags d ON d.dag_id = s.dag_id AND d.latest_version_id = s.version_id "
    "  ON CONFLICT DO NOTHING RETURNING dag_id"
    "), notified AS ("
    f"  SELECT pg_notify('{channels.ASSETS}', q.dag_id) FROM (SELECT DISTINCT dag_id FROM queued) q"
    ")"
)
_QUEUE_AND_NOTIFY = _QUEUE_EVENTS + " SELECT ev.id, (SELECT count(*) FROM notified) AS dags FROM ev"

#: Part of ``statements.dispatch.APPLY_RESULTS`` (the rows it applied are its CTE ``applied``): the
#: events of the outlets of the task instances that have just succeeded, one per (attempt, asset)
#: (the idempotency key), with the task's ``asset_extra``; then :data:`_QUEUE_EVENTS`.
_OUTLET_EVENTS = (
    "ev AS ("
    "  INSERT INTO asset_events (asset_id, extra, source, source_dag_id, source_run_pk, source_task_id, "
    "  idempotency_key) "
    "  SELECT ref.asset_id, CASE WHEN jsonb_typeof(x.result -> 'asset_extra') = 'object' "
    "    THEN x.result -> 'asset_extra' ELSE '{}'::jsonb END, 'task', x.dag_id, x.run_pk, x.task_id, "
    "    'task:' || x.attempt_id::text || ':' || ref.asset_id::text "
    "  FROM applied x "
    "  CROSS JOIN LATERAL (SELECT dag_version_id FROM dag_runs WHERE id = x.run_pk LIMIT 1) xr "
    "  JOIN dag_asset_refs ref ON ref.version_id = xr.dag_version_id AND ref.role = 'outlet' "
    "  AND ref.task_id = x.task_id "
    "  WHERE x.state = 'success' "
    "  ON CONFLICT ON CONSTRAINT asset_events_idempotency_key DO NOTHING RETURNING id, asset_id"
    ")" + _QUEUE_EVENTS
)

#: Events from the api or a watcher, by URI (the assets exist: ENSURE_ASSETS first). An event whose
#: idempotency key is recorded already is not recorded again (no row comes back for it).
RECORD_EVENTS = _sql(
    "WITH ev AS ("
    "  INSERT INTO asset_events (asset_id, extra, source, source_watcher, idempotency_key) "
    "  SELECT a.id, u.extra, :source, NULLIF(:watcher, ''), u.key "
    "  FROM unnest(CAST(:uris AS text[]), CAST(:extras AS jsonb[]), CAST(:keys AS text[])) "
    "  WITH ORDINALITY AS u(uri, extra, key, n) JOIN assets a ON a.uri = u.uri ORDER BY u.n "
    "  ON CONFLICT ON CONSTRAINT asset_events_idempotency_key DO NOTHING RETURNING id, asset_id"
    ")" + _QUEUE_AND_NOTIFY
)

#: The event recorded under an idempotency key.
EVENT_BY_KEY = _sql("SELECT id FROM asset_events WHERE idempotency_key = :key")

_EVENT_COLUMNS = (
    "e.id, a.uri, e.extra, e.source, e.source_dag_id, e.source_task_id, e.source_watcher, "
    "e.created_at, sr.run_id AS source_run_id, "
    "COALESCE((SELECT array_agg('dags/' || c.dag_id || '/runs/' || cr.run_id ORDER BY c.run_pk) "
    "  FROM asset_event_consumptions c JOIN dag_runs cr ON cr.id = c.run_pk WHERE c.event_id = e.id), "
    "  ARRAY[]::text[]) AS consumed_by "
    "FROM asset_events e JOIN assets a ON a.id = e.asset_id "
    "LEFT JOIN dag_runs sr ON sr.id = e.source_run_pk "
)

#: Events newest first, before :before, of one asset (:uri, or every one for ''), or only those the
#: run :run_pk consumed (NULL: any).
LIST_EVENTS = _sql(
    "SELECT "
    + _EVENT_COLUMNS
    + "WHERE e.id < :before AND (:uri = '' OR a.uri = :uri) AND (CAST(:run_pk AS bigint) IS NULL OR "
    "EXISTS (SELECT 1 FROM asset_event_consumptions c WHERE c.event_id = e.id "
    "AND c.run_pk = CAST(:run_pk AS bigint))) "
    "ORDER BY e.id DESC LIMIT :limit"
)

GET_EVENT = _sql("SELECT " + _EVENT_COLUMNS + "WHERE e.id = :id")

# --- the leader: asset-triggered runs (fenced) -----------------------------------------------------

#: Locks the unpaused DAGs that have queued events (or, with :only, those of them named), at most
#: :limit, by DAG id.
LOCK_ASSET_QUEUED_DAGS = _sql(
    "SELECT d.dag_id, d.latest_version_id FROM dags d "
    "WHERE d.dag_id IN (SELECT DISTINCT q.dag_id FROM asset_dag_queue q) AND NOT d.paused "
    "AND (CAST(:only AS text[]) IS NULL OR d.dag_id = ANY(CAST(:only AS text[]))) "
    "ORDER BY d.dag_id LIMIT :limit FOR UPDATE OF d"
)

#: The queued events of the DAGs, with their assets' URIs, oldest first.
QUEUED_ASSET_EVENTS = _sql(
    "SELECT q.dag_id, q.event_id, a.uri FROM asset_dag_queue q "
    "JOIN asset_events e ON e.id = q.event_id JOIN assets a ON a.id = e.asset_id "
    "WHERE q.dag_id = ANY(CAST(:dag_ids AS text[])) ORDER BY q.dag_id, q.event_id"
)

#: Makes queued asset-triggered runs (wakes the scheduling loop for each).
INSERT_ASSET_RUNS = _sql(
    "WITH runs AS ("
    "  INSERT INTO dag_runs (dag_id, run_id, dag_version_id, run_type, state, logical_date, fence_token) "
    "  SELECT u.dag_id, u.run_id, u.version_id, 'asset_triggered', 'queued', :now, :token "
    "  FROM unnest(CAST(:dag_ids AS text[]), CAST(:version_ids AS bigint[]), CAST(:run_ids AS text[])) "
    "  AS u(dag_id, version_id, run_id) RETURNING id, dag_id"
    f") SELECT id, dag_id, pg_notify('{channels.RUNS}', id::text) FROM runs"
)

#: Records which run consumed each event; the primary key (dag, event) refuses a second consumption.
CONSUME_ASSET_EVENTS = _sql(
    "INSERT INTO asset_event_consumptions (dag_id, event_id, run_pk, fence_token) "
    "SELECT u.dag_id, u.event_id, u.run_pk, :token "
    "FROM unnest(CAST(:dag_ids AS text[]), CAST(:event_ids AS bigint[]), CAST(:run_pks AS bigint[])) "
    "AS u(dag_id, event_id, run_pk)"
)

#: Takes events off the DAGs' queues (consumed, or of an asset the DAG is no longer scheduled on).
DEQUEUE_ASSET_EVENTS = _sql(
    "DELETE FROM asset_dag_queue q USING unnest(CAST(:dag_ids AS text[]), CAST(:event_ids AS bigint[])) "
    "AS u(dag_id, event_id) WHERE q.dag_id = u.dag_id AND q.event_id = u.event_id"
)

# --- watchers (fenced) -----------------------------------------------------------------------------

WATCHER_CURSOR = _sql("SELECT position FROM asset_watcher_cursors WHERE watcher = :watcher FOR UPDATE")

SET_WATCHER_CURSOR = _sql(
    "INSERT INTO asset_watcher_cursors (watcher, position, fence_token) VALUES (:watcher, :position, :token) "
    "ON CONFLICT (watcher) DO UPDATE SET position = EXCLUDED.position, fence_token = EXCLUDED.fence_token"
)
