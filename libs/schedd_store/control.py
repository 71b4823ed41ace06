"""Manual control (the api's side): pause, cancel, clear, mark, explain.

These are user intents, written with the same guarded transitions as everything
else; they are not fenced (the api is not the leader), and the leader re-plans
the affected runs when notified. A running attempt they stop is failed at once
and its worker is told to stop it (NOTIFY to the registries, naming the task
instances only: each registry reads which attempts its workers must stop, see
:func:`stale_attempts`); its late result is rejected as stale.

Nothing here is check-then-write: each change locks the run and its task instances
(``FOR UPDATE``) before it reads their states. A registry's claim skips locked rows
and the leader's pass waits for the run's lock, so no task instance is claimed or
planned between the read and the write; every guarded statement's row count is then
compared with what the read implies, and a shortfall rolls everything back
(:class:`IllegalTransition`). A claim that passed the locked task instances by may
have left queued work behind, so every change wakes the registries of the queues of
the run's queued task instances when it commits.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from schedd_core.errors import FailedPrecondition, IllegalTransition, InvalidArgument, NotFound, quote
from schedd_core.graph import DagGraph
from schedd_core.request_key import RequestKey
from schedd_core.states import RUN_FINISHED, WAITING_TO_RUN, RunState, TaskState, allowed_task_sources
from schedd_faults import FaultPoints
from schedd_store import channels, run_versions, schedules, statements as sql
from schedd_store.database import Connection, Engine
from schedd_store.instance_lookup import missing_instance
from schedd_store.instance_selection import keys_in_order, to_clear, to_reevaluate
from schedd_store.records import parse_spec
from schedd_store.requests import earlier_outcome, record_outcome

CANCEL_RUN = "CancelRun"
CLEAR_TASK_INSTANCES = "ClearTaskInstances"
SET_TASK_INSTANCE_STATE = "SetTaskInstanceState"


async def set_paused(engine: Engine, dag_id: str, paused: bool) -> None:
    """Pause or unpause a DAG. Pausing takes its task instances waiting for a pool slot out of the
    wait (``statements.UNWAIT_PAUSED_DAG``); what is queued or running goes on. Unpausing wakes its
    unfinished runs and its schedule: the leader plans their task instances again and makes the runs
    of the intervals missed meanwhile as its catch-up setting says.

    Not guaranteed: a leader's pass that read the DAG unpaused before the pause committed may still
    leave a task instance of it waiting; it is admitted only once the DAG is unpaused."""
    async with engine.begin() as conn:
        if (await conn.execute(sql.SET_PAUSED, {"dag_id": dag_id, "paused": paused})).first() is None:
            raise NotFound(f"dag {quote(dag_id)} not found")
        if paused:
            await conn.execute(sql.UNWAIT_PAUSED_DAG, {"dag_id": dag_id})
        else:
            runs = [r[0] for r in (await conn.execute(sql.UNFINISHED_RUNS_OF_DAG, {"dag_id": dag_id})).all()]
            for payload in channels.encode_ids(runs):
                await conn.execute(sql.NOTIFY, {"channel": channels.RUNS, "payload": payload})
            await schedules.wake_schedule(conn, dag_id)


@dataclass
class _LockedRun:
    pk: int
    state: str
    graph: DagGraph
    #: The run's task instances by key (``task_id``, or ``task_id[map_index]`` for a mapped instance).
    tasks: dict[str, Any]
    dag_id: str = ""
    run_id: str = ""
    #: Set when the change moved the run to its DAG's current version (that version's hash).
    moved_to: str = ""

    async def move_to_current_version(self, conn: Connection) -> None:
        """Pin the run to its DAG's current version (``schedd_store.run_versions``); later choices of
        task instances use that version's graph."""
        self.graph, self.moved_to = await run_versions.move_to_current_version(
            conn, self.dag_id, self.run_id, self.pk, self.tasks.values()
        )

    async def refresh_options(self, conn: Connection) -> None:
        """After a move: task instances waiting to run take the options of the new version's tasks."""
        if self.moved_to:
            await run_versions.refresh_options(conn, self.graph, self.tasks.values())


