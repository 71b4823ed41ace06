"""Statements: deadline alerts (runs that missed their deadline)."""

from __future__ import annotations

from schedd_store import channels
from schedd_store.statements.guards import _sql

#: Unfinished runs whose DAG version may have a deadline and whose miss is not recorded yet, with the
#: database's now().
UNFINISHED_RUNS_FOR_DEADLINES = _sql(
    "SELECT r.id, r.dag_version_id, r.logical_date, r.created_at, now() AS now FROM dag_runs r "
    "WHERE r.state IN ('queued', 'running') "
    "AND NOT EXISTS (SELECT 1 FROM deadline_misses m WHERE m.run_pk = r.id)"
)

#: Records the misses of the runs :run_pks (deadlines :ats), each once (the primary key), only for a
#: run still unfinished and a deadline that has passed by the database's clock; writes the outbox
#: event of each miss recorded by this statement (for the runs in :notify_pks, those with callbacks)
#: and wakes the relays. Returns the runs recorded.
RECORD_DEADLINE_MISSES = _sql(
    "WITH missed AS ("
    "  INSERT INTO deadline_misses (run_pk, deadline_at, fence_token) "
    "  SELECT m.run_pk, m.at, :token FROM unnest(CAST(:run_pks AS bigint[]), CAST(:ats AS timestamptz[])) "
    "  AS m(run_pk, at) JOIN dag_runs r ON r.id = m.run_pk "
    "  WHERE r.state IN ('queued', 'running') AND m.at <= now() "
    "  ON CONFLICT (run_pk) DO NOTHING RETURNING run_pk, deadline_at"
    "), events AS ("
    "  INSERT INTO outbox (topic, payload) SELECT 'run_callback', jsonb_build_object('event', "
    "  'deadline_missed', 'run_pk', m.run_pk, 'dag_id', r.dag_id, 'deadline', m.deadline_at) "
    "  FROM missed m JOIN dag_runs r ON r.id = m.run_pk WHERE m.run_pk = ANY(CAST(:notify_pks AS bigint[])) "
    "  RETURNING 1"
    f") SELECT run_pk, (SELECT count(*) FROM events) AS events, pg_notify('{channels.OUTBOX}', '') "
    "FROM missed"
)

#: A run's DAG version spec, logical date and creation time (to work out its deadline), and its miss
#: if recorded.
RUN_DEADLINE = _sql(
    "SELECT v.spec, r.logical_date, r.created_at, m.deadline_at, m.missed_at FROM dag_runs r "
    "JOIN dag_versions v ON v.id = r.dag_version_id LEFT JOIN deadline_misses m ON m.run_pk = r.id "
    "WHERE r.dag_id = :dag_id AND r.run_id = :run_id"
)
