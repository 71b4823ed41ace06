"""Statements: delivery: heartbeats, lost attempts, logs, workers."""

from __future__ import annotations

from schedd_core.states import AttemptState, TaskState, WorkerState
from schedd_store.statements.guards import _guarded, _sql

# --- delivery: heartbeats, lost attempts, logs, workers ---------------------------------------------

#: Records a worker's heartbeat (one row, whatever it runs) and returns the attempts it listed that
#: are no longer current on that worker (failed over, cleared, cancelled): the worker must stop them.
RECORD_WORKER_HEARTBEAT = _sql(
    "WITH seen AS ("
    "  UPDATE workers SET heartbeat_at = now(), last_seen_at = now(), "
    "  running = cardinality(CAST(:ti_ids AS bigint[])) WHERE worker_id = :worker_id RETURNING worker_id"
    ") "
    "SELECT h.attempt_id FROM unnest(CAST(:ti_ids AS bigint[]), CAST(:attempt_ids AS uuid[]), "
    "CAST(:try_numbers AS int[])) AS h(ti_id, attempt_id, try_number) "
    "LEFT JOIN task_instances ti ON ti.id = h.ti_id AND ti.attempt_id = h.attempt_id "
    "AND ti.try_number = h.try_number AND ti.state = 'running' AND ti.worker_id = :worker_id "
    "AND NOT ti.lost_reported "
    "WHERE ti.id IS NULL"
)

#: Marks attempts as lost for the scheduler to fail over at once: their worker said it does not run
#: them (handed back). Conditional on the attempt and on the worker that reports it holding it, so an
#: attempt that already finished, or another worker's, is left alone.
MARK_ATTEMPTS_LOST = _sql(
    "UPDATE task_instances ti SET lost_reported = true "
    "FROM unnest(CAST(:ti_ids AS bigint[]), CAST(:attempt_ids AS uuid[]), CAST(:try_numbers AS int[]), "
    "CAST(:worker_ids AS text[])) AS h(ti_id, attempt_id, try_number, worker_id) "
    "WHERE ti.id = h.ti_id AND ti.attempt_id = h.attempt_id AND ti.try_number = h.try_number "
    "AND ti.worker_id = h.worker_id AND ti.state = 'running' RETURNING ti.id"
)

#: On a worker's hello: every attempt assigned to that worker id that it does not report running
#: was lost (a previous incarnation, or an assignment that never arrived).
MARK_UNREPORTED_ATTEMPTS_LOST = _sql(
    "UPDATE task_instances SET lost_reported = true "
    "WHERE worker_id = :worker_id AND state = 'running' AND NOT (attempt_id = ANY(CAST(:running AS uuid[]))) "
    "RETURNING id"
)

#: How long ago the registry last heard of the worker running an attempt (its last heartbeat, or the
#: claim if later), in seconds; and the window after which the attempt is lost: the worker's
#: ``silence_limit`` while it holds an etcd lease (its id is in :leased; a NULL :leased means not
#: known, and counts as held), else its ``fence_window``. Running attempts whose worker row is missing
#: get :fallback_limit.
_SILENCE = "EXTRACT(EPOCH FROM now() - GREATEST(w.heartbeat_at, ti.claimed_at))"
_LIMIT = (
    "CASE WHEN w.worker_id IS NULL THEN :fallback_limit "
    "WHEN CAST(:leased AS text[]) IS NULL OR ti.worker_id = ANY(CAST(:leased AS text[])) "
    "THEN w.silence_limit "
    "ELSE LEAST(w.fence_window, w.silence_limit) END"
)

