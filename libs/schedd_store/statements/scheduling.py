"""Statements: scheduling (leader only, fenced)."""

from __future__ import annotations

from schedd_core.states import WAITING_TO_RUN, AttemptState, RunState, TaskState
from schedd_store import channels
from schedd_store.statements.guards import _guarded, _sql
from schedd_store.statements.occupancy import OCCUPANCY_OF_POOLS

# --- scheduling (leader only, fenced) --------------------------------------------------------------

#: Where a task instance a pass queues comes from (a lost attempt's RUNNING -> QUEUED is the
#: sweeper's, not a pass's).
_READY = {TaskState.NONE, TaskState.SCHEDULED, TaskState.UP_FOR_RETRY, TaskState.UP_FOR_RESCHEDULE}

#: What queueing adds to a try number: nothing for the next poke of a reschedule-mode sensor's try.
_NEXT_TRY = "CASE WHEN first_poke_at IS NULL THEN 1 ELSE 0 END"

UNFINISHED_RUNS = _sql("SELECT id FROM dag_runs WHERE state IN ('queued', 'running')")

#: The columns of a run and of a task instance a pass reads, in the order ``planning_reads`` expects.
_RUN_FIELDS = (
    "r.id AS run_pk, r.dag_id, r.dag_version_id, r.state AS run_state, r.logical_date AS run_date, "
    "r.backfill_id, r.control_version, EXTRACT(EPOCH FROM now() - r.started_at) AS run_age, d.paused"
)
_TI_FIELDS = (
    "ti.id, ti.task_key, ti.state, ti.follow, ti.try_number, "
    "COALESCE(ti.next_retry_at <= now(), false) AS retry_due, "
    "(ti.state = 'up_for_retry' AND ti.next_retry_at IS NULL) AS retry_unscheduled"
)

#: Locks the unfinished runs among :run_pks to evaluate in this pass and reads their task instances in
#: one round trip (a run without task instances yet comes back as one row with NULL task columns):
#: the run with the oldest logical date, whatever its size (so every run is reached), and then the
#: smallest runs whose task counts add up to at most :budget (so a flood of large runs never holds
#: back a small one for more than one pass). The first row alone carries ``deferred``: the unfinished
#: runs among :run_pks left for a later pass (on every row, a pass over thousands of task instances
#: decoded that list thousands of times).
LOCK_RUNS_AND_LOAD_TASKS = _sql(
    "WITH candidates AS ("
    "  SELECT r.id, v.task_count, row_number() OVER (ORDER BY r.logical_date, r.id) AS age "
    "  FROM dag_runs r JOIN dag_versions v ON v.id = r.dag_version_id "
    "  WHERE r.id = ANY(:run_pks) AND r.state IN ('queued', 'running')"
    "), ranked AS ("
    "  SELECT id, age, task_count, "
    "  sum(task_count) FILTER (WHERE age > 1) OVER (ORDER BY task_count, age) AS upto FROM candidates"
    "), chosen AS (SELECT id FROM ranked WHERE age = 1 OR upto - task_count < :budget), "
    # The runs' columns are read where they are locked: the versions the locks found.
    f"locked AS MATERIALIZED (SELECT {_RUN_FIELDS} "
    "  FROM dag_runs r JOIN dags d ON d.dag_id = r.dag_id "
    "  WHERE r.id IN (SELECT id FROM chosen) AND r.state IN ('queued', 'running') "
    "  ORDER BY r.id FOR UPDATE OF r) "
    "SELECT l.*, CASE WHEN row_number() OVER (ORDER BY l.run_pk, ti.id) = 1 THEN "
    "(SELECT array_agg(k.id) FROM ranked k WHERE k.age > 1 AND k.upto - k.task_count >= :budget) "
    f"END AS deferred, {_TI_FIELDS} "
    "FROM locked l LEFT JOIN task_instances ti ON ti.run_pk = l.run_pk ORDER BY l.run_pk"
)

