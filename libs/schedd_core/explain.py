"""Why a task instance is not running yet: a pure function from what the api read to sentences."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from schedd_core.graph import DagGraph
from schedd_core.planner import PAST_OK, TaskSnapshot, instances_of, upstream_counts
from schedd_core.sensor_wait import sensor_wait_reason
from schedd_core.states import RunState, TaskState
from schedd_core.triggers import Verdict, evaluate, evaluate_setups


@dataclass(frozen=True)
class ExplainFacts:
    task_id: str
    state: TaskState
    run_state: str
    paused: bool
    pool: str
    pool_slots: int
    pool_total: int | None
    pool_used: int
    dag_active: int
    task_active: int
    dag_running_runs: int
    waiting_ahead: int
    next_retry_at: datetime | None
    now: datetime
    try_number: int
    max_tries: int
    queue: str
    workers_for_queue: int
    #: For a depends_on_past task: the same task's state in the previous run (None: not held back).
    past_state: TaskState | None = None


def explain(graph: DagGraph, facts: ExplainFacts, tasks: Mapping[str, TaskSnapshot]) -> list[str]:
    """Reasons, most important first; never empty."""
    reasons: list[str] = []
    s = facts.state
    if s in (TaskState.SUCCESS, TaskState.FAILED, TaskState.SKIPPED, TaskState.UPSTREAM_FAILED):
        return [f"it is finished ({s.value}); clear it to run it again"]
    if s is TaskState.RUNNING:
        return ["it is running"]
    if facts.paused:
        reasons.append("its DAG is paused")
    if facts.run_state == RunState.QUEUED and graph.max_active_runs:
        reasons.append(
            f"its run waits to start: {facts.dag_running_runs} of max_active_runs={graph.max_active_runs} "
            "runs of the DAG are running"
        )
    if s is TaskState.UP_FOR_RETRY:
        when = (
            "at an unset time (the scheduler sets it next)"
            if facts.next_retry_at is None
            else (
                f"in {max(0.0, (facts.next_retry_at - facts.now).total_seconds()):.1f}s "
                f"({facts.next_retry_at.isoformat()})"
            )
        )
        reasons.append(f"try {facts.try_number} of {facts.max_tries} failed; it retries {when}")
    if s is TaskState.UP_FOR_RESCHEDULE:
        reasons.append(sensor_wait_reason(facts.try_number, facts.next_retry_at, facts.now))
    if s is TaskState.QUEUED:
        reasons.append(
            f"it is queued on queue {facts.queue!r}, waiting for a worker with a free slot"
            + ("" if facts.workers_for_queue else f" (no active worker serves queue {facts.queue!r})")
        )
    if s in (TaskState.NONE, TaskState.SCHEDULED):
        if facts.past_state is not None and facts.past_state not in PAST_OK:
            reasons.append(
                f"depends_on_past: the same task of the previous run is {facts.past_state.value}; it runs "
                "once that one succeeded or was skipped"
            )
        waiting = _upstream_reasons(graph, facts.task_id, tasks)
        reasons += waiting
        if not waiting or s is TaskState.SCHEDULED:
            reasons += _admission_reasons(graph, facts)
    return reasons or ["nothing holds it back: it should be queued at the next scheduling pass"]


def _upstream_reasons(graph: DagGraph, tid: str, tasks: Mapping[str, TaskSnapshot]) -> list[str]:
    node = graph.nodes[tid]
    if node.indirect_setups:
        setups = {u: (tasks[u].state if u in tasks else TaskState.NONE) for u in sorted(node.indirect_setups)}
        if evaluate_setups(upstream_counts(graph, node.indirect_setups, setups)) is not Verdict.READY:
            waiting = ", ".join(f"{u} ({v.value})" for u, v in setups.items() if v is not TaskState.SUCCESS)
            return [f"it is in the scope of setup tasks that have not succeeded: {waiting}"]
    instances = instances_of(graph, tasks)  # an expanded mapped upstream task counts per instance
    keys = [key for u in sorted(node.upstream) for key in instances.get(u) or (u,)]
    states = {key: (tasks[key].state if key in tasks else TaskState.NONE) for key in keys}
    verdict = evaluate(node.trigger_rule, upstream_counts(graph, node.upstream, states, instances))
    if verdict is Verdict.READY:
        return []
    pending = [
        f"{key} ({v.value})"
        for key, v in states.items()
        if v not in (TaskState.SUCCESS, TaskState.FAILED, TaskState.UPSTREAM_FAILED, TaskState.SKIPPED)
    ]
    more = f" and {len(pending) - _LISTED} more" if len(pending) > _LISTED else ""
    return [
        f"trigger rule {node.trigger_rule.value} is not met yet; waiting for upstream "
        + (", ".join(pending[:_LISTED]) + more if pending else "tasks")
    ]


#: Upstream task instances named in an explanation, at most.
_LISTED = 10


def _admission_reasons(graph: DagGraph, f: ExplainFacts) -> list[str]:
    node = graph.nodes[f.task_id]
    reasons = []
    if f.pool_total is None:
        reasons.append(f"pool {f.pool!r} does not exist")
    elif f.pool_slots > f.pool_total:
        reasons.append(f"it needs {f.pool_slots} slots but pool {f.pool!r} has only {f.pool_total}")
    elif f.pool_total - f.pool_used < f.pool_slots:
        reasons.append(
            f"pool {f.pool!r} is full: {f.pool_used} of {f.pool_total} slots taken, it needs {f.pool_slots}"
        )
    if f.waiting_ahead:
        reasons.append(
            f"{f.waiting_ahead} task instances wait ahead of it in pool {f.pool!r} "
            "(higher priority or older logical date)"
        )
    if graph.max_active_tasks and f.dag_active >= graph.max_active_tasks:
        reasons.append(f"its DAG runs {f.dag_active} tasks, its max_active_tasks is {graph.max_active_tasks}")
    if node.max_active_instances and f.task_active >= node.max_active_instances:
        reasons.append(
            f"{f.task_active} instances of this task run, its max_active_instances is "
            f"{node.max_active_instances}"
        )
    return reasons
