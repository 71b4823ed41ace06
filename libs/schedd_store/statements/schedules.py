"""Statements: schedules (the leader's run creation, fenced) and the api's wake-ups of it."""

from __future__ import annotations

from schedd_store import channels
from schedd_store.statements.guards import _sql

# --- schedules -------------------------------------------------------------------------------------

#: The earliest moment an unpaused DAG's schedule must be looked at (NULL: none is on a timer).
NEXT_SCHEDULE_DUE = _sql("SELECT min(next_due_at) FROM dags WHERE next_due_at IS NOT NULL AND NOT paused")

#: Where a DAG without a stored next run starts (see schedd_core.schedule_plan): the end of the span
#: its runs cover (the latest end of its scheduled and backfill runs' data intervals, of the intervals
#: of its unfinished backfill, and where a previous schedule had got to) and the latest logical date
#: of those runs and intervals. Read only for a DAG without a stored next run.
_STARTS_AFTER = (
    "CASE WHEN d.next_interval_start IS NULL THEN GREATEST("
    "  (SELECT max(r.data_interval_end) FROM dag_runs r WHERE r.dag_id = d.dag_id "
    "   AND r.run_type IN ('scheduled', 'backfill')), "
    "  (SELECT max(i.interval_end) FROM backfill_intervals i JOIN backfills b ON b.id = i.backfill_id "
    "   WHERE b.dag_id = d.dag_id AND b.state IN ('running', 'paused')), "
    "  d.planned_until) END AS covered_until, "
    "CASE WHEN d.next_interval_start IS NULL THEN GREATEST("
    "  (SELECT max(r.logical_date) FROM dag_runs r WHERE r.dag_id = d.dag_id "
    "   AND r.run_type IN ('scheduled', 'backfill')), "
    "  (SELECT max(COALESCE(i.logical_date, i.interval_start)) FROM backfill_intervals i "
    "   JOIN backfills b ON b.id = i.backfill_id "
    "   WHERE b.dag_id = d.dag_id AND b.state IN ('running', 'paused'))"
    ") END AS latest_logical_date"
)

#: Locks the DAGs whose schedules to look at now, earliest due first: those whose ``next_due_at``
#: passed, those named in :woken (a run of theirs ended), and with :held those waiting for a run to
#: end (no ``next_due_at``, their next run's time passed), once per term. Each row carries what
#: planning needs: the latest version, the stored next run, the DAG's unfinished runs that are not a
#: backfill's, and, without a stored next run, where planning starts.
LOCK_DUE_DAGS = _sql(
    "SELECT d.dag_id, d.latest_version_id, d.next_interval_start, d.next_interval_end, "
    "d.next_logical_date, "
    "(SELECT count(*) FROM dag_runs r WHERE r.dag_id = d.dag_id AND r.state IN ('queued', 'running') "
    "  AND r.backfill_id IS NULL) AS active_runs, "
    f"{_STARTS_AFTER} "
    "FROM dags d WHERE NOT d.paused AND d.latest_version_id IS NOT NULL AND ("
    "  d.next_due_at <= :now OR d.dag_id = ANY(CAST(:woken AS text[])) "
    "  OR (:held AND d.next_due_at IS NULL AND d.next_interval_end <= :now)) "
    "AND (CAST(:only AS text[]) IS NULL OR d.dag_id = ANY(CAST(:only AS text[]))) "
    "ORDER BY d.next_due_at NULLS LAST, d.dag_id LIMIT :limit FOR UPDATE OF d"
)

#: The (dag, logical date) pairs among the given ones that have a scheduled or backfill run already.
TAKEN_LOGICAL_DATES = _sql(
    "SELECT r.dag_id, r.logical_date FROM dag_runs r JOIN unnest(CAST(:dag_ids AS text[]), "
    "CAST(:dates AS timestamptz[])) AS u(dag_id, logical_date) "
    "ON r.dag_id = u.dag_id AND r.logical_date = u.logical_date "
    "WHERE r.run_type IN ('scheduled', 'backfill')"
)