#: Locks the unfinished runs among :run_pks and reads the task instances among :ti_ids of each (a run
#: with none of them comes back as one row with NULL task columns), for an incremental evaluation.
LOCK_RUNS_WITH_CHANGES = _sql(
    f"SELECT {_RUN_FIELDS}, {_TI_FIELDS} FROM dag_runs r JOIN dags d ON d.dag_id = r.dag_id "
    "LEFT JOIN task_instances ti ON ti.run_pk = r.id AND ti.id = ANY(CAST(:ti_ids AS bigint[])) "
    "WHERE r.id = ANY(:run_pks) AND r.state IN ('queued', 'running') ORDER BY r.id FOR UPDATE OF r"
)

#: Materialises task instances of runs (a mapped task's instances with their map index), each already in
#: its planned first state. Instances created 'queued' get their first attempt (try 1, a fresh attempt
#: id) in the same statement.
INSERT_TASK_INSTANCES = _sql(
    "INSERT INTO task_instances (run_pk, dag_id, logical_date, task_id, map_index, state, max_tries, "
    "priority_weight, pool, pool_slots, queue, is_branch, callback_events, try_number, attempt_id, "
    "queued_at, ended_at, fence_token, backfill) "
    "SELECT r.run_pk, run.dag_id, run.logical_date, r.task_id, r.map_index, r.state, r.max_tries, "
    "r.priority_weight, "
    "r.pool, r.pool_slots, r.queue, r.is_branch, "
    "CASE WHEN r.events = '' THEN '{}'::text[] ELSE string_to_array(r.events, ',') END, "
    "CASE WHEN r.state = 'queued' THEN 1 ELSE 0 END, "
    "CASE WHEN r.state = 'queued' THEN gen_random_uuid() END, "
    "CASE WHEN r.state = 'queued' THEN now() END, "
    "CASE WHEN r.state IN ('skipped', 'upstream_failed') THEN now() END, :token, run.backfill_id IS NOT NULL "
    "FROM unnest(CAST(:run_pks AS bigint[]), CAST(:task_ids AS text[]), CAST(:map_indexes AS int[]), "
    "CAST(:states AS text[]), CAST(:max_tries AS int[]), CAST(:weights AS int[]), CAST(:pools AS text[]), "
    "CAST(:slots AS int[]), CAST(:queues AS text[]), CAST(:branches AS boolean[]), CAST(:events AS text[])) "
    "WITH ORDINALITY AS r(run_pk, task_id, map_index, state, max_tries, priority_weight, pool, pool_slots, "
    "queue, is_branch, events, n) "
    "JOIN dag_runs run ON run.id = r.run_pk ORDER BY r.n "
    "RETURNING id, run_pk, task_key, queue, state"
)

#: Removes the placeholders of mapped tasks a pass expanded (they never ran: nothing refers to them).
REMOVE_PLACEHOLDERS = _sql(
    "DELETE FROM task_instances WHERE id = ANY(:ids) AND map_index = -1 AND state IN ('none', 'scheduled') "
    "RETURNING id"
)

#: Fails task instances that cannot run (a mapped task whose arguments cannot expand), with the reason.
FAIL_UNRUN_TASK_INSTANCES = _guarded(
    "UPDATE task_instances ti SET state = 'failed', ended_at = now(), error = f.error, fence_token = :token "
    "FROM unnest(CAST(:ids AS bigint[]), CAST(:errors AS text[])) AS f(id, error) "
    "WHERE ti.id = f.id AND ti.state = ANY(:ti_sources) RETURNING ti.id",
    ti=({TaskState.NONE, TaskState.SCHEDULED}, {TaskState.FAILED}),
)

