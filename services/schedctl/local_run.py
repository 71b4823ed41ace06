"""One run of a DAG in this process, with no services: what ``schedctl dags test`` does.

The decisions are the scheduler's own: each step asks ``schedd_core.planner.plan_run`` (trigger
rules, setup constraints, branches, the run's final state) what to do next over the run's task
states, kept in memory. The tasks run one at a time on a worker's own executor
(``schedd_exec.executor.AttemptExecutor``: shell commands in subprocesses, Python callables in a
warm child, arguments resolved from the upstream results as on a worker), each with the environment
and params a worker would give it (``SCHEDD_*`` variables, the DAG's params, the task's, then the
conf) and the return values of its upstream tasks.

Guaranteed: the run ends (every step finishes at least one task or ends the run) and its state is
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

from schedd.v1 import resources_pb2 as pb
from schedd.v1 import worker_pb2
from schedd_core.graph import DagGraph
from schedd_core.planner import TaskSnapshot, plan_run
from schedd_core.states import RunState, TaskState
from schedd_exec.assignments import merged_params
from schedd_exec.executor import AttemptExecutor
from schedd_exec.outcome import Outcome
from schedd_rpc import convert


@dataclass
class TaskEvent:
    """A task started (``state`` RUNNING), printed output (``output``), or reached a final state."""

    task_id: str
    state: TaskState
    output: bytes = b""
    error: str = ""


@dataclass
class LocalRun:
    """What one local run did: the final state of the run and of each task, and the stored results."""

    run_id: str
    state: RunState
    tasks: dict[str, TaskState] = field(default_factory=dict)
    results: dict[str, Any] = field(default_factory=dict)


async def run_locally(
    spec: pb.DagSpec,
    *,
    conf: Mapping[str, Any],
    logical_date: datetime,
    on_event: Callable[[TaskEvent], None],
) -> LocalRun:
    """Run ``spec`` once to its end; ``on_event`` sees every task start, its output and its end."""
    graph = DagGraph.from_spec(spec)
    tasks = {t.task_id: t for t in spec.tasks}
    run_id = f"test__{logical_date.isoformat()}"
    done: dict[str, asyncio.Future[Outcome]] = {}

    def finished(assignment: worker_pb2.Assignment, outcome: Outcome) -> None:
        done[assignment.attempt.attempt_id].set_result(outcome)

    def output(assignment: worker_pb2.Assignment, data: bytes) -> None:
        on_event(TaskEvent(assignment.task_id, TaskState.RUNNING, output=data))

    states: dict[str, TaskSnapshot] = {}
    results: dict[str, Any] = {}
    executor = AttemptExecutor(python_workers=1, on_done=finished, on_output=output)
    await executor.start()
    try:
        for _ in range(2 * len(graph.order) + 1):  # every step settles at least one task, or the run
            plan = plan_run(graph, states)
            for tid in plan.to_create:
                states[tid] = TaskSnapshot(TaskState.NONE)
            for tids, state in (
                (plan.to_skip, TaskState.SKIPPED),
                (plan.to_upstream_failed, TaskState.UPSTREAM_FAILED),
            ):
                for tid in tids:
                    states[tid] = TaskSnapshot(state)
                    on_event(TaskEvent(tid, state))
            if plan.run_state is not None:
                return LocalRun(run_id, plan.run_state, {t: s.state for t, s in states.items()}, results)
            for tid in plan.to_queue:
                assignment = _assignment(spec, tasks[tid], run_id, logical_date, conf, results)
                future = done[assignment.attempt.attempt_id] = asyncio.get_running_loop().create_future()
                on_event(TaskEvent(tid, TaskState.RUNNING))
                executor.submit(assignment)
                outcome = await future
                del done[assignment.attempt.attempt_id]
                result = json.loads(outcome.result_json) if outcome.result_json else None
                if outcome.succeeded and result is not None:
                    results[tid] = result
                state = (
                    TaskState.SKIPPED
                    if outcome.skipped
                    else TaskState.SUCCESS
                    if outcome.succeeded
                    else TaskState.FAILED
                )
                follow = _follow(result) if graph.nodes[tid].branch and outcome.succeeded else None
                states[tid] = TaskSnapshot(state, follow=follow)
                on_event(TaskEvent(tid, state, error=outcome.error))
        raise RuntimeError(f"the run of {spec.dag_id!r} did not settle: {states}")
    finally:
        await executor.close()


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
    run_id: str,
    logical_date: datetime,
    conf: Mapping[str, Any],
    results: Mapping[str, Any],
) -> worker_pb2.Assignment:
    """What a registry would send a worker for this task's first try."""
    attempt_id = str(uuid.uuid4())
    key = f"{spec.dag_id}/{run_id}/{task.task_id}"
    env = dict(task.env)
    env.update(
        {
            "SCHEDD_DAG_ID": spec.dag_id,
            "SCHEDD_RUN_ID": run_id,
            "SCHEDD_RUN_TYPE": "manual",
            "SCHEDD_TASK_ID": task.task_id,
            "SCHEDD_TRY_NUMBER": "1",
            "SCHEDD_ATTEMPT_ID": attempt_id,
            "SCHEDD_LOGICAL_DATE": logical_date.isoformat(),
            "SCHEDD_IDEMPOTENCY_KEY": key,
        }
    )
    upstream = {up: results[up] for up in task.upstream if up in results}
    assignment = worker_pb2.Assignment(
        attempt=worker_pb2.AttemptRef(task_instance_id=0, try_number=1, attempt_id=attempt_id),
        dag_id=spec.dag_id,
        run_id=run_id,
        task_id=task.task_id,
        logical_date=convert.ts(logical_date),
        env=env,
        idempotency_key=key,
        params=convert.struct(merged_params(spec, task, dict(conf))),
        upstream_results_json=json.dumps(upstream) if upstream else "",
        transactional=task.transactional,
    )
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
