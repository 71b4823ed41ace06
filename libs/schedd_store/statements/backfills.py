"""Statements: backfills (the api stores and controls them; the leader makes their runs, fenced)."""

from __future__ import annotations

from schedd_core.states import BackfillState
from schedd_store import channels
from schedd_store.statements.guards import _guarded, _sql

# --- backfills: the api's side ------------------------------------------------------------------------

#: Stores a backfill, running, and wakes the leader. One active backfill per DAG
#: (backfills_one_active_key, mapped to a domain error by the caller).
INSERT_BACKFILL = _sql(
    "WITH made AS ("
    "  INSERT INTO backfills (dag_id, start_date, end_date, strategy, max_active_runs, chunk_size, "
    "  backward, reprocess, state, conf, run_on_latest_version) VALUES (:dag_id, :start_date, :end_date, "
    "  :strategy, :max_active_runs, :chunk_size, :backward, :reprocess, 'running', CAST(:conf AS jsonb), "
    "  :run_on_latest_version) RETURNING id"
    f") SELECT id, pg_notify('{channels.BACKFILLS}', id::text) FROM made"
)

#: The backfill's intervals, in the order its runs are made, each with its chunk and logical date.
INSERT_BACKFILL_INTERVALS = _sql(
    "INSERT INTO backfill_intervals (backfill_id, position, chunk, interval_start, interval_end, "
    "logical_date, status) "
    "SELECT :backfill_id, u.position, u.chunk, u.starts, u.ends, u.logical, 'pending' "
    "FROM unnest(CAST(:positions AS int[]), CAST(:chunks AS int[]), CAST(:starts AS timestamptz[]), "
    "CAST(:ends AS timestamptz[]), CAST(:logical AS timestamptz[])) "
    "AS u(position, chunk, starts, ends, logical)"
)

_BACKFILL_COLUMNS = (
    "b.id, b.dag_id, b.start_date, b.end_date, b.strategy, b.max_active_runs, b.chunk_size, b.backward, "
    "b.reprocess, b.state, b.error, b.created_at, b.updated_at, p.total, p.pending, p.running, "
    "p.succeeded, p.failed, p.skipped, b.conf, b.run_on_latest_version"
)
#: Progress by interval; an interval whose run ended counts by its run's state even before the
#: leader settled it (and after a cancel, which settles nothing).
_PROGRESS = (
    "CROSS JOIN LATERAL (SELECT count(*) AS total, "
    "count(*) FILTER (WHERE i.status = 'pending') AS pending, "
    "count(*) FILTER (WHERE i.status = 'created' AND r.state IN ('queued', 'running')) AS running, "
    "count(*) FILTER (WHERE i.status = 'succeeded' OR (i.status = 'created' AND r.state = 'success')) "
    "AS succeeded, "
    "count(*) FILTER (WHERE i.status = 'failed' "
    "  OR (i.status = 'created' AND (r.state = 'failed' OR r.id IS NULL))) AS failed, "
    "count(*) FILTER (WHERE i.status = 'skipped') AS skipped "
    "FROM backfill_intervals i LEFT JOIN dag_runs r ON r.id = i.run_pk WHERE i.backfill_id = b.id) AS p"
)

GET_BACKFILL = _sql(f"SELECT {_BACKFILL_COLUMNS} FROM backfills b {_PROGRESS} WHERE b.id = :id")

LIST_BACKFILLS = _sql(
    f"SELECT {_BACKFILL_COLUMNS} FROM backfills b {_PROGRESS} "
    "WHERE (CAST(:dag_id AS text) IS NULL OR b.dag_id = :dag_id) AND b.id < :before "
    "ORDER BY b.id DESC LIMIT :limit"
)

ACTIVE_BACKFILL_OF_DAG = _sql(
    "SELECT id FROM backfills WHERE dag_id = :dag_id AND state IN ('running', 'paused')"
)

LOCK_BACKFILL = _sql("SELECT id, dag_id, state FROM backfills WHERE id = :id FOR UPDATE")

PAUSE_BACKFILL = _guarded(
    "UPDATE backfills SET state = 'paused', updated_at = now() WHERE id = :id "
    "AND state = ANY(:backfill_sources) RETURNING id",
    backfill=({BackfillState.RUNNING}, {BackfillState.PAUSED}),
)

RESUME_BACKFILL = _guarded(
    "WITH resumed AS ("
    "  UPDATE backfills SET state = 'running', updated_at = now() WHERE id = :id "
    "  AND state = ANY(:backfill_sources) RETURNING id"
    f") SELECT id, pg_notify('{channels.BACKFILLS}', id::text) FROM resumed",
    backfill=({BackfillState.PAUSED}, {BackfillState.RUNNING}),
)

CANCEL_BACKFILL = _guarded(
    "UPDATE backfills SET state = 'cancelled', updated_at = now() WHERE id = :id "
    "AND state = ANY(:backfill_sources) RETURNING id",
    backfill=({BackfillState.RUNNING, BackfillState.PAUSED}, {BackfillState.CANCELLED}),
)

