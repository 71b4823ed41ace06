"""Statements: the outbox."""

from __future__ import annotations

from schedd_store.statements.guards import _sql

# --- the outbox ---------------------------------------------------------------------------------------

#: Run-level events, written by the scheduler in the pass that finishes the run.
RECORD_RUN_EVENTS = _sql(
    "INSERT INTO outbox (topic, payload) SELECT 'run_callback', jsonb_build_object('event', e.event, "
    "'run_pk', e.run_pk, 'dag_id', e.dag_id) "
    "FROM unnest(CAST(:events AS text[]), CAST(:run_pks AS bigint[]), CAST(:dag_ids AS text[])) "
    "AS e(event, run_pk, dag_id)"
)

#: Takes due outbox rows for delivery by pushing their next attempt out by :lease seconds, so a relay
#: that dies while delivering leaves them to another after the lease. SKIP LOCKED lets several relays
#: share the work.
CLAIM_OUTBOX = _sql(
    "WITH due AS ("
    "  SELECT id FROM outbox WHERE delivered_at IS NULL AND failed_at IS NULL AND next_attempt_at <= now() "
    "  ORDER BY next_attempt_at, id LIMIT :limit FOR UPDATE SKIP LOCKED"
    ") UPDATE outbox o SET next_attempt_at = now() + make_interval(secs => :lease) FROM due "
    "WHERE o.id = due.id RETURNING o.id, o.topic, o.payload, o.attempts"
)

RUNS_FOR_EVENTS = _sql("SELECT id, run_id, dag_version_id FROM dag_runs WHERE id = ANY(:ids)")

MARK_DELIVERED = _sql("UPDATE outbox SET delivered_at = now(), attempts = attempts + 1 WHERE id = ANY(:ids)")

MARK_DELIVERY_FAILED = _sql(
    "UPDATE outbox SET attempts = attempts + 1, last_error = :error, "
    "next_attempt_at = now() + make_interval(secs => :delay), "
    "failed_at = CASE WHEN attempts + 1 >= :max_attempts THEN now() END WHERE id = :id"
)

SECONDS_UNTIL_OUTBOX_DUE = _sql(
    "SELECT EXTRACT(EPOCH FROM min(next_attempt_at) - now()) FROM outbox "
    "WHERE delivered_at IS NULL AND failed_at IS NULL"
)
