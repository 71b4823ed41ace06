"""A DAG version's graph, prepared once and reused for every run of that version."""

from __future__ import annotations

import functools
import graphlib
from collections.abc import Sequence
from dataclasses import dataclass

from schedd.v1 import resources_pb2 as pb
from schedd_core.mapping_spec import ExpandSource, expand_sources
from schedd_core.retry import RetryPolicy
from schedd_core.triggers import TriggerRule


def upstream_map(spec: pb.DagSpec) -> dict[str, set[str]]:
    """task id -> ids of its direct upstream tasks."""
    return {t.task_id: set(t.upstream) for t in spec.tasks}


def downstream_map(spec: pb.DagSpec) -> dict[str, set[str]]:
    """task id -> ids of its direct downstream tasks."""
    result: dict[str, set[str]] = {t.task_id: set() for t in spec.tasks}
    for t in spec.tasks:
        for up in t.upstream:
            result[up].add(t.task_id)
    return result


@dataclass(frozen=True)
class TaskNode:
    task_id: str
    upstream: frozenset[str]
    downstream: frozenset[str]
    trigger_rule: TriggerRule
    priority_weight: int
    pool: str
    pool_slots: int
    queue: str
    max_tries: int
    retry: RetryPolicy
    branch: bool
    #: At most this many instances of the task run at once across runs; 0 for no limit.
    max_active_instances: int
    #: Events ("success", "failure", "retry") the task has callbacks for.
    callback_events: tuple[str, ...] = ()
    #: Runs only once the same task of the DAG's previous run succeeded or was skipped.
    depends_on_past: bool = False
    setup: bool = False
    teardown: bool = False
    #: Setup tasks whose scope holds this task but which are not its direct upstream tasks (Airflow's
    #: "relevant" setups: ancestors that have no teardown or a teardown downstream of this task). The
    #: task runs only once they all succeeded (``schedd_core.triggers.evaluate_setups``).
    indirect_setups: frozenset[str] = frozenset()
    #: For a setup task: the tasks that have it among their ``indirect_setups``.
    scope: frozenset[str] = frozenset()
    #: For a mapped task: the arguments it expands over (``schedd_core.mapping``); empty otherwise.
    expand: tuple[ExpandSource, ...] = ()


@dataclass(frozen=True)
class DagGraph:
    """Immutable view of one DAG version: tasks in topological order with their edges and options."""

    dag_id: str
    order: tuple[str, ...]
    nodes: dict[str, TaskNode]
    #: The tasks whose states decide the run's: as in Airflow, the tasks that are not teardowns and
    #: have no downstream tasks other than teardowns (the plain leaves when no task is such).
    leaves: frozenset[str]
    #: 0 means no limit / no timeout.
    max_active_runs: int = 0
    max_active_tasks: int = 0
    run_timeout: float = 0.0
    #: Events ("success", "failure") the DAG has run-level callbacks for.
    run_callback_events: tuple[str, ...] = ()

    @functools.cached_property
    def past_dependent(self) -> frozenset[str]:
        """The tasks with ``depends_on_past``."""
        return frozenset(tid for tid, node in self.nodes.items() if node.depends_on_past)

    @functools.cached_property
    def mapped(self) -> frozenset[str]:
        """The mapped tasks."""
        return frozenset(tid for tid, node in self.nodes.items() if node.expand)

    @classmethod
    def from_spec(
        cls, spec: pb.DagSpec, *, default_pool: str = "default_pool", default_queue: str = "default"
    ) -> DagGraph:
        ups = upstream_map(spec)
        downs = downstream_map(spec)
        order = tuple(graphlib.TopologicalSorter(ups).static_order())
        weights = _effective_weights(spec, ups, downs, order)
        setups = _indirect_setups(spec, ups, downs, order)
        nodes = {
            t.task_id: TaskNode(
                task_id=t.task_id,
                upstream=frozenset(ups[t.task_id]),
                downstream=frozenset(downs[t.task_id]),
                trigger_rule=TriggerRule.from_proto(t.trigger_rule),
                priority_weight=weights[t.task_id],
                pool=t.pool or default_pool,
                pool_slots=t.pool_slots or 1,
                queue=t.queue or default_queue,
                max_tries=t.retries + 1,
                retry=RetryPolicy.from_spec(t),
                branch=t.branch,
                max_active_instances=t.max_active_instances,
                callback_events=_events(t.on_success, t.on_failure, t.on_retry),
                depends_on_past=t.depends_on_past,
                setup=t.setup,
                teardown=t.teardown,
                indirect_setups=setups.get(t.task_id, frozenset()),
                scope=frozenset(tid for tid, of in setups.items() if t.task_id in of)
                if t.setup
                else frozenset(),
                expand=expand_sources(t),
            )
            for t in spec.tasks
        }
        teardowns = {t.task_id for t in spec.tasks if t.teardown}
        leaves = frozenset(
            tid for tid, d in downs.items() if tid not in teardowns and d <= teardowns
        ) or frozenset(tid for tid, d in downs.items() if not d)
        run_timeout = (
            spec.dagrun_timeout.ToTimedelta().total_seconds() if spec.HasField("dagrun_timeout") else 0.0
        )
        return cls(
            dag_id=spec.dag_id,
            order=order,
            nodes=nodes,
            leaves=leaves,
            max_active_runs=spec.max_active_runs,
            max_active_tasks=spec.max_active_tasks,
            run_timeout=run_timeout,
            run_callback_events=_events(spec.on_success, spec.on_failure, ()),
        )