#: The leader fails over lost attempts: those their worker reported lost, and those whose worker was
#: not heard for longer than its window (see _LIMIT). Each goes back to 'queued' with a new attempt and
#: one more allowed try (a lost attempt does not use up a retry), or to 'failed' once it was lost
#: :max_lost times.
FAIL_OVER_LOST_ATTEMPTS = _guarded(
    "WITH lost AS ("
    "  SELECT ti.id, ti.attempt_id, CASE WHEN ti.lost_reported THEN 'not running on its worker' "
    f"    ELSE 'worker not heard for ' || round(({_SILENCE})::numeric, 1) || 's' END AS reason "
    "  FROM task_instances ti LEFT JOIN workers w ON w.worker_id = ti.worker_id "
    f"  WHERE ti.state = 'running' AND (ti.lost_reported OR {_SILENCE} > {_LIMIT}) "
    "  ORDER BY ti.id FOR UPDATE OF ti"
    "), history AS ("
    "  UPDATE task_attempts a SET state = 'lost', ended_at = now(), error = lost.reason "
    "  FROM lost WHERE a.attempt_id = lost.attempt_id AND a.state = ANY(:attempt_sources)"
    ") "
    "UPDATE task_instances ti SET "
    "  state = CASE WHEN ti.lost_attempts + 1 >= :max_lost THEN 'failed' ELSE 'queued' END, "
    "  lost_attempts = ti.lost_attempts + 1, "
    "  try_number = ti.try_number + CASE WHEN ti.lost_attempts + 1 >= :max_lost THEN 0 ELSE 1 END, "
    "  max_tries = ti.max_tries + CASE WHEN ti.lost_attempts + 1 >= :max_lost THEN 0 ELSE 1 END, "
    "  attempt_id = CASE WHEN ti.lost_attempts + 1 >= :max_lost "
    "    THEN ti.attempt_id ELSE gen_random_uuid() END, "
    "  queued_at = CASE WHEN ti.lost_attempts + 1 >= :max_lost THEN ti.queued_at ELSE now() END, "
    "  ended_at = CASE WHEN ti.lost_attempts + 1 >= :max_lost THEN now() END, "
    "  error = CASE WHEN ti.lost_attempts + 1 >= :max_lost "
    "    THEN 'lost with its worker ' || (ti.lost_attempts + 1) || ' times: ' || lost.reason END, "
    "  started_at = NULL, claimed_at = NULL, lost_reported = false, worker_id = NULL, fence_token = :token "
    "FROM lost WHERE ti.id = lost.id AND ti.attempt_id = lost.attempt_id AND ti.state = ANY(:ti_sources) "
    "RETURNING ti.id, ti.run_pk, ti.state, ti.queue, lost.reason",
    ti=({TaskState.RUNNING}, {TaskState.QUEUED, TaskState.FAILED}),
    attempt=({AttemptState.RUNNING}, {AttemptState.LOST}),
)

#: Seconds until the first running attempt can be lost (negative: overdue); NULL when nothing runs.
#: The leader's next check for lost attempts is due then.
SECONDS_UNTIL_ATTEMPT_LOST = _sql(
    f"SELECT min(CASE WHEN ti.lost_reported THEN 0 ELSE {_LIMIT} - {_SILENCE} END) "
    "FROM task_instances ti LEFT JOIN workers w ON w.worker_id = ti.worker_id WHERE ti.state = 'running'"
)

#: Stores captured output of attempts, each chunk only from the worker the attempt was claimed for
#: (``a.worker_id = l.worker_id``; a chunk of another worker's attempt is dropped), and only while the
#: attempt's stored output (``task_attempts.log_bytes``, counted here, whatever offsets the worker
#: sends) stays within :max_bytes: a chunk that would pass it is dropped, and so is every later one of
#: the batch for that attempt. The task instances are locked (key share) before the attempt rows, the
#: order applying a result takes them in, so the two never deadlock
#: (``tests/integration/test_log_lock_order.py``); concurrent batches count in turn.
APPEND_LOGS = _sql(
    "WITH l AS ("
    "  SELECT * FROM unnest(CAST(:ti_ids AS bigint[]), CAST(:attempt_ids AS uuid[]), "
    "  CAST(:worker_ids AS text[]), CAST(:offsets AS bigint[]), CAST(:data AS text[])) WITH ORDINALITY "
    "  AS l(ti_id, attempt_id, worker_id, byte_offset, data, n)"
    "), ti AS MATERIALIZED ("
    "  SELECT id FROM task_instances WHERE id IN (SELECT ti_id FROM l) ORDER BY id FOR KEY SHARE"
    "), a AS ("
    "  SELECT attempt_id, ti_id, try_number, worker_id, log_bytes FROM task_attempts "
    "  WHERE attempt_id IN (SELECT attempt_id FROM l) AND ti_id IN (SELECT id FROM ti) "
    "  ORDER BY attempt_id FOR UPDATE"
    "), counted AS ("
    "  SELECT l.ti_id, a.try_number, l.attempt_id, l.byte_offset, l.data, "
    "  a.log_bytes + sum(octet_length(l.data)) OVER (PARTITION BY l.attempt_id ORDER BY l.n) AS end_bytes "
    "  FROM l JOIN a ON a.attempt_id = l.attempt_id AND a.ti_id = l.ti_id AND a.worker_id = l.worker_id"
    "), stored AS ("
    "  INSERT INTO task_logs (ti_id, try_number, attempt_id, byte_offset, data) "
    "  SELECT ti_id, try_number, attempt_id, byte_offset, data FROM counted WHERE end_bytes <= :max_bytes "
    "  RETURNING attempt_id, octet_length(data) AS size"
    ") "
    "UPDATE task_attempts a SET log_bytes = a.log_bytes + s.size "
    "FROM (SELECT attempt_id, sum(size) AS size FROM stored GROUP BY attempt_id) s "
    "WHERE a.attempt_id = s.attempt_id"
)