#: The backfill's runs still queued or running (a cancel fails them).
#: Locked in id order, as the pass locks runs: a run the leader is finishing is waited for and then
#: left out, since its state no longer matches (READ COMMITTED re-checks the WHERE after the wait).
UNFINISHED_BACKFILL_RUNS = _sql(
    "SELECT run_id FROM dag_runs WHERE backfill_id = :id AND state IN ('queued', 'running') "
    "ORDER BY id FOR UPDATE"
)

# --- backfills: the leader's side (fenced) --------------------------------------------------------------

RUNNING_BACKFILLS = _sql("SELECT id FROM backfills WHERE state = 'running' ORDER BY id")

LOCK_RUNNING_BACKFILLS = _sql(
    "SELECT id, dag_id, strategy, max_active_runs, chunk_size, reprocess, conf, run_on_latest_version "
    "FROM backfills "
    "WHERE id = ANY(:ids) AND state = 'running' ORDER BY id FOR UPDATE"
)

#: The intervals whose runs are made (with the state of each run) and the first :window that wait,
#: in order: all a step of the backfill's strategy looks at.
BACKFILL_WINDOW = _sql(
    "(SELECT i.position, i.chunk, i.status, i.interval_start, i.interval_end, "
    "  COALESCE(i.logical_date, i.interval_start) AS logical_date, r.id AS run_pk, "
    "  r.state AS run_state FROM backfill_intervals i LEFT JOIN dag_runs r ON r.id = i.run_pk "
    "  WHERE i.backfill_id = :id AND i.status = 'created') "
    "UNION ALL "
    "(SELECT i.position, i.chunk, i.status, i.interval_start, i.interval_end, "
    "  COALESCE(i.logical_date, i.interval_start), NULL, NULL "
    "  FROM backfill_intervals i WHERE i.backfill_id = :id AND i.status = 'pending' "
    "  ORDER BY i.position LIMIT :window)"
)

BACKFILL_HAS_FAILED = _sql(
    "SELECT EXISTS (SELECT 1 FROM backfill_intervals WHERE backfill_id = :id AND status = 'failed')"
)

#: Records how the runs of some intervals ended.
SETTLE_BACKFILL_INTERVALS = _sql(
    "UPDATE backfill_intervals i SET status = u.status, note = u.note "
    "FROM unnest(CAST(:positions AS int[]), CAST(:statuses AS text[]), CAST(:notes AS text[])) "
    "AS u(position, status, note) WHERE i.backfill_id = :id AND i.position = u.position "
    "AND i.status = 'created'"
)

#: The backfill's conf on the runs it just made.
SET_RUNS_CONF = _sql(
    "UPDATE dag_runs SET conf = CAST(:conf AS jsonb) WHERE id = ANY(CAST(:run_pks AS bigint[]))"
)

#: Links intervals to the runs made (or rerun) for them.
LINK_BACKFILL_INTERVALS = _sql(
    "UPDATE backfill_intervals i SET status = 'created', run_pk = u.run_pk "
    "FROM unnest(CAST(:positions AS int[]), CAST(:run_pks AS bigint[])) AS u(position, run_pk) "
    "WHERE i.backfill_id = :id AND i.position = u.position AND i.status = 'pending'"
)

SKIP_BACKFILL_INTERVALS = _sql(
    "UPDATE backfill_intervals i SET status = 'skipped', note = u.note "
    "FROM unnest(CAST(:positions AS int[]), CAST(:notes AS text[])) AS u(position, note) "
    "WHERE i.backfill_id = :id AND i.position = u.position AND i.status = 'pending'"
)

#: The scheduled and backfill runs of the DAG at the given logical dates.
RUNS_AT_LOGICAL_DATES = _sql(
    "SELECT id, run_id, logical_date, state, dag_version_id FROM dag_runs WHERE dag_id = :dag_id "
    "AND run_type IN ('scheduled', 'backfill') AND logical_date = ANY(CAST(:dates AS timestamptz[])) "
    "FOR UPDATE"
)

LATEST_VERSION_OF_DAG = _sql("SELECT latest_version_id FROM dags WHERE dag_id = :dag_id")

FIRST_FAILED_INTERVAL = _sql(
    "SELECT COALESCE(logical_date, interval_start) AS logical_date FROM backfill_intervals "
    "WHERE backfill_id = :id AND status = 'failed' "
    "ORDER BY position LIMIT 1"
)

#: A finished run that a backfill runs again becomes the backfill's: its task instances take the
#: backfill's share of the pools.
ADOPT_RUN = _sql(
    "WITH adopted AS ("
    "  UPDATE dag_runs SET backfill_id = :backfill_id, fence_token = :token WHERE id = :run_pk RETURNING id"
    ") UPDATE task_instances SET backfill = true WHERE run_pk IN (SELECT id FROM adopted)"
)

SUCCEED_BACKFILL = _guarded(
    "UPDATE backfills SET state = 'succeeded', updated_at = now() WHERE id = :id "
    "AND state = ANY(:backfill_sources) RETURNING id",
    backfill=({BackfillState.RUNNING}, {BackfillState.SUCCEEDED}),
)

FAIL_BACKFILL = _guarded(
    "UPDATE backfills SET state = 'failed', error = :error, updated_at = now() WHERE id = :id "
    "AND state = ANY(:backfill_sources) RETURNING id",
    backfill=({BackfillState.RUNNING}, {BackfillState.FAILED}),
)
