"""Statements: manual control (api)."""

from __future__ import annotations

from schedd_core.states import TASK_TRANSITIONS, WAITING_TO_RUN, AttemptState, RunState, TaskState
from schedd_store.statements.guards import _guarded, _sql
from schedd_store.statements.scheduling import _FAILED_COLUMNS, _FAILURE_EVENTS

# --- manual control (api) ----------------------------------------------------------------------------

SET_PAUSED = _sql(
    "UPDATE dags SET paused = :paused, updated_at = now() WHERE dag_id = :dag_id RETURNING dag_id"
)

#: A pause takes the DAG's task instances out of their pools' wait (scheduled -> none): nothing of a
#: paused DAG is admitted, and one left waiting would hold back every successor hand-off in its pool
#: (``statements.handoffs``). The runs are locked first, in id order as every manual change locks
#: them, and their control versions raised, so a leader that keeps their task instances in memory
#: reads them again; unpausing wakes the runs, and the leader plans those task instances anew.
UNWAIT_PAUSED_DAG = _guarded(
    "WITH locked AS (SELECT id FROM dag_runs WHERE dag_id = :dag_id AND state IN ('queued', 'running') "
    "  ORDER BY id FOR UPDATE), "
    "moved AS (UPDATE task_instances t SET state = 'none' FROM locked "
    "  WHERE t.run_pk = locked.id AND t.state = ANY(:ti_sources) RETURNING t.run_pk), "
    "bumped AS (UPDATE dag_runs r SET control_version = r.control_version + 1 "
    "  WHERE r.id IN (SELECT run_pk FROM moved) RETURNING r.id) "
    "SELECT count(*) AS moved FROM moved",
    ti=({TaskState.SCHEDULED}, {TaskState.NONE}),
)

UNFINISHED_RUNS_OF_DAG = _sql(
    "SELECT id FROM dag_runs WHERE dag_id = :dag_id AND state IN ('queued', 'running')"
)

UNFINISHED_RUN_IDS_OF_DAG = _sql(
    "SELECT run_id FROM dag_runs WHERE dag_id = :dag_id AND state IN ('queued', 'running') ORDER BY id"
)

#: Every manual change of a run raises its control version, under the run's lock: the leader, which
#: may keep the run's task instances in memory between passes, reads a run whose version moved in full.
BUMP_CONTROL_VERSION = _sql("UPDATE dag_runs SET control_version = control_version + 1 WHERE id = :run_pk")

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
    "SELECT id, task_id, map_index, task_key, state, worker_id, attempt_id FROM task_instances "
    "WHERE run_pk = :run_pk"
)

#: The task instances of a run, locked: a registry's claim (SKIP LOCKED) passes them by and a result or a
#: fail-over waits, so what a manual change reads stays true until it commits.
LOCK_RUN_TASKS = _sql(
    "SELECT id, task_id, map_index, task_key, state, worker_id, attempt_id, queue FROM task_instances "
    "WHERE run_pk = :run_pk ORDER BY id FOR UPDATE"
)

#: The attempts of these task instances, held by these workers, that are no longer current (stopped by
#: a user, or superseded): what a registry tells its workers to stop when a cancel notification names
#: the task instances. A read only, so a forged notification cannot stop a current attempt.
STALE_ATTEMPTS_OF_WORKERS = _sql(
    "SELECT a.worker_id, a.ti_id, a.try_number, a.attempt_id FROM task_attempts a "
    "JOIN task_instances ti ON ti.id = a.ti_id "
    "WHERE a.ti_id = ANY(CAST(:ti_ids AS bigint[])) AND a.worker_id = ANY(CAST(:worker_ids AS text[])) "
    "AND NOT (ti.state = 'running' AND ti.attempt_id = a.attempt_id)"
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
    ti=({TaskState.RUNNING}, {TaskState.FAILED, TaskState.SUCCESS}),
    attempt=({AttemptState.RUNNING}, {AttemptState.FAILED}),
)

SKIP_UNRUN = _guarded(
    "UPDATE task_instances SET state = 'skipped', ended_at = now() "
    "WHERE run_pk = :run_pk AND state = ANY(:ti_sources) RETURNING id",
    ti=(WAITING_TO_RUN, {TaskState.SKIPPED}),
)