async def _lock_run(conn: Connection, dag_id: str, run_id: str, faults: FaultPoints | None) -> _LockedRun:
    """Lock the run and its task instances and read them; raise the run's control version (the
    leader reads a run a user changed in full)."""
    row = (await conn.execute(sql.LOCK_RUN, {"dag_id": dag_id, "run_id": run_id})).first()
    if row is None:
        raise NotFound(f"run {quote(run_id)} of dag {quote(dag_id)} not found")
    await conn.execute(sql.BUMP_CONTROL_VERSION, {"run_pk": row.id})
    tasks = {t.task_key: t for t in (await conn.execute(sql.LOCK_RUN_TASKS, {"run_pk": row.id})).all()}
    if faults is not None:
        faults.hit("control.read")  # a test widens the window between this read and the writes
    return _LockedRun(
        pk=row.id,
        state=row.state,
        graph=DagGraph.from_spec(parse_spec(row.spec)),
        tasks=tasks,
        dag_id=dag_id,
        run_id=run_id,
    )


async def _wake_claims(conn: Connection, run: _LockedRun) -> None:
    """Claims skipped the run's locked task instances: let the registries look again after commit."""
    for queue in sorted({t.queue for t in run.tasks.values() if t.state == TaskState.QUEUED}):
        await conn.execute(sql.NOTIFY, {"channel": channels.QUEUED, "payload": queue})


def _expect(what: str, expected: int, rows: Sequence[object]) -> None:
    if len(rows) != expected:
        raise IllegalTransition(
            f"{what}: {len(rows)} of {expected} task instances changed; nothing was applied"
        )


async def _stop(conn: Connection, ids: Sequence[int], *, target: TaskState, error: str) -> None:
    """Stop running attempts (locked by the caller): their task instances move to ``target`` and their
    workers are told to kill them."""
    if not ids:
        return
    rows = (
        await conn.execute(sql.STOP_RUNNING, {"ids": list(ids), "target": target.value, "error": error})
    ).all()
    _expect("stopping running attempts", len(ids), rows)
    if any(r.events for r in rows):
        await conn.execute(sql.NOTIFY, {"channel": channels.OUTBOX, "payload": ""})
    # The task instance ids only: any role may LISTEN, and the registries read what to stop.
    for payload in channels.encode_ids(r.id for r in rows if r.worker_id):
        await conn.execute(sql.NOTIFY, {"channel": channels.CANCEL, "payload": payload})


@dataclass(frozen=True)
class StaleAttempt:
    worker_id: str
    ti_id: int
    try_number: int
    attempt_id: str


async def stale_attempts(
    engine: Engine, ti_ids: Sequence[int], worker_ids: Sequence[str]
) -> list[StaleAttempt]:
    """The attempts of ``ti_ids`` held by ``worker_ids`` that are no longer current (stopped by a user
    or superseded; older ones a worker no longer runs may be among them): what a registry tells its
    workers to stop when a cancel notification names those task instances. Never a current attempt,
    whatever the notification said."""
    if not ti_ids or not worker_ids:
        return []
    async with engine.connect() as conn:
        rows = await conn.execute(
            sql.STALE_ATTEMPTS_OF_WORKERS, {"ti_ids": list(ti_ids), "worker_ids": list(worker_ids)}
        )
        return [StaleAttempt(r.worker_id, r.ti_id, r.try_number, str(r.attempt_id)) for r in rows]


async def cancel_run(
    engine: Engine,
    dag_id: str,
    run_id: str,
    *,
    faults: FaultPoints | None = None,
    request: RequestKey | None = None,
) -> None:
    """Fail the run: running attempts fail and are stopped, tasks that have not run are skipped. A
    retry of a request that cancelled the run changes nothing and succeeds."""
    async with engine.begin() as conn:
        if await earlier_outcome(conn, CANCEL_RUN, request) is not None:
            return
        await cancel_locked(conn, dag_id, run_id, faults=faults)
        await record_outcome(conn, CANCEL_RUN, request, f"dags/{dag_id}/runs/{run_id}")