def _events(success: Sequence[object], failure: Sequence[object], retry: Sequence[object]) -> tuple[str, ...]:
    named = (("success", success), ("failure", failure), ("retry", retry))
    return tuple(name for name, callbacks in named if len(callbacks))


def _indirect_setups(
    spec: pb.DagSpec, ups: dict[str, set[str]], downs: dict[str, set[str]], order: tuple[str, ...]
) -> dict[str, frozenset[str]]:
    """Per task that is not a teardown, its relevant setups that are not direct upstream tasks
    (Airflow's ``get_upstreams_only_setups``); empty in a DAG without setup tasks."""
    setups = {t.task_id for t in spec.tasks if t.setup}
    if not setups:
        return {}
    teardowns = {t.task_id for t in spec.tasks if t.teardown}
    reach_up = _closure(order, ups)
    reach_down = _closure(reversed(order), downs)
    result: dict[str, frozenset[str]] = {}
    for tid in order:
        if tid in teardowns:
            continue
        below = reach_down[tid] & teardowns
        relevant = {
            s for s in reach_up[tid] & setups if not (downs[s] & teardowns) or downs[s] & teardowns & below
        }
        if relevant - ups[tid]:
            result[tid] = frozenset(relevant - ups[tid])
    return result


def _effective_weights(
    spec: pb.DagSpec, ups: dict[str, set[str]], downs: dict[str, set[str]], order: tuple[str, ...]
) -> dict[str, int]:
    """Priority per task after its weight rule.

    Own weight plus the weights of all downstream tasks (the default) or all upstream tasks.
    """
    own = {t.task_id: (t.priority_weight or 1) for t in spec.tasks}
    rule = {t.task_id: t.weight_rule for t in spec.tasks}
    reach_down = _closure(reversed(order), downs)
    reach_up = _closure(order, ups)
    result: dict[str, int] = {}
    for tid in order:
        if rule[tid] == pb.WEIGHT_RULE_ABSOLUTE:
            result[tid] = own[tid]
        elif rule[tid] == pb.WEIGHT_RULE_UPSTREAM:
            result[tid] = own[tid] + sum(own[u] for u in reach_up[tid])
        else:
            result[tid] = own[tid] + sum(own[d] for d in reach_down[tid])
    return result


def _closure(order: object, edges: dict[str, set[str]]) -> dict[str, set[str]]:
    """For each node, every node reachable along ``edges``; ``order`` visits targets before sources."""
    reach: dict[str, set[str]] = {}
    for node in order:  # type: ignore[attr-defined]
        acc: set[str] = set()
        for nxt in edges[node]:
            acc.add(nxt)
            acc |= reach[nxt]
        reach[node] = acc
    return reach