#: What mapped tasks expand over: per (run, upstream task, key) asked for, how many instances the
#: upstream task has if it is mapped, and the JSON type and (for an array) length of its stored result,
#: or of that key of it. No row for an upstream task without a task instance.
EXPANSION_SOURCES = _sql(
    "SELECT q.run_pk, q.task_id, q.key, "
    "(SELECT count(*) FROM task_instances m WHERE m.run_pk = q.run_pk AND m.task_id = q.task_id "
    "  AND m.map_index >= 0) AS instances, "
    "jsonb_typeof(v.value) AS kind, "
    "CASE WHEN jsonb_typeof(v.value) = 'array' THEN jsonb_array_length(v.value) END AS length "
    "FROM unnest(CAST(:run_pks AS bigint[]), CAST(:task_ids AS text[]), CAST(:keys AS text[])) "
    "AS q(run_pk, task_id, key) "
    "LEFT JOIN task_instances ti ON ti.run_pk = q.run_pk AND ti.task_id = q.task_id AND ti.map_index = -1 "
    "LEFT JOIN LATERAL (SELECT CASE WHEN q.key IS NULL THEN ti.result ELSE ti.result -> q.key END "
    "  AS value) v ON true"
)

#: Dependencies met, waiting for a pool slot or a concurrency limit.
SCHEDULE_TASK_INSTANCES = _guarded(
    "UPDATE task_instances SET state = 'scheduled', fence_token = :token "
    "WHERE id = ANY(:ids) AND state = ANY(:ti_sources) RETURNING id",
    ti=({TaskState.NONE, TaskState.UP_FOR_RETRY, TaskState.UP_FOR_RESCHEDULE}, {TaskState.SCHEDULED}),
)

#: Sets when failed attempts retry (per task instance, computed by the leader from the retry policy).
SET_RETRY_TIMES = _sql(
    "UPDATE task_instances ti SET next_retry_at = now() + make_interval(secs => d.delay), "
    "fence_token = :token "
    "FROM unnest(CAST(:ids AS bigint[]), CAST(:delays AS float8[])) AS d(id, delay) "
    "WHERE ti.id = d.id AND ti.state = 'up_for_retry' AND ti.next_retry_at IS NULL RETURNING ti.id"
)

#: For the deadline timer: the database's ``now()`` and the next retry or sensor poke strictly after it
#: (its task instance, run, time and whether its DAG is paused; NULLs when none is to come). Each
#: state is read through its own partial index. An overdue one is DUE_RETRY_RUNS's, never this: it
#: must not hide the next one.
NEXT_RETRY = _sql(
    "SELECT now() AS now, n.id, n.run_pk, n.next_retry_at AS at, n.paused FROM (SELECT 1) AS one "
    "LEFT JOIN LATERAL (SELECT t.id, t.run_pk, t.next_retry_at, d.paused FROM ("
    "  (SELECT id, run_pk, dag_id, next_retry_at FROM task_instances WHERE state = 'up_for_retry' "
    "  AND next_retry_at > now() ORDER BY next_retry_at LIMIT 1) UNION ALL "
    "  (SELECT id, run_pk, dag_id, next_retry_at FROM task_instances WHERE state = 'up_for_reschedule' "
    "  AND next_retry_at > now() ORDER BY next_retry_at LIMIT 1)"
    ") AS t JOIN dags d ON d.dag_id = t.dag_id ORDER BY t.next_retry_at LIMIT 1) AS n ON true"
)

#: The retries and sensor pokes due (``next_retry_at <= now()``, as a pass's ``retry_due``): each task
#: instance, its run, its time and whether its DAG is paused.
DUE_RETRY_RUNS = _sql(
    "SELECT t.id, t.run_pk, t.next_retry_at AS at, d.paused FROM ("
    "  SELECT id, run_pk, dag_id, next_retry_at FROM task_instances "
    "  WHERE state = 'up_for_retry' AND next_retry_at <= now() "
    "  UNION ALL SELECT id, run_pk, dag_id, next_retry_at FROM task_instances "
    "  WHERE state = 'up_for_reschedule' AND next_retry_at <= now()"
    ") AS t JOIN dags d ON d.dag_id = t.dag_id"
)