async def cancel_locked(
    conn: Connection, dag_id: str, run_id: str, *, faults: FaultPoints | None = None
) -> None:
    """:func:`cancel_run` inside the caller's transaction (which locks the run first)."""
    run = await _lock_run(conn, dag_id, run_id, faults)
    if RunState(run.state) in RUN_FINISHED:
        raise FailedPrecondition(f"run {quote(run_id)} of dag {quote(dag_id)} is already {run.state}")
    running = [t.id for t in run.tasks.values() if t.state == TaskState.RUNNING]
    await _stop(conn, running, target=TaskState.FAILED, error="the run was cancelled")
    unrun = [t for t in run.tasks.values() if t.state in WAITING_TO_RUN]
    skipped = (await conn.execute(sql.SKIP_UNRUN, {"run_pk": run.pk})).all()
    _expect("skipping the tasks that did not run", len(unrun), skipped)
    if (await conn.execute(sql.FAIL_RUN_BY_HAND, {"run_pk": run.pk})).first() is None:
        raise IllegalTransition(f"run {quote(run_id)} of dag {quote(dag_id)} could not be failed")
    if "failure" in run.graph.run_callback_events:
        await conn.execute(
            sql.RECORD_RUN_EVENTS, {"events": ["failure"], "run_pks": [run.pk], "dag_ids": [dag_id]}
        )
        await conn.execute(sql.NOTIFY, {"channel": channels.OUTBOX, "payload": ""})
    # The oldest queued run of the DAG may start now (max_active_runs), and the leader looks at its
    # schedule.
    waiting = [
        r[0]
        for r in (await conn.execute(sql.QUEUED_RUNS_TO_START, {"dag_ids": [dag_id], "rooms": [1]})).all()
    ]
    for payload in channels.encode_ids([run.pk, *waiting]):
        await conn.execute(sql.NOTIFY, {"channel": channels.RUNS, "payload": payload})
    await conn.execute(sql.NOTIFY, {"channel": channels.DAGS, "payload": dag_id})


async def clear(
    engine: Engine,
    dag_id: str,
    run_id: str,
    task_ids: Sequence[str],
    *,
    downstream: bool,
    upstream: bool,
    only_failed: bool,
    faults: FaultPoints | None = None,
    request: RequestKey | None = None,
    latest_version: bool = False,
) -> list[str]:
    """Reset task instances (and optionally everything downstream/upstream of them) to run again.

    With ``latest_version`` the run first moves to its DAG's current version
    (``schedd_store.run_versions``): the tasks are chosen, and run, by that version.

    ``task_ids`` holds task ids, each for every task instance of its task (all instances of a mapped
    task, or its placeholder), and ``task_id[map_index]`` keys, each for one instance of a mapped
    task; none means every task. Downstream and upstream are tasks: every instance of a task reached
    is cleared. Returns the keys cleared, by task id and map index. A retry of a request that
    committed clears nothing and returns what the first call cleared."""
    async with engine.begin() as conn:
        earlier = await earlier_outcome(conn, CLEAR_TASK_INSTANCES, request)
        if earlier is not None:
            return list(json.loads(earlier))
        cleared = await _clear_locked(
            conn, dag_id, run_id, task_ids, downstream, upstream, only_failed, faults, latest_version
        )
        await record_outcome(conn, CLEAR_TASK_INSTANCES, request, json.dumps(cleared))
    return cleared


async def _clear_locked(
    conn: Connection,
    dag_id: str,
    run_id: str,
    task_ids: Sequence[str],
    downstream: bool,
    upstream: bool,
    only_failed: bool,
    faults: FaultPoints | None,
    latest_version: bool = False,
) -> list[str]:
    run = await _lock_run(conn, dag_id, run_id, faults)
    if latest_version:
        await run.move_to_current_version(conn)
    rows = to_clear(run.graph, dag_id, run.tasks.values(), task_ids, downstream=downstream, upstream=upstream)
    if only_failed:
        rows = [t for t in rows if t.state in (TaskState.FAILED, TaskState.UPSTREAM_FAILED)]
    if not rows:
        if run.moved_to:  # moved, nothing to clear: the leader plans the run by its new version
            await run.refresh_options(conn)
            await conn.execute(sql.NOTIFY, {"channel": channels.RUNS, "payload": str(run.pk)})
        return []
    await _stop(
        conn,
        [t.id for t in rows if t.state == TaskState.RUNNING],
        target=TaskState.FAILED,
        error="the task instance was cleared",
    )
    cleared = await _clear(conn, run, rows)
    await run.refresh_options(conn)
    await conn.execute(sql.REOPEN_RUN, {"run_pk": run.pk})
    await conn.execute(sql.NOTIFY, {"channel": channels.RUNS, "payload": str(run.pk)})
    await _wake_claims(conn, run)
    return keys_in_order(cleared)


