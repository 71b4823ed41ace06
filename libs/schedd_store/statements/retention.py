"""Statements: retention (leader only, fenced)."""

from __future__ import annotations

from schedd_store.statements.guards import _sql

# --- retention (leader only, fenced) ----------------------------------------------------------------
#
# Each deletes one bounded batch of what is older than :age seconds, oldest first, and returns what it
# deleted; the caller repeats until a batch comes back short.

#: Finished runs (their task instances, attempts and output go with them, ON DELETE CASCADE), as many
#: as hold at most :budget task instances (at least one run).
PURGE_FINISHED_RUNS = _sql(
    "WITH old AS ("
    "  SELECT r.id, sum(v.task_count) OVER (ORDER BY r.ended_at, r.id) AS upto, v.task_count "
    "  FROM dag_runs r JOIN dag_versions v ON v.id = r.dag_version_id "
    "  WHERE r.state IN ('success', 'failed') AND r.ended_at < now() - make_interval(secs => :age) "
    "  ORDER BY r.ended_at, r.id LIMIT :batch"
    ") DELETE FROM dag_runs WHERE id IN (SELECT id FROM old WHERE upto - task_count < :budget) RETURNING id"
)

PURGE_LOGS = _sql(
    "DELETE FROM task_logs WHERE id IN (SELECT id FROM task_logs "
    "WHERE created_at < now() - make_interval(secs => :age) ORDER BY created_at LIMIT :batch) RETURNING id"
)

PURGE_PASSES = _sql(
    "DELETE FROM scheduler_passes WHERE id IN (SELECT id FROM scheduler_passes "
    "WHERE committed_at < now() - make_interval(secs => :age) ORDER BY committed_at LIMIT :batch) "
    "RETURNING id"
)

#: Delivered outbox events, and those given up on.
PURGE_OUTBOX = _sql(
    "DELETE FROM outbox WHERE id IN (SELECT id FROM outbox "
    "WHERE (delivered_at IS NOT NULL OR failed_at IS NOT NULL) "
    "AND COALESCE(delivered_at, failed_at) < now() - make_interval(secs => :age) "
    "ORDER BY COALESCE(delivered_at, failed_at) LIMIT :batch) RETURNING id"
)

PURGE_REQUESTS = _sql(
    "DELETE FROM request_log WHERE (method, request_id) IN (SELECT method, request_id FROM request_log "
    "WHERE created_at < now() - make_interval(secs => :age) ORDER BY created_at LIMIT :batch) RETURNING 1"
)

#: Workers that left long ago and have nothing assigned.
PURGE_GONE_WORKERS = _sql(
    "DELETE FROM workers WHERE worker_id IN (SELECT w.worker_id FROM workers w "
    "WHERE w.state = 'gone' AND w.last_seen_at < now() - make_interval(secs => :age) "
    "AND NOT EXISTS (SELECT 1 FROM task_instances ti "
    "  WHERE ti.worker_id = w.worker_id AND ti.state = 'running') "
    "ORDER BY w.last_seen_at LIMIT :batch) RETURNING 1"
)

PURGE_AUDIT_RECORDS = _sql(
    "DELETE FROM audit_log WHERE id IN (SELECT id FROM audit_log "
    "WHERE at < now() - make_interval(secs => :age) ORDER BY at LIMIT :batch) RETURNING id"
)