#: Pool sizes, their backfill shares, the slots their queued and running task instances hold (and of
#: those, the backfills'), for the given pools and for every pool that has task instances waiting;
#: ``waiting`` and ``backfills_waiting`` say whether any of the other runs' or of backfill runs' wait.
#: Usage comes from the occupancy counters (compacted sums plus pending deltas), so this does not
#: grow with the task instances queued or running.
POOL_CAPACITY = _sql(
    "WITH wanted AS ("
    "  SELECT p.name, p.slots, p.backfill_share FROM pools p WHERE p.name = ANY(:pools) "
    "  OR EXISTS (SELECT 1 FROM task_instances w WHERE w.state = 'scheduled' AND w.pool = p.name)"
    f"), usage AS ({OCCUPANCY_OF_POOLS}) "
    "SELECT w.name, w.slots, w.backfill_share, "
    "COALESCE((SELECT sum(u.slots) FROM usage u WHERE u.pool = w.name), 0) AS used, "
    "COALESCE((SELECT sum(u.slots) FROM usage u WHERE u.pool = w.name AND u.backfill), 0) AS backfill_used, "
    "EXISTS (SELECT 1 FROM task_instances t WHERE t.state = 'scheduled' AND t.pool = w.name "
    "  AND NOT t.backfill) AS waiting, "
    "EXISTS (SELECT 1 FROM task_instances t WHERE t.state = 'scheduled' AND t.pool = w.name "
    "  AND t.backfill) AS backfills_waiting "
    "FROM wanted w"
)

#: Task instances of one lane (backfill runs' or the others') waiting in a pool, in admission order,
#: after a keyset position.
WAITING_IN_POOL = _sql(
    "SELECT ti.id, ti.dag_id, ti.task_id, ti.pool, ti.pool_slots, ti.priority_weight, ti.logical_date, "
    "ti.queue, ti.backfill, ti.run_pk, r.dag_version_id FROM task_instances ti "
    "JOIN dag_runs r ON r.id = ti.run_pk "
    "JOIN dags d ON d.dag_id = ti.dag_id "
    "WHERE ti.state = 'scheduled' AND ti.pool = :pool AND ti.backfill = :backfill AND NOT d.paused "
    "AND (-ti.priority_weight, ti.logical_date, ti.id) > (:after_priority, :after_date, :after_id) "
    "ORDER BY ti.priority_weight DESC, ti.logical_date, ti.id LIMIT :limit"
)

#: Queued and running task instances of DAGs, from the occupancy counters.
ACTIVE_TASKS_OF_DAGS = _sql(
    "SELECT q.dag_id, COALESCE(o.tasks, 0) + COALESCE((SELECT sum(d.tasks) FROM occupancy_deltas d "
    "  WHERE d.dag_id = q.dag_id), 0) AS active "
    "FROM unnest(CAST(:dag_ids AS text[])) AS q(dag_id) LEFT JOIN dag_occupancy o ON o.dag_id = q.dag_id"
)

ACTIVE_INSTANCES_OF_TASKS = _sql(
    "SELECT dag_id, task_id, count(*) AS active FROM task_instances WHERE state IN ('queued', 'running') "
    "AND dag_id = ANY(:dag_ids) AND task_id = ANY(:task_ids) GROUP BY dag_id, task_id"
)

#: For depends_on_past: the state of each given task in the previous run (by logical date) of each given
#: run's DAG; 'none' for a task without a task instance in a previous run that has not finished, and no
#: row where nothing holds the task back (a first run, or a finished previous run without the task).
PAST_TASK_STATES = _sql(
    "SELECT q.run_pk, t.task_id, COALESCE(ti.state, 'none') AS state "
    "FROM unnest(CAST(:run_pks AS bigint[])) AS q(run_pk) JOIN dag_runs r ON r.id = q.run_pk "
    "CROSS JOIN LATERAL (SELECT p.id, p.state FROM dag_runs p WHERE p.dag_id = r.dag_id "
    "  AND p.logical_date < r.logical_date ORDER BY p.logical_date DESC LIMIT 1) AS prev "
    "CROSS JOIN unnest(CAST(:task_ids AS text[])) AS t(task_id) "
    "LEFT JOIN task_instances ti ON ti.run_pk = prev.id AND ti.task_id = t.task_id "
    "WHERE ti.id IS NOT NULL OR prev.state IN ('queued', 'running')"
)

