"""Explaining a task instance's state (the api's ``ExplainTaskInstance``): the facts the explanation
needs, read in one snapshot, handed to the pure ``schedd_core.explain``. Reads only; locks nothing."""

from __future__ import annotations

from schedd_core.errors import NotFound, quote
from schedd_core.explain import ExplainFacts, explain
from schedd_core.graph import DagGraph
from schedd_core.mapping import UNMAPPED, split_key
from schedd_core.planner import TaskSnapshot
from schedd_core.states import RunState, TaskState
from schedd_store import statements as sql
from schedd_store.database import Connection, Engine
from schedd_store.instance_lookup import NotStartedYet, missing_instance
from schedd_store.records import parse_spec


async def explain_task(
    engine: Engine, dag_id: str, run_id: str, task_key: str
) -> tuple[TaskState, list[str]]:
    """Why the task instance ``task_key`` names (a task id, or ``task_id[map_index]``) is in its state.
    A task of a run not planned yet is explained from the run; NotFound (saying why) when the key
    names no task instance otherwise."""
    task_id, map_index = split_key(task_key)
    params = {"dag_id": dag_id, "run_id": run_id, "task_id": task_id, "map_index": map_index}
    async with engine.connect() as conn:
        row = (await conn.execute(sql.EXPLAIN_TASK, params)).first()
        if row is None:
            missing = await missing_instance(conn, dag_id, run_id, task_key)
            if map_index == UNMAPPED and isinstance(missing, NotStartedYet):
                return await _explain_without_instance(conn, dag_id, run_id, task_id)
            raise missing
        spec_row = (await conn.execute(sql.GET_VERSION_SPECS, {"ids": [row.dag_version_id]})).one()
        tasks = {
            t.task_key: TaskSnapshot(TaskState(t.state))
            for t in (await conn.execute(sql.RUN_TASK_STATES, {"run_pk": row.run_pk})).all()
        }
        now = (await conn.execute(sql.NOW)).scalar_one()
        graph = DagGraph.from_spec(parse_spec(spec_row.spec))
        past_state = None
        if task_id in graph.nodes and graph.nodes[task_id].depends_on_past:
            past = (
                await conn.execute(sql.PAST_TASK_STATES, {"run_pks": [row.run_pk], "task_ids": [task_id]})
            ).first()
            past_state = TaskState(past.state) if past is not None else None
    facts = ExplainFacts(
        task_id=task_id,
        state=TaskState(row.state),
        run_state=row.run_state,
        paused=row.paused,
        pool=row.pool,
        pool_slots=row.pool_slots,
        pool_total=row.pool_total,
        pool_used=int(row.pool_used),
        dag_active=int(row.dag_active),
        task_active=int(row.task_active),
        dag_running_runs=int(row.dag_running_runs),
        waiting_ahead=int(row.ahead),
        next_retry_at=row.next_retry_at,
        now=now,
        try_number=row.try_number,
        max_tries=row.max_tries,
        queue=row.queue,
        workers_for_queue=int(row.workers),
        past_state=past_state,
    )
    return facts.state, explain(graph, facts, tasks)


async def _explain_without_instance(
    conn: Connection, dag_id: str, run_id: str, task_id: str
) -> tuple[TaskState, list[str]]:
    """The task has no task instance yet: its run has not been planned (queued, or paused)."""
    run = (await conn.execute(sql.READ_RUN_WITH_SPEC, {"dag_id": dag_id, "run_id": run_id})).first()
    if run is None:
        raise NotFound(f"run {quote(run_id)} of dag {quote(dag_id)} not found")
    graph = DagGraph.from_spec(parse_spec(run.spec))
    if task_id not in graph.nodes:
        raise NotFound(f"dag {quote(dag_id)} has no task {quote(task_id)}")
    if run.paused:
        return TaskState.NONE, ["its DAG is paused"]
    if run.state == RunState.QUEUED and graph.max_active_runs:
        running = (await conn.execute(sql.RUNNING_RUNS_OF_DAGS, {"dag_ids": [dag_id]})).first()
        count = int(running.running) if running else 0
        return TaskState.NONE, [
            f"its run waits to start: {count} of max_active_runs={graph.max_active_runs} runs of the DAG "
            "are running"
        ]
    return TaskState.NONE, [f"its run is {run.state} and has not been planned yet"]