#: Creates queued runs, one per interval with its logical date, each of the given DAG version, stamped
#: with the fence token,
#: and wakes the scheduling loop for each. A logical date taken by a scheduled or backfill run violates
#: dag_runs_dag_logical_date_key (mapped to a domain error by the caller).
INSERT_INTERVAL_RUNS = _sql(
    "WITH runs AS ("
    "  INSERT INTO dag_runs (dag_id, run_id, dag_version_id, run_type, state, logical_date, "
    "  data_interval_start, data_interval_end, backfill_id, fence_token) "
    "  SELECT u.dag_id, u.run_id, u.version_id, :run_type, 'queued', u.logical, u.starts, u.ends, "
    "  CAST(:backfill_id AS bigint), :token "
    "  FROM unnest(CAST(:dag_ids AS text[]), CAST(:version_ids AS bigint[]), CAST(:run_ids AS text[]), "
    "  CAST(:logical AS timestamptz[]), CAST(:starts AS timestamptz[]), CAST(:ends AS timestamptz[])) "
    "  AS u(dag_id, version_id, run_id, logical, starts, ends) RETURNING id, dag_id, logical_date"
    f") SELECT id, dag_id, logical_date, pg_notify('{channels.RUNS}', id::text) FROM runs "
    "ORDER BY dag_id, logical_date"
)

#: Keeps what the leader decided for DAGs' schedules.
SET_SCHEDULE_STATES = _sql(
    "UPDATE dags d SET next_interval_start = u.next_start, next_interval_end = u.next_end, "
    "next_logical_date = u.next_logical, next_due_at = u.due_at "
    "FROM unnest(CAST(:dag_ids AS text[]), CAST(:next_starts AS timestamptz[]), "
    "CAST(:next_ends AS timestamptz[]), CAST(:next_logicals AS timestamptz[]), "
    "CAST(:due_ats AS timestamptz[])) "
    "AS u(dag_id, next_start, next_end, next_logical, due_at) WHERE d.dag_id = u.dag_id"
)

#: A DAG whose schedule cannot be planned is taken off the timer.
STOP_SCHEDULE = _sql("UPDATE dags SET next_due_at = NULL WHERE dag_id = :dag_id")

#: The api's side: a registration whose schedule fields changed (or a new DAG) is planned afresh from
#: the span its runs cover, and where the old schedule had got to (the start of its next run) is kept
#: in planned_until; the leader is woken. 'epoch' makes the DAG due at once, whatever the
#: leader's clock says.
RESET_SCHEDULE = _sql(
    "WITH reset AS ("
    "  UPDATE dags SET schedule_key = :schedule_key, "
    "  planned_until = COALESCE(next_interval_start, planned_until), "
    "  next_interval_start = NULL, next_interval_end = NULL, next_logical_date = NULL, "
    "  next_due_at = CASE WHEN CAST(:schedule_key AS text) = '' THEN NULL ELSE 'epoch'::timestamptz END "
    "  WHERE dag_id = :dag_id AND schedule_key IS DISTINCT FROM CAST(:schedule_key AS text) RETURNING dag_id"
    f") SELECT pg_notify('{channels.DAGS}', dag_id) FROM reset"
)

#: An unpaused DAG is looked at at once (catch-up or the latest interval, by its catch-up setting).
WAKE_SCHEDULE = _sql(
    "WITH woken AS ("
    "  UPDATE dags SET next_due_at = 'epoch'::timestamptz WHERE dag_id = :dag_id AND schedule_key <> '' "
    "  RETURNING dag_id"
    f") SELECT pg_notify('{channels.DAGS}', dag_id) FROM woken"
)

#: The stored schedule state of one DAG, for listing its next runs.
SCHEDULE_STATE_OF_DAG = _sql(
    "SELECT d.next_interval_start, d.next_interval_end, d.next_logical_date, "
    f"{_STARTS_AFTER} FROM dags d WHERE d.dag_id = :dag_id"
)
