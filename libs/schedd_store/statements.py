"""Every SQL statement of schedd that enforces an invariant, by name.

Conventions:
- A state change is one guarded UPDATE: ``WHERE ... state = ANY(:<machine>_sources)``,
  the sources bound when the statement is defined (:func:`_guarded`, which checks each
  source against ``schedd_core.states`` for every target the statement sets), or, for a
  statement whose target is a parameter, ``state = ANY(:allowed_from)`` computed by the
  caller from the same tables. Callers compare the returned rows with what they expected;
  a shortfall is a typed error. ``tests/unit/test_statement_guards.py`` fails on any
  statement that sets a state without such a guard.
- Scheduler writes run inside a transaction that first takes
  ``LOCK_FENCE_FOR_WRITE`` (a shared row lock) and compares the token; writes
  are stamped with that token (``fence_token``).
- Worker reports are conditional on the attempt id they carry.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping

from sqlalchemy import TextClause, text

from schedd_core.states import (
    ATTEMPT_TRANSITIONS,
    RUN_TRANSITIONS,
    TASK_TRANSITIONS,
    WORKER_TRANSITIONS,
    AttemptState,
    RunState,
    TaskState,
    WorkerState,
)
from schedd_store import channels

T, R, A, W = TaskState, RunState, AttemptState, WorkerState

_MACHINES: dict[str, Mapping[enum.StrEnum, frozenset[enum.StrEnum]]] = {
    "ti": TASK_TRANSITIONS,  # type: ignore[dict-item]
    "run": RUN_TRANSITIONS,  # type: ignore[dict-item]
    "attempt": ATTEMPT_TRANSITIONS,  # type: ignore[dict-item]
    "worker": WORKER_TRANSITIONS,  # type: ignore[dict-item]
}

#: The moves of every guarded statement, by its text: machine -> (sources, targets).
GUARDS: dict[str, dict[str, tuple[frozenset[str], frozenset[str]]]] = {}


def _sql(statement: str) -> TextClause:
    return text(statement)


def _guarded(statement: str, **moves: tuple[Iterable[enum.StrEnum], Iterable[enum.StrEnum]]) -> TextClause:
    """A state-changing statement whose guards are bound from the transition tables.

    For each machine named (``ti``, ``run``, ``attempt``, ``worker``), ``:<machine>_sources`` is
    bound to the given sources, each checked to be an allowed source of every target the statement
    can set; a move the tables do not allow fails here, at import.
    """
    bound: dict[str, list[str]] = {}
    declared: dict[str, tuple[frozenset[str], frozenset[str]]] = {}
    for machine, (sources, targets) in moves.items():
        table = _MACHINES[machine]
        source_set, target_set = frozenset(sources), frozenset(targets)
        for target in target_set:
            illegal = source_set - table[target]
            if illegal:
                raise ValueError(f"{machine}: {sorted(illegal)} -> {target} is not an allowed transition")
        bound[f"{machine}_sources"] = sorted(s.value for s in source_set)
        declared[machine] = (frozenset(s.value for s in source_set), frozenset(t.value for t in target_set))
    GUARDS[statement] = declared
    return text(statement).bindparams(**bound)


# --- fencing -------------------------------------------------------------------------------------

#: Shared lock on the fence row, held until the end of the scheduler's transaction. Raising the
#: fence (an UPDATE, which needs an exclusive lock) therefore waits for every write transaction of
#: the old term in flight, and every transaction that starts later sees the new token.
LOCK_FENCE_FOR_WRITE = _sql("SELECT token FROM scheduler_fence WHERE id = 1 FOR SHARE")

#: Raises the fence to a new term's token; never lowers it. Zero rows: the token is not newer.
RAISE_FENCE = _sql(
    "UPDATE scheduler_fence SET token = :token, holder = :holder, raised_at = now() "
    "WHERE id = 1 AND token < :token RETURNING token"
)

READ_FENCE = _sql("SELECT token, holder, raised_at FROM scheduler_fence WHERE id = 1")


def set_local_lock_timeout(milliseconds: int) -> TextClause:
    """Bounds how long the rest of the transaction waits for any lock (SET takes no parameters)."""
    return _sql(f"SET LOCAL lock_timeout = {int(milliseconds)}")


# --- DAGs ------------------------------------------------------------------------------------------

ENSURE_DAG = _sql("INSERT INTO dags (dag_id) VALUES (:dag_id) ON CONFLICT (dag_id) DO NOTHING")

LOCK_DAG = _sql("SELECT latest_version_id FROM dags WHERE dag_id = :dag_id FOR UPDATE")

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

# --- runs ------------------------------------------------------------------------------------------

#: Creates a run pinned to the DAG's latest version and wakes the scheduler. Zero rows: the DAG does not
#: exist. A taken run id or (for scheduled and backfill runs) logical date violates a unique constraint
#: (dag_runs_dag_run_id_key, dag_runs_dag_logical_date_key), mapped to a domain error by the caller.
INSERT_RUN = _sql(
    "WITH run AS ("
    "  INSERT INTO dag_runs (dag_id, run_id, dag_version_id, run_type, state, logical_date, conf) "
    "  SELECT d.dag_id, :run_id, d.latest_version_id, :run_type, 'queued', :logical_date, "
    "  CAST(:conf AS jsonb) FROM dags d WHERE d.dag_id = :dag_id RETURNING id"
    f") SELECT id, pg_notify('{channels.RUNS}', id::text) FROM run"
)

# --- idempotent requests ---------------------------------------------------------------------------

#: Records a request id; zero rows: it was recorded before (see FIND_REQUEST). A concurrent insert of
#: the same key waits for the other transaction.
CLAIM_REQUEST = _sql(
    "INSERT INTO request_log (method, request_id, body_hash, resource) "
    "VALUES (:method, :request_id, :body_hash, '') ON CONFLICT (method, request_id) DO NOTHING RETURNING 1"
)

FIND_REQUEST = _sql(
    "SELECT body_hash, resource FROM request_log WHERE method = :method AND request_id = :request_id"
)

RECORD_REQUEST_RESOURCE = _sql(
    "UPDATE request_log SET resource = :resource WHERE method = :method AND request_id = :request_id"
)

_RUN_COLUMNS = (
    "r.id, r.dag_id, r.run_id, r.run_type, r.state, r.logical_date, r.conf, r.created_at, "
    "r.started_at, r.ended_at, r.error, v.version_hash"
)

GET_RUN = _sql(
    f"SELECT {_RUN_COLUMNS} FROM dag_runs r JOIN dag_versions v ON v.id = r.dag_version_id "
    "WHERE r.dag_id = :dag_id AND r.run_id = :run_id"
)

LIST_RUNS = _sql(
    f"SELECT {_RUN_COLUMNS} FROM dag_runs r JOIN dag_versions v ON v.id = r.dag_version_id "
    "WHERE (CAST(:dag_id AS text) IS NULL OR r.dag_id = :dag_id) AND r.id < :before "
    "ORDER BY r.id DESC LIMIT :limit"
)

LIST_TASK_INSTANCES = _sql(
    "SELECT task_id, state, try_number, max_tries, attempt_id, worker_id, queued_at, started_at, "
    "ended_at, exit_code, error, priority_weight, pool, queue "
    "FROM task_instances WHERE run_pk = :run_pk ORDER BY id"
)

# --- scheduling (leader only, fenced) --------------------------------------------------------------

#: Where a task instance a pass queues comes from (a lost attempt's RUNNING -> QUEUED is the
#: sweeper's, not a pass's).
_READY = {T.NONE, T.SCHEDULED, T.UP_FOR_RETRY}

UNFINISHED_RUNS = _sql("SELECT id FROM dag_runs WHERE state IN ('queued', 'running')")

#: Locks the unfinished runs among :run_pks to evaluate in this pass and reads their task instances in
#: one round trip (a run without task instances yet comes back as one row with NULL task columns):
#: the run with the oldest logical date, whatever its size (so every run is reached), and then the
#: smallest runs whose task counts add up to at most :budget (so a flood of large runs never holds
#: back a small one for more than one pass). Every row also carries ``deferred``: the unfinished runs
#: among :run_pks left for a later pass.
LOCK_RUNS_AND_LOAD_TASKS = _sql(
    "WITH candidates AS ("
    "  SELECT r.id, v.task_count, row_number() OVER (ORDER BY r.logical_date, r.id) AS age "
    "  FROM dag_runs r JOIN dag_versions v ON v.id = r.dag_version_id "
    "  WHERE r.id = ANY(:run_pks) AND r.state IN ('queued', 'running')"
    "), ranked AS ("
    "  SELECT id, age, task_count, "
    "  sum(task_count) FILTER (WHERE age > 1) OVER (ORDER BY task_count, age) AS upto FROM candidates"
    "), chosen AS (SELECT id FROM ranked WHERE age = 1 OR upto - task_count < :budget) "
    "SELECT r.id AS run_pk, r.dag_id, r.dag_version_id, r.state AS run_state, r.logical_date AS run_date, "
    "(SELECT array_agg(k.id) FROM ranked k WHERE k.age > 1 AND k.upto - k.task_count >= :budget) "
    "AS deferred, "
    "EXTRACT(EPOCH FROM now() - r.started_at) AS run_age, d.paused, "
    "ti.id, ti.task_id, ti.state, ti.follow, ti.try_number, "
    "COALESCE(ti.next_retry_at <= now(), false) AS retry_due, "
    "(ti.state = 'up_for_retry' AND ti.next_retry_at IS NULL) AS retry_unscheduled "
    "FROM dag_runs r JOIN dags d ON d.dag_id = r.dag_id LEFT JOIN task_instances ti ON ti.run_pk = r.id "
    "WHERE r.id IN (SELECT id FROM chosen) AND r.state IN ('queued', 'running') ORDER BY r.id FOR UPDATE OF r"
)

#: Materialises task instances of runs, each already in its planned first state. Instances
#: created 'queued' get their first attempt (try 1, a fresh attempt id) in the same statement.
INSERT_TASK_INSTANCES = _sql(
    "INSERT INTO task_instances (run_pk, dag_id, logical_date, task_id, state, max_tries, priority_weight, "
    "pool, pool_slots, queue, is_branch, callback_events, try_number, attempt_id, queued_at, ended_at, "
    "fence_token) "
    "SELECT r.run_pk, run.dag_id, run.logical_date, r.task_id, r.state, r.max_tries, r.priority_weight, "
    "r.pool, r.pool_slots, r.queue, r.is_branch, "
    "CASE WHEN r.events = '' THEN '{}'::text[] ELSE string_to_array(r.events, ',') END, "
    "CASE WHEN r.state = 'queued' THEN 1 ELSE 0 END, "
    "CASE WHEN r.state = 'queued' THEN gen_random_uuid() END, "
    "CASE WHEN r.state = 'queued' THEN now() END, "
    "CASE WHEN r.state IN ('skipped', 'upstream_failed') THEN now() END, :token "
    "FROM unnest(CAST(:run_pks AS bigint[]), CAST(:task_ids AS text[]), CAST(:states AS text[]), "
    "CAST(:max_tries AS int[]), CAST(:weights AS int[]), CAST(:pools AS text[]), CAST(:slots AS int[]), "
    "CAST(:queues AS text[]), CAST(:branches AS boolean[]), CAST(:events AS text[])) WITH ORDINALITY "
    "AS r(run_pk, task_id, state, max_tries, priority_weight, pool, pool_slots, queue, is_branch, events, n) "
    "JOIN dag_runs run ON run.id = r.run_pk ORDER BY r.n "
    "RETURNING id, queue, state"
)

#: Dependencies met, waiting for a pool slot or a concurrency limit.
SCHEDULE_TASK_INSTANCES = _guarded(
    "UPDATE task_instances SET state = 'scheduled', fence_token = :token "
    "WHERE id = ANY(:ids) AND state = ANY(:ti_sources) RETURNING id",
    ti=({T.NONE, T.UP_FOR_RETRY}, {T.SCHEDULED}),
)

#: Sets when failed attempts retry (per task instance, computed by the leader from the retry policy).
SET_RETRY_TIMES = _sql(
    "UPDATE task_instances ti SET next_retry_at = now() + make_interval(secs => d.delay), "
    "fence_token = :token "
    "FROM unnest(CAST(:ids AS bigint[]), CAST(:delays AS float8[])) AS d(id, delay) "
    "WHERE ti.id = d.id AND ti.state = 'up_for_retry' AND ti.next_retry_at IS NULL RETURNING ti.id"
)

#: The next retry time after now (or the earliest overdue), and the runs whose retries are due.
NEXT_RETRY = _sql(
    "SELECT EXTRACT(EPOCH FROM (min(next_retry_at) - now())) FROM task_instances WHERE state = 'up_for_retry'"
)

DUE_RETRY_RUNS = _sql(
    "SELECT DISTINCT run_pk FROM task_instances WHERE state = 'up_for_retry' AND next_retry_at <= now()"
)

#: Pool sizes and the slots their queued and running task instances hold, for the given pools and for
#: every pool that has task instances waiting; ``waiting`` says whether any wait.
POOL_CAPACITY = _sql(
    "SELECT p.name, p.slots, "
    "COALESCE((SELECT sum(t.pool_slots) FROM task_instances t WHERE t.state IN ('queued', 'running') "
    "  AND t.pool = p.name), 0) AS used, "
    "EXISTS (SELECT 1 FROM task_instances w WHERE w.state = 'scheduled' AND w.pool = p.name) AS waiting "
    "FROM pools p WHERE p.name = ANY(:pools) "
    "OR EXISTS (SELECT 1 FROM task_instances w WHERE w.state = 'scheduled' AND w.pool = p.name)"
)

#: Task instances waiting in a pool, in admission order, after a keyset position.
WAITING_IN_POOL = _sql(
    "SELECT ti.id, ti.dag_id, ti.task_id, ti.pool, ti.pool_slots, ti.priority_weight, ti.logical_date, "
    "ti.queue, r.dag_version_id FROM task_instances ti JOIN dag_runs r ON r.id = ti.run_pk "
    "JOIN dags d ON d.dag_id = ti.dag_id "
    "WHERE ti.state = 'scheduled' AND ti.pool = :pool AND NOT d.paused "
    "AND (-ti.priority_weight, ti.logical_date, ti.id) > (:after_priority, :after_date, :after_id) "
    "ORDER BY ti.priority_weight DESC, ti.logical_date, ti.id LIMIT :limit"
)

ACTIVE_TASKS_OF_DAGS = _sql(
    "SELECT dag_id, count(*) AS active FROM task_instances WHERE state IN ('queued', 'running') "
    "AND dag_id = ANY(:dag_ids) GROUP BY dag_id"
)

ACTIVE_INSTANCES_OF_TASKS = _sql(
    "SELECT dag_id, task_id, count(*) AS active FROM task_instances WHERE state IN ('queued', 'running') "
    "AND dag_id = ANY(:dag_ids) AND task_id = ANY(:task_ids) GROUP BY dag_id, task_id"
)

RUNNING_RUNS_OF_DAGS = _sql(
    "SELECT dag_id, count(*) AS running FROM dag_runs WHERE state = 'running' AND dag_id = ANY(:dag_ids) "
    "GROUP BY dag_id"
)

#: Queued runs of the given DAGs, oldest logical date first: woken when a run of their DAG ends.
QUEUED_RUNS_OF_DAGS = _sql(
    "SELECT id FROM dag_runs WHERE state = 'queued' AND dag_id = ANY(:dag_ids) "
    "ORDER BY logical_date LIMIT 1000"
)

#: Running runs and how long they have been running, for the leader's run-timeout timer.
RUNNING_RUN_AGES = _sql(
    "SELECT id, dag_version_id, EXTRACT(EPOCH FROM now() - started_at) AS age FROM dag_runs "
    "WHERE state = 'running' AND started_at IS NOT NULL"
)

#: Starts a new attempt: next try number, a fresh attempt id.
QUEUE_TASK_INSTANCES = _guarded(
    "UPDATE task_instances SET state = 'queued', try_number = try_number + 1, "
    "attempt_id = gen_random_uuid(), queued_at = now(), started_at = NULL, ended_at = NULL, "
    "claimed_at = NULL, lost_reported = false, next_retry_at = NULL, worker_id = NULL, exit_code = NULL, "
    "error = NULL, fence_token = :token "
    "WHERE id = ANY(:ids) AND state = ANY(:ti_sources) RETURNING id, queue",
    ti=(_READY, {T.QUEUED}),
)

#: QUEUE_TASK_INSTANCES and RECORD_PASS in one round trip: queues the task instances, appends the pass
#: to the log, and wakes the registries for their queues and for :queues (queued by other statements).
QUEUE_AND_RECORD_PASS = _guarded(
    "WITH q AS ("
    "  UPDATE task_instances SET state = 'queued', try_number = try_number + 1, "
    "  attempt_id = gen_random_uuid(), queued_at = now(), started_at = NULL, ended_at = NULL, "
    "  claimed_at = NULL, lost_reported = false, next_retry_at = NULL, worker_id = NULL, exit_code = NULL, "
    "  error = NULL, fence_token = :token WHERE id = ANY(:ids) AND state = ANY(:ti_sources) "
    "  RETURNING id, queue"
    "), pass AS ("
    "  INSERT INTO scheduler_passes (token, runs, queued) "
    "  SELECT :token, :runs, :queued_before + count(*) FROM q"
    "), woken AS ("
    "  SELECT queue FROM q UNION SELECT unnest(CAST(:queues AS text[]))"
    ") "
    f"SELECT q.id, q.queue, (SELECT count(pg_notify('{channels.QUEUED}', queue)) FROM woken) AS woken FROM q",
    ti=(_READY, {T.QUEUED}),
)

#: Moves task instances that will not run to a finished state (skipped, upstream_failed).
FINISH_UNRUN_TASK_INSTANCES = _sql(
    "UPDATE task_instances SET state = :target, ended_at = now(), fence_token = :token "
    "WHERE id = ANY(:ids) AND state = ANY(:allowed_from) RETURNING id"
)

#: Fails running attempts the scheduler stops (the run timed out or was cancelled); their workers'
#: next heartbeat is answered with a cancellation.
#: The outbox rows of 'failure' callbacks for the task instances in the CTE ``failed`` (columns
#: _FAILED_COLUMNS) that ended failed.
_FAILED_COLUMNS = (
    "id, attempt_id, worker_id, state, run_pk, dag_id, task_id, try_number, error, callback_events"
)
_FAILURE_EVENTS = (
    "INSERT INTO outbox (topic, payload) SELECT 'task_callback', jsonb_build_object('event', 'failure', "
    "'ti_id', failed.id, 'run_pk', failed.run_pk, 'dag_id', failed.dag_id, 'task_id', failed.task_id, "
    "'try_number', failed.try_number, 'error', failed.error) FROM failed "
    "WHERE failed.state = 'failed' AND 'failure' = ANY(failed.callback_events) RETURNING id"
)

FAIL_RUNNING_TASK_INSTANCES = _guarded(
    "WITH failed AS ("
    "  UPDATE task_instances SET state = 'failed', ended_at = now(), error = :error, "
    "  fence_token = :token WHERE id = ANY(:ids) AND state = ANY(:ti_sources) "
    f"  RETURNING {_FAILED_COLUMNS}"
    "), history AS ("
    "  UPDATE task_attempts a SET state = 'failed', ended_at = now(), error = :error FROM failed "
    "  WHERE a.attempt_id = failed.attempt_id AND a.state = ANY(:attempt_sources)"
    f"), events AS ({_FAILURE_EVENTS}) "
    "SELECT id, (SELECT count(*) FROM events) AS events FROM failed",
    ti=({T.RUNNING}, {T.FAILED}),
    attempt=({A.RUNNING}, {A.FAILED}),
)

#: Fails a run the leader cannot plan (its pass raised on it alone), with the reason, and skips what
#: has not run: the one bad run ends instead of stalling every other. Running attempts finish.
QUARANTINE_RUN = _guarded(
    "WITH run AS ("
    "  UPDATE dag_runs SET state = 'failed', ended_at = now(), error = :error, fence_token = :token "
    "  WHERE id = :run_pk AND state = ANY(:run_sources) RETURNING id"
    "), skipped AS ("
    "  UPDATE task_instances SET state = 'skipped', ended_at = now(), fence_token = :token "
    "  WHERE run_pk IN (SELECT id FROM run) AND state = ANY(:ti_sources) RETURNING id"
    ") SELECT id, (SELECT count(*) FROM skipped) AS skipped FROM run",
    run=({R.QUEUED, R.RUNNING}, {R.FAILED}),
    ti=({T.NONE, T.SCHEDULED, T.QUEUED, T.UP_FOR_RETRY}, {T.SKIPPED}),
)

START_RUNS = _guarded(
    "UPDATE dag_runs SET state = 'running', started_at = COALESCE(started_at, now()), fence_token = :token "
    "WHERE id = ANY(:run_pks) AND state = ANY(:run_sources)",
    run=({R.QUEUED}, {R.RUNNING}),
)

FINISH_RUN = _sql(
    "UPDATE dag_runs SET state = :target, ended_at = now(), fence_token = :token "
    "WHERE id = :run_pk AND state = ANY(:allowed_from) RETURNING id"
)

NOTIFY = _sql("SELECT pg_notify(:channel, :payload)")

#: Appends to the pass log and wakes the registries for the queues that got work: the last statement
#: of every scheduling pass that changed anything.
RECORD_PASS = _sql(
    "WITH pass AS (INSERT INTO scheduler_passes (token, runs, queued) VALUES (:token, :runs, :queued)) "
    f"SELECT pg_notify('{channels.QUEUED}', q) FROM unnest(CAST(:queues AS text[])) AS q"
)

# --- dispatch (registry) ---------------------------------------------------------------------------

#: Claims queued task instances of the given queues for the workers in :slots (a worker id per free
#: slot; the first slots get the most important task instances), highest priority first, oldest
#: logical date first among equals. SKIP LOCKED lets several registries claim side by side without
#: ever handing out one attempt twice. Records each attempt in task_attempts.
CLAIM_TASK_INSTANCES = _guarded(
    "WITH claimable AS ("
    "  SELECT id, row_number() OVER (ORDER BY priority_weight DESC, logical_date, id) AS n FROM ("
    "    SELECT id, priority_weight, logical_date FROM task_instances "
    "    WHERE state = 'queued' AND queue = ANY(:queues) ORDER BY priority_weight DESC, logical_date, id "
    "    LIMIT cardinality(CAST(:slots AS text[])) FOR UPDATE SKIP LOCKED) AS q"
    "), slots AS ("
    "  SELECT worker_id, n FROM unnest(CAST(:slots AS text[])) WITH ORDINALITY AS s(worker_id, n)"
    "), claimed AS ("
    "  UPDATE task_instances ti SET state = 'running', worker_id = slots.worker_id, started_at = now(), "
    "  claimed_at = now(), lost_reported = false FROM claimable JOIN slots USING (n) "
    "  WHERE ti.id = claimable.id AND ti.state = ANY(:ti_sources) "
    "  RETURNING ti.id, ti.run_pk, ti.task_id, ti.try_number, ti.attempt_id, ti.worker_id"
    "), recorded AS ("
    "  INSERT INTO task_attempts (attempt_id, ti_id, try_number, worker_id, state) "
    "  SELECT attempt_id, id, try_number, worker_id, 'running' FROM claimed"
    ") "
    "SELECT c.id, c.task_id, c.try_number, c.attempt_id, c.run_pk, c.worker_id, r.dag_id, r.run_id, "
    "r.logical_date, r.dag_version_id, r.conf, "
    "EXISTS (SELECT 1 FROM task_instances u WHERE u.run_pk = c.run_pk AND u.result IS NOT NULL) "
    "AS run_has_results "
    "FROM claimed c JOIN dag_runs r ON r.id = c.run_pk",
    ti=({T.QUEUED}, {T.RUNNING}),
)

#: Applies a batch of attempt results. Each row changes only while its attempt is current and
#: running; the attempt's history row changes with it. Returns the rows applied.
APPLY_RESULTS = _guarded(
    "WITH r AS ("
    "  SELECT * FROM unnest(CAST(:ti_ids AS bigint[]), CAST(:attempt_ids AS uuid[]), "
    "  CAST(:try_numbers AS int[]), CAST(:targets AS text[]), CAST(:exit_codes AS int[]), "
    "  CAST(:errors AS text[]), CAST(:started AS timestamptz[]), CAST(:ended AS timestamptz[]), "
    "  CAST(:results AS jsonb[])) "
    "  AS r(ti_id, attempt_id, try_number, target, exit_code, error, started_at, ended_at, result)"
    "), locked AS ("
    "  SELECT id FROM task_instances WHERE id IN (SELECT ti_id FROM r) ORDER BY id FOR UPDATE"
    "), applied AS ("
    "  UPDATE task_instances ti SET "
    "  state = CASE WHEN r.target = 'failed' AND ti.try_number < ti.max_tries THEN 'up_for_retry' "
    "    ELSE r.target END, "
    "  next_retry_at = NULL, "
    "  follow = CASE WHEN ti.is_branch AND r.target = 'success' THEN CASE jsonb_typeof(r.result) "
    "    WHEN 'string' THEN ARRAY[r.result #>> '{}'] "
    "    WHEN 'array' THEN ARRAY(SELECT jsonb_array_elements_text(r.result)) "
    "    ELSE ARRAY[]::text[] END END, "
    "  started_at = COALESCE(r.started_at, ti.started_at), "
    "  ended_at = r.ended_at, exit_code = r.exit_code, "
    "  error = NULLIF(r.error, ''), result = r.result "
    "  FROM r JOIN locked ON locked.id = r.ti_id "
    "  WHERE ti.id = r.ti_id AND ti.attempt_id = r.attempt_id AND ti.try_number = r.try_number "
    "  AND ti.state = ANY(:ti_sources) "
    "  RETURNING ti.id, ti.run_pk, ti.attempt_id, ti.state, ti.callback_events, ti.dag_id, ti.task_id, "
    "  ti.try_number, ti.error"
    "), callbacks AS ("
    "  INSERT INTO outbox (topic, payload) "
    "  SELECT 'task_callback', jsonb_build_object('event', e.event, 'ti_id', applied.id, 'run_pk', "
    "    applied.run_pk, 'dag_id', applied.dag_id, 'task_id', applied.task_id, 'try_number', "
    "    applied.try_number, 'error', applied.error) "
    "  FROM applied CROSS JOIN LATERAL (SELECT CASE applied.state WHEN 'success' THEN 'success' "
    "    WHEN 'failed' THEN 'failure' WHEN 'up_for_retry' THEN 'retry' END AS event) e "
    "  WHERE e.event = ANY(applied.callback_events) RETURNING id"
    "), history AS ("
    "  UPDATE task_attempts a SET state = r.target, started_at = COALESCE(r.started_at, a.started_at), "
    "  ended_at = r.ended_at, exit_code = r.exit_code, "
    "  error = NULLIF(r.error, '') FROM r JOIN applied ON applied.attempt_id = r.attempt_id "
    "  WHERE a.attempt_id = r.attempt_id AND a.state = ANY(:attempt_sources)"
    ") "
    f"SELECT id, run_pk, attempt_id, pg_notify('{channels.RUNS}', run_pk::text), "
    f"(SELECT count(*) FROM callbacks) AS callbacks FROM applied",
    ti=({T.RUNNING}, {T.SUCCESS, T.FAILED, T.UP_FOR_RETRY}),
    attempt=({A.RUNNING}, {A.SUCCESS, A.FAILED}),
)

#: The recorded outcome of attempts (the whole attempt: id and try number), to tell a repeated report
#: from a stale one.
ATTEMPT_OUTCOMES = _sql(
    "SELECT a.attempt_id, a.state FROM task_attempts a "
    "JOIN unnest(CAST(:ids AS uuid[]), CAST(:try_numbers AS int[])) AS r(attempt_id, try_number) "
    "ON a.attempt_id = r.attempt_id AND a.try_number = r.try_number"
)

#: Records a connecting worker with the windows its registry granted it (see FAIL_OVER_LOST_ATTEMPTS).
UPSERT_WORKER = _guarded(
    "INSERT INTO workers (worker_id, hostname, queues, capacity, code_version, state, registry, incarnation, "
    "registered_at, last_seen_at, heartbeat_at, fence_window, silence_limit) VALUES (:worker_id, :hostname, "
    ":queues, :capacity, :code_version, 'active', :registry, :incarnation, now(), now(), now(), "
    ":fence_window, :silence_limit) ON CONFLICT (worker_id) DO UPDATE SET "
    "hostname = EXCLUDED.hostname, queues = EXCLUDED.queues, capacity = EXCLUDED.capacity, "
    "code_version = EXCLUDED.code_version, registry = EXCLUDED.registry, last_seen_at = now(), "
    "heartbeat_at = now(), fence_window = EXCLUDED.fence_window, silence_limit = EXCLUDED.silence_limit, "
    "drain_requested = workers.drain_requested AND workers.incarnation = EXCLUDED.incarnation, "
    "state = CASE WHEN workers.drain_requested AND workers.incarnation = EXCLUDED.incarnation "
    "  THEN 'draining' ELSE 'active' END, "
    "incarnation = EXCLUDED.incarnation WHERE workers.state = ANY(:worker_sources) "
    "RETURNING drain_requested",
    worker=(set(W), {W.ACTIVE, W.DRAINING}),
)

MARK_WORKER_GONE = _guarded(
    "UPDATE workers SET state = 'gone', last_seen_at = now() WHERE worker_id = :worker_id "
    "AND registry = :registry AND state = ANY(:worker_sources)",
    worker=({W.ACTIVE, W.DRAINING}, {W.GONE}),
)

# --- pools -----------------------------------------------------------------------------------------

LIST_POOL_SIZES = _sql("SELECT name, slots FROM pools ORDER BY name")


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
#: them (handed back). Conditional on the attempt, so an attempt that already finished is left alone.
MARK_ATTEMPTS_LOST = _sql(
    "UPDATE task_instances ti SET lost_reported = true "
    "FROM unnest(CAST(:ti_ids AS bigint[]), CAST(:attempt_ids AS uuid[]), CAST(:try_numbers AS int[])) "
    "AS h(ti_id, attempt_id, try_number) "
    "WHERE ti.id = h.ti_id AND ti.attempt_id = h.attempt_id AND ti.try_number = h.try_number "
    "AND ti.state = 'running' RETURNING ti.id"
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
    ti=({T.RUNNING}, {T.QUEUED, T.FAILED}),
    attempt=({A.RUNNING}, {A.LOST}),
)

#: Seconds until the first running attempt can be lost (negative: overdue); NULL when nothing runs.
#: The leader's next check for lost attempts is due then.
SECONDS_UNTIL_ATTEMPT_LOST = _sql(
    f"SELECT min(CASE WHEN ti.lost_reported THEN 0 ELSE {_LIMIT} - {_SILENCE} END) "
    "FROM task_instances ti LEFT JOIN workers w ON w.worker_id = ti.worker_id WHERE ti.state = 'running'"
)

APPEND_LOGS = _sql(
    "INSERT INTO task_logs (ti_id, try_number, attempt_id, byte_offset, data) "
    "SELECT ti.id, a.try_number, l.attempt_id, l.byte_offset, l.data "
    "FROM unnest(CAST(:ti_ids AS bigint[]), CAST(:attempt_ids AS uuid[]), CAST(:offsets AS bigint[]), "
    "CAST(:data AS text[])) AS l(ti_id, attempt_id, byte_offset, data) "
    "JOIN task_instances ti ON ti.id = l.ti_id "
    "JOIN task_attempts a ON a.attempt_id = l.attempt_id AND a.ti_id = ti.id "
    "WHERE l.byte_offset < :max_bytes"
)

READ_LOGS = _sql(
    "SELECT byte_offset, data FROM task_logs WHERE ti_id = :ti_id AND try_number = :try_number "
    "AND byte_offset + octet_length(data) > :offset ORDER BY byte_offset, id LIMIT 1000"
)

FIND_TASK_INSTANCE = _sql(
    "SELECT ti.id, ti.try_number, ti.state, ti.attempt_id FROM task_instances ti "
    "JOIN dag_runs r ON r.id = ti.run_pk "
    "WHERE r.dag_id = :dag_id AND r.run_id = :run_id AND ti.task_id = :task_id"
)

ATTEMPT_STATE = _sql("SELECT state FROM task_attempts WHERE ti_id = :ti_id AND try_number = :try_number")

UPSTREAM_RESULTS = _sql(
    "SELECT run_pk, task_id, result FROM task_instances "
    "WHERE run_pk = ANY(:run_pks) AND task_id = ANY(:task_ids) AND result IS NOT NULL"
)

MARK_WORKER_DRAINING = _guarded(
    "UPDATE workers SET state = 'draining', last_seen_at = now() "
    "WHERE worker_id = :worker_id AND state = ANY(:worker_sources)",
    worker=({W.ACTIVE}, {W.DRAINING}),
)

REQUEST_DRAIN = _sql(
    "UPDATE workers SET drain_requested = true "
    "WHERE worker_id = :worker_id AND state <> 'gone' RETURNING worker_id"
)

DRAIN_REQUESTED = _sql("SELECT drain_requested FROM workers WHERE worker_id = :worker_id")

_WORKER_COLUMNS = (
    "worker_id, hostname, queues, capacity, running, state, code_version, registry, registered_at, "
    "last_seen_at"
)

LIST_WORKERS = _sql(
    f"SELECT {_WORKER_COLUMNS} FROM workers WHERE worker_id > :after AND (:include_gone OR state <> 'gone') "
    "ORDER BY worker_id LIMIT :limit"
)

GET_WORKER = _sql(f"SELECT {_WORKER_COLUMNS} FROM workers WHERE worker_id = :worker_id")

QUEUE_DEPTHS = _sql(
    "SELECT queue, count(*) AS depth FROM task_instances WHERE state = 'queued' GROUP BY queue"
)


# --- manual control (api) ----------------------------------------------------------------------------

SET_PAUSED = _sql(
    "UPDATE dags SET paused = :paused, updated_at = now() WHERE dag_id = :dag_id RETURNING dag_id"
)

UNFINISHED_RUNS_OF_DAG = _sql(
    "SELECT id FROM dag_runs WHERE dag_id = :dag_id AND state IN ('queued', 'running')"
)

LOCK_RUN = _sql(
    "SELECT r.id, r.state, r.dag_version_id, v.spec FROM dag_runs r "
    "JOIN dag_versions v ON v.id = r.dag_version_id "
    "WHERE r.dag_id = :dag_id AND r.run_id = :run_id FOR UPDATE OF r"
)

READ_RUN_WITH_SPEC = _sql(
    "SELECT r.id, r.state, v.spec, d.paused FROM dag_runs r JOIN dag_versions v ON v.id = r.dag_version_id "
    "JOIN dags d ON d.dag_id = r.dag_id WHERE r.dag_id = :dag_id AND r.run_id = :run_id"
)

RUN_TASK_STATES = _sql(
    "SELECT id, task_id, state, worker_id, attempt_id FROM task_instances WHERE run_pk = :run_pk"
)

#: The task instances of a run, locked: a registry's claim (SKIP LOCKED) passes them by and a result or a
#: fail-over waits, so what a manual change reads stays true until it commits.
LOCK_RUN_TASKS = _sql(
    "SELECT id, task_id, state, worker_id, attempt_id, queue FROM task_instances WHERE run_pk = :run_pk "
    "ORDER BY id FOR UPDATE"
)

#: Stops the running attempts of a run (cancel) or of chosen task instances (clear, mark).
STOP_RUNNING = _guarded(
    "WITH failed AS ("
    "  UPDATE task_instances SET state = :target, ended_at = now(), error = :error "
    f"  WHERE id = ANY(:ids) AND state = ANY(:ti_sources) RETURNING {_FAILED_COLUMNS}"
    "), history AS ("
    "  UPDATE task_attempts a SET state = 'failed', ended_at = now(), error = :error FROM failed "
    "  WHERE a.attempt_id = failed.attempt_id AND a.state = ANY(:attempt_sources)"
    f"), events AS ({_FAILURE_EVENTS}) "
    "SELECT id, attempt_id, worker_id, (SELECT count(*) FROM events) AS events FROM failed",
    ti=({T.RUNNING}, {T.FAILED, T.SUCCESS}),
    attempt=({A.RUNNING}, {A.FAILED}),
)

SKIP_UNRUN = _guarded(
    "UPDATE task_instances SET state = 'skipped', ended_at = now() "
    "WHERE run_pk = :run_pk AND state = ANY(:ti_sources) RETURNING id",
    ti=({T.NONE, T.SCHEDULED, T.QUEUED, T.UP_FOR_RETRY}, {T.SKIPPED}),
)

FAIL_RUN_BY_HAND = _guarded(
    "UPDATE dag_runs SET state = 'failed', ended_at = now() "
    "WHERE id = :run_pk AND state = ANY(:run_sources) RETURNING id",
    run=({R.QUEUED, R.RUNNING}, {R.FAILED}),
)

#: Resets task instances to run again: a clear. Their retries are restored (max_tries counts from the
#: current try), and their earlier result, branch choice and losses are forgotten.
CLEAR_TASK_INSTANCES = _guarded(
    "UPDATE task_instances ti SET state = 'none', max_tries = ti.try_number + c.tries, "
    "  ended_at = NULL, started_at = NULL, next_retry_at = NULL, claimed_at = NULL, worker_id = NULL, "
    "  exit_code = NULL, error = NULL, result = NULL, follow = NULL, lost_attempts = 0 "
    "FROM unnest(CAST(:ids AS bigint[]), CAST(:tries AS int[])) AS c(id, tries) "
    "WHERE ti.id = c.id AND ti.state = ANY(:ti_sources) RETURNING ti.id, ti.task_id",
    ti=(TASK_TRANSITIONS[T.NONE], {T.NONE}),
)

#: A finished run whose task instances were cleared or marked runs again (an unfinished one is left as it is).
REOPEN_RUN = _guarded(
    "UPDATE dag_runs SET state = 'running', ended_at = NULL WHERE id = :run_pk AND state = ANY(:run_sources) "
    "RETURNING id",
    run=({R.SUCCESS, R.FAILED}, {R.RUNNING}),
)

SET_TASK_STATE_BY_HAND = _sql(
    "UPDATE task_instances SET state = :target, ended_at = COALESCE(ended_at, now()), "
    "  max_tries = CASE WHEN :target = 'failed' THEN try_number ELSE max_tries END, "
    "  next_retry_at = NULL "
    "WHERE id = :id AND state = ANY(:allowed_from) RETURNING id"
)

EXPLAIN_TASK = _sql(
    "SELECT ti.id, ti.task_id, ti.state, ti.pool, ti.pool_slots, ti.try_number, ti.max_tries, "
    "ti.next_retry_at, "
    "ti.queue, r.id AS run_pk, r.state AS run_state, r.dag_version_id, d.paused, "
    "(SELECT p.slots FROM pools p WHERE p.name = ti.pool) AS pool_total, "
    "(SELECT COALESCE(sum(o.pool_slots), 0) FROM task_instances o WHERE o.state IN ('queued', 'running') "
    "  AND o.pool = ti.pool) AS pool_used, "
    "(SELECT count(*) FROM task_instances o WHERE o.state IN ('queued', 'running') AND o.dag_id = ti.dag_id) "
    "  AS dag_active, "
    "(SELECT count(*) FROM task_instances o WHERE o.state IN ('queued', 'running') AND o.dag_id = ti.dag_id "
    "  AND o.task_id = ti.task_id) AS task_active, "
    "(SELECT count(*) FROM dag_runs o WHERE o.state = 'running' AND o.dag_id = r.dag_id) "
    "  AS dag_running_runs, "
    "(SELECT count(*) FROM task_instances o WHERE o.state = 'scheduled' AND o.pool = ti.pool "
    "  AND (-o.priority_weight, o.logical_date, o.id) < (-ti.priority_weight, ti.logical_date, ti.id)) "
    "  AS ahead, "
    "(SELECT count(*) FROM workers w WHERE w.state = 'active' AND ti.queue = ANY(w.queues)) AS workers "
    "FROM task_instances ti JOIN dag_runs r ON r.id = ti.run_pk JOIN dags d ON d.dag_id = ti.dag_id "
    "WHERE r.dag_id = :dag_id AND r.run_id = :run_id AND ti.task_id = :task_id"
)

NOW = _sql("SELECT now()")

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

LIST_POOLS = _sql(
    "SELECT p.name, p.slots, p.description, "
    "COALESCE((SELECT sum(t.pool_slots) FROM task_instances t WHERE t.state IN ('queued', 'running') "
    "  AND t.pool = p.name), 0) AS used, "
    "(SELECT count(*) FROM task_instances w WHERE w.state = 'scheduled' AND w.pool = p.name) AS waiting "
    "FROM pools p ORDER BY p.name"
)

SET_POOL = _sql(
    "INSERT INTO pools (name, slots, description) VALUES (:name, :slots, :description) "
    "ON CONFLICT (name) DO UPDATE SET slots = EXCLUDED.slots, description = EXCLUDED.description"
)

#: Runs with task instances waiting in a pool: evaluated again when the pool grows.
RUNS_WAITING_IN_POOL = _sql(
    "SELECT DISTINCT run_pk FROM task_instances WHERE state = 'scheduled' AND pool = :name"
)


# --- transactional tasks (run by the worker's Python child, on asyncpg) ---------------------------

#: Marks the attempt succeeded inside the task's own transaction, through the one function the task's
#: database role may execute (migration 0008): false when that exact attempt (task instance, try
#: number, attempt id) is no longer running, and the caller must roll back. Positional parameters:
#: ti id, attempt id, try number, started at, result JSON.
COMMIT_TRANSACTIONAL_ATTEMPT = "SELECT schedd_commit_attempt($1, $2::uuid, $3, $4, $5::jsonb)"


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