async def _clear(conn: Connection, run: _LockedRun, rows: Sequence[Any]) -> list[str]:
    """Clear the (locked) task instances ``rows``; returns their keys."""
    cleared = (
        await conn.execute(
            sql.CLEAR_TASK_INSTANCES,
            {"ids": [t.id for t in rows], "tries": [run.graph.nodes[t.task_id].max_tries for t in rows]},
        )
    ).all()
    _expect("clearing", len(rows), cleared)
    return [r.task_key for r in cleared]


async def set_state(
    engine: Engine,
    dag_id: str,
    run_id: str,
    task_key: str,
    state: TaskState,
    *,
    faults: FaultPoints | None = None,
    request: RequestKey | None = None,
    latest_version: bool = False,
) -> None:
    """Mark the task instance ``task_key`` names (a task id, or ``task_id[map_index]`` for one
    instance of a mapped task) succeeded or failed by hand (a failed mark uses up its retries). Marking
    a task instance with the state it has already changes nothing, and so does a retry of a request
    that committed (even if the task instance was cleared since). NotFound (saying why) when the key
    names no task instance. With ``latest_version`` the run first moves to its DAG's current
    version, so the tasks the mark lets run run that version."""
    if state not in (TaskState.SUCCESS, TaskState.FAILED):
        raise InvalidArgument("state", "must be TASK_STATE_SUCCESS or TASK_STATE_FAILED")
    async with engine.begin() as conn:
        if await earlier_outcome(conn, SET_TASK_INSTANCE_STATE, request) is not None:
            return
        await _set_state_locked(conn, dag_id, run_id, task_key, state, faults, latest_version)
        await record_outcome(
            conn, SET_TASK_INSTANCE_STATE, request, f"dags/{dag_id}/runs/{run_id}/tasks/{task_key}"
        )


async def _set_state_locked(
    conn: Connection,
    dag_id: str,
    run_id: str,
    task_key: str,
    state: TaskState,
    faults: FaultPoints | None,
    latest_version: bool = False,
) -> None:
    run = await _lock_run(conn, dag_id, run_id, faults)
    if latest_version:
        await run.move_to_current_version(conn)
    ti = run.tasks.get(task_key)
    if ti is None or ti.task_id not in run.graph.nodes:
        raise await missing_instance(conn, dag_id, run_id, task_key)
    if ti.state == state:
        await run.refresh_options(conn)
        if run.moved_to:
            await conn.execute(sql.NOTIFY, {"channel": channels.RUNS, "payload": str(run.pk)})
        await _wake_claims(conn, run)
        return
    if ti.state == TaskState.RUNNING:
        await _stop(conn, [ti.id], target=state, error=f"marked {state.value} by hand")
    else:
        row = (
            await conn.execute(
                sql.SET_TASK_STATE_BY_HAND,
                {"id": ti.id, "target": state.value, "allowed_from": allowed_task_sources(state)},
            )
        ).first()
        if row is None:
            raise FailedPrecondition(f"task {quote(task_key)} cannot be marked {state.value} from {ti.state}")
    if state is TaskState.SUCCESS:
        # As in Airflow: tasks downstream that gave up because of this one are evaluated again.
        again = to_reevaluate(run.graph, run.tasks.values(), ti.task_id)
        if again:
            await _clear(conn, run, again)
    await run.refresh_options(conn)
    await conn.execute(sql.REOPEN_RUN, {"run_pk": run.pk})
    await conn.execute(sql.NOTIFY, {"channel": channels.RUNS, "payload": str(run.pk)})
    await _wake_claims(conn, run)