#: A cancel: the run fails, known as cancelled.
FAIL_RUN_BY_HAND = _guarded(
    "UPDATE dag_runs SET state = 'failed', ended_at = now(), cancelled = true "
    "WHERE id = :run_pk AND state = ANY(:run_sources) RETURNING id",
    run=({RunState.QUEUED, RunState.RUNNING}, {RunState.FAILED}),
)

#: Resets task instances to run again: a clear. Their retries are restored (max_tries counts from the
#: current try), and their earlier result, branch choice and losses are forgotten.
CLEAR_TASK_INSTANCES = _guarded(
    "UPDATE task_instances ti SET state = 'none', max_tries = ti.try_number + c.tries, "
    "  ended_at = NULL, started_at = NULL, next_retry_at = NULL, claimed_at = NULL, worker_id = NULL, "
    "  exit_code = NULL, error = NULL, result = NULL, follow = NULL, lost_attempts = 0, first_poke_at = NULL "
    "FROM unnest(CAST(:ids AS bigint[]), CAST(:tries AS int[])) AS c(id, tries) "
    "WHERE ti.id = c.id AND ti.state = ANY(:ti_sources) RETURNING ti.id, ti.task_key",
    ti=(TASK_TRANSITIONS[TaskState.NONE], {TaskState.NONE}),
)

#: A finished run whose task instances were cleared or marked runs again (an unfinished one is left as it is).
REOPEN_RUN = _guarded(
    "UPDATE dag_runs SET state = 'running', ended_at = NULL, cancelled = false "
    "WHERE id = :run_pk AND state = ANY(:run_sources) "
    "RETURNING id",
    run=({RunState.SUCCESS, RunState.FAILED}, {RunState.RUNNING}),
)

SET_TASK_STATE_BY_HAND = _sql(
    "UPDATE task_instances SET state = :target, ended_at = COALESCE(ended_at, now()), "
    "  max_tries = CASE WHEN :target = 'failed' THEN try_number ELSE max_tries END, "
    "  next_retry_at = NULL "
    "WHERE id = :id AND state = ANY(:allowed_from) RETURNING id"
)

#: What explains a task instance's state (by task id and map index), and how busy what it waits for is;
#: ``task_active`` counts every instance of the task (max_active_tis_per_dag counts them all).
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
    "WHERE r.dag_id = :dag_id AND r.run_id = :run_id AND ti.task_id = :task_id AND ti.map_index = :map_index"
)

NOW = _sql("SELECT now()")

# --- moving a run to its DAG's current version (schedd_store.run_versions) --------------------------

#: Pins the (locked) run to its DAG's current version; returns that version's hash and spec.
MOVE_RUN_TO_CURRENT_VERSION = _sql(
    "WITH moved AS ("
    "  UPDATE dag_runs r SET dag_version_id = d.latest_version_id FROM dags d "
    "  WHERE r.id = :run_pk AND d.dag_id = r.dag_id RETURNING r.dag_version_id"
    ") SELECT v.version_hash, v.spec FROM moved JOIN dag_versions v ON v.id = moved.dag_version_id"
)

#: Task instances whose task the run's version no longer has, and which never started.
REMOVE_TASK_INSTANCES = _guarded(
    "UPDATE task_instances SET state = 'removed', ended_at = now() WHERE id = ANY(CAST(:ids AS bigint[])) "
    "AND state = ANY(:ti_sources) RETURNING id",
    ti=(TASK_TRANSITIONS[TaskState.REMOVED], {TaskState.REMOVED}),
)

#: Task instances that have not started take their task's options from the run's (new) version.
REFRESH_TASK_OPTIONS = _sql(
    "UPDATE task_instances ti SET priority_weight = o.weight, pool = o.pool, pool_slots = o.slots, "
    "queue = o.queue, is_branch = o.branch, "
    "callback_events = CASE WHEN o.events = '' THEN '{}'::text[] ELSE string_to_array(o.events, ',') END "
    "FROM unnest(CAST(:ids AS bigint[]), CAST(:weights AS int[]), CAST(:pools AS text[]), "
    "CAST(:slots AS int[]), CAST(:queues AS text[]), CAST(:branches AS boolean[]), CAST(:events AS text[])) "
    "AS o(id, weight, pool, slots, queue, branch, events) "
    "WHERE ti.id = o.id AND ti.state IN ('none', 'scheduled')"
)