READ_LOGS = _sql(
    "SELECT byte_offset, data FROM task_logs WHERE ti_id = :ti_id AND try_number = :try_number "
    "AND byte_offset + octet_length(data) > :offset ORDER BY byte_offset, id LIMIT :limit"
)

#: A task instance by names: its task id and map index (-1: not an instance of a mapped task), with
#: the latest try that has an attempt (NULL before any; the try number moves on when a retry is queued).
FIND_TASK_INSTANCE = _sql(
    "SELECT ti.id, ti.try_number, ti.state, ti.attempt_id, ti.max_tries, "
    "(SELECT max(a.try_number) FROM task_attempts a WHERE a.ti_id = ti.id) AS attempted_try "
    "FROM task_instances ti JOIN dag_runs r ON r.id = ti.run_pk "
    "WHERE r.dag_id = :dag_id AND r.run_id = :run_id AND ti.task_id = :task_id AND ti.map_index = :map_index"
)

#: The state of a try's attempt (its latest: each poke of a reschedule-mode sensor is one).
ATTEMPT_STATE = _sql(
    "SELECT state FROM task_attempts WHERE ti_id = :ti_id AND try_number = :try_number "
    "ORDER BY started_at DESC NULLS LAST LIMIT 1"
)

#: The stored results of tasks in runs; a mapped task's are gathered into one array by map index (JSON
#: null for an instance that stored none), once it is expanded.
UPSTREAM_RESULTS = _sql(
    "SELECT run_pk, task_id, result FROM task_instances "
    "WHERE run_pk = ANY(:run_pks) AND task_id = ANY(:task_ids) AND map_index = -1 AND result IS NOT NULL "
    "UNION ALL "
    "SELECT run_pk, task_id, jsonb_agg(COALESCE(result, 'null'::jsonb) ORDER BY map_index) "
    "FROM task_instances "
    "WHERE run_pk = ANY(:run_pks) AND task_id = ANY(:task_ids) AND map_index >= 0 GROUP BY run_pk, task_id"
)

MARK_WORKER_DRAINING = _guarded(
    "UPDATE workers SET state = 'draining', last_seen_at = now() "
    "WHERE worker_id = :worker_id AND state = ANY(:worker_sources)",
    worker=({WorkerState.ACTIVE}, {WorkerState.DRAINING}),
)

REQUEST_DRAIN = _sql(
    "UPDATE workers SET drain_requested = true "
    "WHERE worker_id = :worker_id AND state <> 'gone' RETURNING worker_id"
)

DRAIN_REQUESTED = _sql("SELECT drain_requested FROM workers WHERE worker_id = :worker_id")

_WORKER_COLUMNS = (
    "worker_id, hostname, queues, capacity, "
    "(SELECT count(*) FROM task_instances ti "
    " WHERE ti.worker_id = workers.worker_id AND ti.state = 'running') AS running, "
    "state, code_version, registry, registered_at, last_seen_at"
)

LIST_WORKERS = _sql(
    f"SELECT {_WORKER_COLUMNS} FROM workers WHERE worker_id > :after AND (:include_gone OR state <> 'gone') "
    "ORDER BY worker_id LIMIT :limit"
)

GET_WORKER = _sql(f"SELECT {_WORKER_COLUMNS} FROM workers WHERE worker_id = :worker_id")