#: The unfinished run that follows each given run of its DAG (by logical date): its depends_on_past
#: tasks may run now.
NEXT_UNFINISHED_RUNS = _sql(
    "SELECT DISTINCT nxt.id FROM unnest(CAST(:run_pks AS bigint[])) AS q(run_pk) "
    "JOIN dag_runs r ON r.id = q.run_pk "
    "CROSS JOIN LATERAL (SELECT n.id, n.state FROM dag_runs n WHERE n.dag_id = r.dag_id "
    "  AND n.logical_date > r.logical_date ORDER BY n.logical_date LIMIT 1) AS nxt "
    "WHERE nxt.state IN ('queued', 'running')"
)

#: Running runs of DAGs, for their max_active_runs; a backfill's runs do not count (the backfill's own
#: max_active_runs limits them).
RUNNING_RUNS_OF_DAGS = _sql(
    "SELECT dag_id, count(*) AS running FROM dag_runs WHERE state = 'running' AND dag_id = ANY(:dag_ids) "
    "AND backfill_id IS NULL GROUP BY dag_id"
)

#: Queued runs of the given DAGs, oldest logical date first: woken when a run of their DAG ends.
#: The oldest queued runs (not a backfill's) of each DAG, at most as many as each may start now: the
#: runs held back by max_active_runs when runs of their DAG ended.
QUEUED_RUNS_TO_START = _sql(
    "SELECT q.id FROM unnest(CAST(:dag_ids AS text[]), CAST(:rooms AS int[])) AS d(dag_id, room) "
    "CROSS JOIN LATERAL (SELECT id FROM dag_runs WHERE state = 'queued' AND dag_id = d.dag_id "
    "  AND backfill_id IS NULL ORDER BY logical_date LIMIT d.room) AS q"
)

#: Running runs, how long they have been running and whether their DAG is paused, for the leader's
#: run-timeout timer.
RUNNING_RUN_AGES = _sql(
    "SELECT r.id, r.dag_version_id, EXTRACT(EPOCH FROM now() - r.started_at) AS age, d.paused "
    "FROM dag_runs r JOIN dags d ON d.dag_id = r.dag_id "
    "WHERE r.state = 'running' AND r.started_at IS NOT NULL"
)

#: Starts a new attempt: next try number (the same one for the next poke of a reschedule-mode sensor,
#: whose try goes on while ``first_poke_at`` is set), a fresh attempt id.
QUEUE_TASK_INSTANCES = _guarded(
    f"UPDATE task_instances SET state = 'queued', try_number = try_number + {_NEXT_TRY}, "
    "attempt_id = gen_random_uuid(), queued_at = now(), started_at = NULL, ended_at = NULL, "
    "claimed_at = NULL, lost_reported = false, next_retry_at = NULL, worker_id = NULL, exit_code = NULL, "
    "error = NULL, fence_token = :token "
    "WHERE id = ANY(:ids) AND state = ANY(:ti_sources) RETURNING id, queue",
    ti=(_READY, {TaskState.QUEUED}),
)

#: QUEUE_TASK_INSTANCES and RECORD_PASS in one round trip: queues the task instances, appends the pass
#: to the log, and wakes the registries for their queues and for :queues (queued by other statements).
QUEUE_AND_RECORD_PASS = _guarded(
    "WITH q AS ("
    f"  UPDATE task_instances SET state = 'queued', try_number = try_number + {_NEXT_TRY}, "
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
    ti=(_READY, {TaskState.QUEUED}),
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
    ti=({TaskState.RUNNING}, {TaskState.FAILED}),
    attempt=({AttemptState.RUNNING}, {AttemptState.FAILED}),
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
    run=({RunState.QUEUED, RunState.RUNNING}, {RunState.FAILED}),
    ti=(WAITING_TO_RUN, {TaskState.SKIPPED}),
)

#: Starts queued runs; returns each run started (the pass checks that every run it named did).
START_RUNS = _guarded(
    "UPDATE dag_runs SET state = 'running', started_at = COALESCE(started_at, now()), fence_token = :token "
    "WHERE id = ANY(:run_pks) AND state = ANY(:run_sources) RETURNING id",
    run=({RunState.QUEUED}, {RunState.RUNNING}),
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
