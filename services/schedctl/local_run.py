"""One run of a DAG in this process, with no services: what ``schedctl dags test`` does.

The decisions are the scheduler's own: each step asks ``schedd_core.planner.plan_run`` (trigger
rules, setup constraints, branches, the run's final state) what to do next over the run's task
states, kept in memory. The tasks run one at a time on a worker's own executor
(``schedd_exec.executor.AttemptExecutor``: shell commands in subprocesses, Python callables in a
warm child, arguments resolved from the upstream results as on a worker), each with the environment
and params a worker would give it (``SCHEDD_*`` variables built by the registry's own
``schedd_exec.assignments.attempt_env``, so the task context is the cluster's; the DAG's params,
the task's, then the conf) and the return values of its upstream tasks. A run is manual (no data
interval), or given a data interval, the scheduled run of that interval.

A mapped task expands as on a cluster: when it is ready, its lists' lengths are measured from the
literal lists and the results kept in memory (a mapped upstream task's result is the list of its
instances' results, by map index), and the planner's verdict applied: one instance per element
(``task_id[i]``, run one after the other with ``map_index`` and the mapping in their assignments),
skipped with no elements, failed without running when a list is not a list or too long.

Guaranteed: the run ends (every step finishes at least one task instance or ends the run) and its state is
what the scheduler would decide for the same task outcomes. Not the same as a cluster: each task runs
once (a failed try is not retried), pools, concurrency limits, ``depends_on_past``, timeouts of the
run and callbacks are not applied, and a transactional task fails (there is no metadata database).
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from schedd.v1 import resources_pb2 as pb, worker_pb2
from schedd_core.graph import DagGraph
from schedd_core.mapping import UNMAPPED, instance_key, split_key
from schedd_core.planner import RunPlan, TaskSnapshot, plan_run
from schedd_core.states import RunState, TaskState
from schedd_exec.assignments import attempt_env, merged_params
from schedd_exec.executor import AttemptExecutor
from schedd_exec.outcome import Outcome
from schedd_rpc import convert


@dataclass
class TaskEvent:
    """A task instance started (``state`` RUNNING), printed output (``output``), or reached a final
    state. ``task_id`` is its key: the task id, or ``task_id[i]`` for instance ``i`` of a mapped task."""

    task_id: str
    state: TaskState
    output: bytes = b""
    error: str = ""


@dataclass
class LocalRun:
    """What one local run did: the final state of the run and of each task instance, and the stored
    results, both by key (the task id, or ``task_id[i]`` for a mapped task's instance)."""

    run_id: str
    state: RunState
    tasks: dict[str, TaskState] = field(default_factory=dict)
    results: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class RunIdentity:
    """What a run is, as its tasks see it: a manual run (no data interval), or with ``data_interval``
    (``[start, end)``, aware datetimes) the scheduled run of that interval."""

    logical_date: datetime
    conf: Mapping[str, Any]
    data_interval: tuple[datetime, datetime] | None = None

    @property
    def run_id(self) -> str:
        return f"test__{self.logical_date.isoformat()}"

    @property
    def run_type(self) -> str:
        return "manual" if self.data_interval is None else "scheduled"


async def run_locally(
    spec: pb.DagSpec,
    *,
    conf: Mapping[str, Any],
    logical_date: datetime,
    on_event: Callable[[TaskEvent], None],
    data_interval: tuple[datetime, datetime] | None = None,
) -> LocalRun:
    """Run ``spec`` once to its end; ``on_event`` sees every task start, its output and its end.

    With ``data_interval`` the run is the scheduled run of that interval (its logical date must be
    the interval's start); without, a manual run."""
    graph = DagGraph.from_spec(spec)
    tasks = {t.task_id: t for t in spec.tasks}
    run = RunIdentity(logical_date, conf, data_interval)
    done: dict[str, asyncio.Future[Outcome]] = {}

    def finished(assignment: worker_pb2.Assignment, outcome: Outcome) -> None:
        done[assignment.attempt.attempt_id].set_result(outcome)

    def output(assignment: worker_pb2.Assignment, data: bytes) -> None:
        on_event(TaskEvent(_key_of(assignment), TaskState.RUNNING, output=data))

    states: dict[str, TaskSnapshot] = {}
    results: dict[str, Any] = {}
    executor = AttemptExecutor(python_workers=1, on_done=finished, on_output=output)
    await executor.start()
    try:
        while True:  # every step settles at least one task instance, or ends the run
            plan = plan_run(graph, states)
            if plan.to_measure:
                delivered = _delivered(states, results)
                lengths = {tid: _lengths(graph, tid, delivered) for tid in plan.to_measure}
                plan = plan_run(graph, states, map_lengths=lengths)
            settled = _apply(plan, states, on_event)
            if plan.run_state is not None:
                return LocalRun(run.run_id, plan.run_state, {t: s.state for t, s in states.items()}, results)
            for key in plan.to_queue:
                task_id, map_index = split_key(key)
                assignment = _assignment(spec, tasks[task_id], map_index, run, _delivered(states, results))
                future = done[assignment.attempt.attempt_id] = asyncio.get_running_loop().create_future()
                on_event(TaskEvent(key, TaskState.RUNNING))
                executor.submit(assignment)
                outcome = await future
                del done[assignment.attempt.attempt_id]
                result = json.loads(outcome.result_json) if outcome.result_json else None
                if outcome.succeeded and result is not None:
                    results[key] = result
                state = (
                    TaskState.SKIPPED
                    if outcome.skipped
                    else TaskState.SUCCESS
                    if outcome.succeeded
                    else TaskState.FAILED
                )
                follow = _follow(result) if graph.nodes[task_id].branch and outcome.succeeded else None
                states[key] = TaskSnapshot(state, follow=follow)
                on_event(TaskEvent(key, state, error=outcome.error))
                settled += 1
            if not settled:
                raise RuntimeError(f"the run of {spec.dag_id!r} did not settle: {states}")
    finally:
        await executor.close()


def _apply(plan: RunPlan, states: dict[str, TaskSnapshot], on_event: Callable[[TaskEvent], None]) -> int:
    """Apply what ``plan`` decides without running anything (new and removed task instances, skips,
    failures); returns how many task instances it settled."""
    for key in plan.to_create:
        states[key] = TaskSnapshot(TaskState.NONE)
    for key in plan.to_remove:  # an expanded mapped task's placeholder
        del states[key]
    settled = 0
    for keys, state in (
        (plan.to_skip, TaskState.SKIPPED),
        (plan.to_upstream_failed, TaskState.UPSTREAM_FAILED),
    ):
        for key in keys:
            states[key] = TaskSnapshot(state)
            on_event(TaskEvent(key, state))
            settled += 1
    for key, reason in plan.to_fail_unrun:
        states[key] = TaskSnapshot(TaskState.FAILED)
        on_event(TaskEvent(key, TaskState.FAILED, error=reason))
        settled += 1
    return settled


def _delivered(states: Mapping[str, TaskSnapshot], results: Mapping[str, Any]) -> dict[str, Any]:
    """What a downstream task gets as each task's result, by task id: the stored result, or for an
    expanded mapped task the list of its instances' results by map index (None where one stored
    nothing). A task that stored nothing, or a mapped task never expanded, has no entry."""
    delivered: dict[str, Any] = {}
    instances: dict[str, list[tuple[int, str]]] = {}
    for key in states:
        task_id, map_index = split_key(key)
        if map_index != UNMAPPED:
            instances.setdefault(task_id, []).append((map_index, key))
        elif key in results:
            delivered[task_id] = results[key]
    for task_id, keys in instances.items():
        delivered[task_id] = [results.get(key) for _, key in sorted(keys)]
    return delivered


def _lengths(graph: DagGraph, task_id: str, delivered: Mapping[str, Any]) -> list[tuple[str, int | None]]:
    """The planner's ``map_lengths`` entry of a mapped task: per expanded argument, the length of its
    literal list or of the upstream result (or key of it) it names; None for a value not a list."""
    lengths: list[tuple[str, int | None]] = []
    for source in graph.nodes[task_id].expand:
        if source.literal_length is not None:
            lengths.append((source.name, source.literal_length))
            continue
        value = delivered.get(source.task_id)
        if source.key is not None:
            value = value.get(source.key) if isinstance(value, dict) else None
        lengths.append((source.name, len(value) if isinstance(value, list) else None))
    return lengths


def _key_of(assignment: worker_pb2.Assignment) -> str:
    return instance_key(
        assignment.task_id, assignment.map_index if assignment.HasField("map_index") else UNMAPPED
    )


def _follow(result: Any) -> frozenset[str]:
    """The downstream ids a branch task chose, as the registry reads its result."""
    if isinstance(result, str):
        return frozenset({result})
    if isinstance(result, list):
        return frozenset(str(r) for r in result)
    return frozenset()


def _assignment(
    spec: pb.DagSpec,
    task: pb.TaskSpec,
    map_index: int,
    run: RunIdentity,
    delivered: Mapping[str, Any],
) -> worker_pb2.Assignment:
    """What a registry would send a worker for the first try of this task (instance ``map_index`` of
    a mapped task, or -1); ``delivered`` holds the tasks' results as downstream tasks get them."""
    attempt_id = str(uuid.uuid4())
    key = f"{spec.dag_id}/{run.run_id}/{instance_key(task.task_id, map_index)}"
    env = attempt_env(
        task,
        dag_id=spec.dag_id,
        run_id=run.run_id,
        run_type=run.run_type,
        try_number=1,
        attempt_id=attempt_id,
        logical_date=run.logical_date,
        data_interval=run.data_interval,
        idempotency_key=key,
        conf=run.conf,
    )
    upstream = {up: delivered[up] for up in task.upstream if up in delivered}
    assignment = worker_pb2.Assignment(
        attempt=worker_pb2.AttemptRef(task_instance_id=0, try_number=1, attempt_id=attempt_id),
        dag_id=spec.dag_id,
        run_id=run.run_id,
        task_id=task.task_id,
        logical_date=convert.ts(run.logical_date),
        env=env,
        idempotency_key=key,
        params=convert.struct(merged_params(spec, task, dict(run.conf))),
        upstream_results_json=json.dumps(upstream) if upstream else "",
        transactional=task.transactional,
    )
    if run.data_interval is not None:
        assignment.data_interval_start.FromDatetime(run.data_interval[0])
        assignment.data_interval_end.FromDatetime(run.data_interval[1])
    if map_index != UNMAPPED:
        assignment.map_index = map_index
        assignment.mapping.CopyFrom(task.mapping)
    if task.HasField("shell"):
        assignment.shell.CopyFrom(task.shell)
    else:
        assignment.python.CopyFrom(task.python)
    if task.HasField("execution_timeout"):
        assignment.execution_timeout.CopyFrom(task.execution_timeout)
    if task.HasField("sensor"):  # one process, no slot to free: a sensor pokes in place
        assignment.sensor.CopyFrom(task.sensor)
        assignment.sensor.mode = pb.SENSOR_MODE_POKE
    return assignment
