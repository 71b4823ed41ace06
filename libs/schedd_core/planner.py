"""Deciding what happens next in one DAG run: a pure function from a snapshot to a plan.

The planner never reads a clock or a database. It walks the run's tasks in
topological order over *projected* states, so a failure propagates
``upstream_failed`` down a whole chain in one pass. The plan says which task
instances to queue, skip or mark upstream_failed, and whether the run is
finished; the store applies it in one fenced transaction. A task inside a setup task's scope is
held by that setup (Airflow's setup constraint, ``schedd_core.triggers.evaluate_setups``) before its
own trigger rule is asked; the run's state is decided by its leaves other than teardowns.

A task with ``depends_on_past`` is ready only once the same task of the DAG's previous run
(by logical date) succeeded or was skipped; the caller passes those states (``past``). It
waits, in its state, while that task has not finished (or has no task instance yet in an
unfinished previous run), and for good when it failed: clearing or marking the previous one
releases it. A first run, or a previous run that never had the task, does not hold it back.

A mapped task (``schedd_core.mapping``) is planned as one task until its trigger rule lets it run:
then its placeholder (map index -1) is replaced by one task instance per element, all queued in the
same plan, once the caller has measured its expanded arguments (``map_lengths``; a plan that needs
them lists the task in ``to_measure``, and the caller plans again with them). Every instance then has
its own retries; all instances get the same trigger-rule verdict, and downstream tasks count each
instance as one upstream task instance (as Airflow's trigger rules do).

Not decided here: pool slots, concurrency limits and priorities across runs
(see ``schedd_core.admission``), and when retries are due (the caller passes
``retry_due``).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from schedd_core.graph import DagGraph
from schedd_core.limits import DEFAULT_MAX_MAP_LENGTH
from schedd_core.mapping import ExpansionError, expansion_length, instance_key, task_of
from schedd_core.states import TASK_FINISHED, WAITING_TO_RUN, RunState, TaskState
from schedd_core.triggers import UpstreamCounts, Verdict, evaluate, evaluate_setups


class TaskSnapshot(NamedTuple):
    """What the planner knows of one task instance (a tuple: the scheduler builds thousands a pass)."""

    state: TaskState
    #: UP_FOR_RETRY and its retry time has come (UP_FOR_RESCHEDULE: its next poke time has).
    retry_due: bool = False
    #: UP_FOR_RETRY and no retry time was set yet.
    retry_unscheduled: bool = False
    #: A successful branch task: the downstream task ids it chose to follow.
    follow: frozenset[str] | None = None


@dataclass
class RunPlan:
    #: Ready to run: dependencies met (or retry due). Pools and limits decide when they queue.
    to_queue: list[str] = field(default_factory=list)
    #: UP_FOR_RETRY task instances that need their retry time set.
    to_schedule_retry: list[str] = field(default_factory=list)
    #: Running task instances to fail (the run timed out).
    to_fail: list[str] = field(default_factory=list)
    to_skip: list[str] = field(default_factory=list)
    to_upstream_failed: list[str] = field(default_factory=list)
    #: Tasks in the run's version that have no task instance yet (and a mapped task's new instances).
    to_create: list[str] = field(default_factory=list)
    #: Mapped tasks ready to expand whose expanded arguments' lengths the caller must measure (and plan
    #: again with ``map_lengths``).
    to_measure: list[str] = field(default_factory=list)
    #: Placeholders of mapped tasks expanded by this plan: they are replaced by their instances.
    to_remove: list[str] = field(default_factory=list)
    #: Task instances that fail without running, with the reason (a mapped task that cannot expand).
    to_fail_unrun: list[tuple[str, str]] = field(default_factory=list)
    #: Set when the run is finished after this plan is applied.
    run_state: RunState | None = None

    @property
    def empty(self) -> bool:
        return not (
            self.to_queue
            or self.to_skip
            or self.to_upstream_failed
            or self.to_create
            or self.to_schedule_retry
            or self.to_fail
            or self.to_fail_unrun
            or self.run_state
        )


_READY_FROM = frozenset({TaskState.NONE, TaskState.SCHEDULED})


#: What the same task of the previous run must have become for a depends_on_past task to run.
PAST_OK = frozenset({TaskState.SUCCESS, TaskState.SKIPPED})


#: Per mapped task: per expanded argument, its name and its list's length (None: not a list).
MapLengths = Mapping[str, Sequence[tuple[str, int | None]]]


def plan_run(
    graph: DagGraph,
    tasks: Mapping[str, TaskSnapshot],
    past: Mapping[str, TaskState] | None = None,
    focus: Collection[str] | None = None,
    *,
    map_lengths: MapLengths | None = None,
    max_map_length: int = DEFAULT_MAX_MAP_LENGTH,
) -> RunPlan:
    """Plan the next step of one run.

    ``tasks`` holds the current state of every task instance of the run, by key (the task id, or
    ``task_id[i]`` for a mapped task's instance). Task ids of the graph missing from ``tasks`` are
    planned as if in state NONE and listed in ``to_create``. ``past`` holds, for the tasks with
    ``depends_on_past``, the state of the same task in the previous run (absent: nothing holds the
    task back). ``map_lengths`` holds the lengths of the expanded arguments of the mapped tasks listed
    in an earlier plan's ``to_measure``; a mapped task expands into at most ``max_map_length``
    instances (more fails its placeholder, saying why).

    ``focus`` plans incrementally: it names the task instances (keys) that changed since the run's
    last plan was applied. Only their tasks, the tasks directly downstream of them, the tasks downstream of
    any task whose state this plan changes, the tasks without a task instance and those waiting on
    their past are evaluated; every other task keeps its state. The result is the full plan's, except
    that a task waiting for a pool slot (SCHEDULED) that none of this touches is not listed as ready
    again (admission finds those in their pools). ``tests/unit/test_planner.py`` checks this
    equivalence on random DAGs.
    """
    plan = RunPlan()
    projected: dict[str, TaskState] = {}
    instances = instances_of(graph, tasks)
    affected = _affected(graph, tasks, focus) if focus is not None else None
    for tid in graph.order:
        keys = instances.get(tid) or (tid,)
        if affected is not None and tid not in affected:
            for key in keys:
                projected[key] = tasks[key].state  # tasks without one are affected
            continue
        verdict: Verdict | None = None
        moved = False
        for key in keys:
            snap = tasks.get(key)
            if snap is None:
                plan.to_create.append(key)
                snap = _NEW
            state = snap.state
            if state is TaskState.UP_FOR_RETRY and snap.retry_unscheduled:
                plan.to_schedule_retry.append(key)
            elif state in (TaskState.UP_FOR_RETRY, TaskState.UP_FOR_RESCHEDULE) and snap.retry_due:
                plan.to_queue.append(key)
                state = TaskState.QUEUED
            elif state in _READY_FROM:
                if verdict is None:
                    verdict = _verdict(graph, tid, projected, tasks, instances)
                if verdict is Verdict.READY and not _past_allows(graph, tid, past):
                    pass  # waits for the same task of the previous run
                elif verdict is Verdict.READY and key == tid and graph.nodes[tid].expand:
                    state = _expand(graph, tid, plan, projected, instances, map_lengths, max_map_length)
                elif verdict is Verdict.READY:
                    plan.to_queue.append(key)
                    state = TaskState.QUEUED
                elif verdict is Verdict.SKIP:
                    plan.to_skip.append(key)
                    state = TaskState.SKIPPED
                elif verdict is Verdict.UPSTREAM_FAILED:
                    plan.to_upstream_failed.append(key)
                    state = TaskState.UPSTREAM_FAILED
            projected[key] = state
            moved = moved or state is not snap.state
        if affected is not None and moved:
            affected.update(graph.nodes[tid].downstream, graph.nodes[tid].scope)
    plan.run_state = run_outcome(graph, projected, instances)
    return plan


_NEW = TaskSnapshot(TaskState.NONE)


def instances_of(graph: DagGraph, tasks: Mapping[str, TaskSnapshot]) -> dict[str, list[str]]:
    """The keys of the expanded mapped tasks' instances, by task id, in map index order (empty for a
    graph without mapped tasks). A placeholder the leader still remembers is ignored once its
    instances exist."""
    if not graph.mapped:
        return {}
    found: dict[str, list[tuple[int, str]]] = {}
    for key in tasks:
        if key[-1] == "]":
            tid, _, index = key[:-1].rpartition("[")
            found.setdefault(tid, []).append((int(index), key))
    return {tid: [key for _, key in sorted(pairs)] for tid, pairs in found.items()}


def _expand(
    graph: DagGraph,
    tid: str,
    plan: RunPlan,
    projected: dict[str, TaskState],
    instances: dict[str, list[str]],
    map_lengths: MapLengths | None,
    max_map_length: int,
) -> TaskState:
    """Expand a ready mapped task: its instances are created and queued, its placeholder removed (or
    skipped, with no elements; or failed, when its arguments cannot expand). Returns the
    placeholder's projected state."""
    lengths = None if map_lengths is None else map_lengths.get(tid)
    if lengths is None:
        plan.to_measure.append(tid)
        return TaskState.NONE
    try:
        count = expansion_length(lengths, max_map_length)
    except ExpansionError as exc:
        plan.to_fail_unrun.append((tid, str(exc)))
        return TaskState.FAILED
    if count == 0:
        plan.to_skip.append(tid)
        return TaskState.SKIPPED
    keys = [instance_key(tid, i) for i in range(count)]
    plan.to_remove.append(tid)
    plan.to_create += keys
    plan.to_queue += keys
    for key in keys:
        projected[key] = TaskState.QUEUED
    instances[tid] = keys
    return TaskState.QUEUED


def _affected(graph: DagGraph, tasks: Mapping[str, TaskSnapshot], focus: Collection[str]) -> set[str]:
    affected = {tid for tid in (task_of(key) for key in focus) if tid in graph.nodes}
    for tid in list(affected):
        affected.update(graph.nodes[tid].downstream, graph.nodes[tid].scope)
    affected.update(graph.past_dependent)
    if graph.mapped:
        # a mapped task is present with its placeholder or its instances
        affected.update(tid for tid in graph.order if tid not in tasks and f"{tid}[0]" not in tasks)
    elif len(tasks) < len(graph.nodes):
        affected.update(tid for tid in graph.order if tid not in tasks)
    return affected


def _past_allows(graph: DagGraph, tid: str, past: Mapping[str, TaskState] | None) -> bool:
    if not graph.nodes[tid].depends_on_past or past is None or tid not in past:
        return True
    return past[tid] in PAST_OK


def _excluded_by_branch(
    graph: DagGraph, tid: str, states: Mapping[str, TaskState], tasks: Mapping[str, TaskSnapshot]
) -> bool:
    """Whether a successful upstream branch task chose not to follow ``tid``."""
    for up in graph.nodes[tid].upstream:
        if graph.nodes[up].branch and states[up] is TaskState.SUCCESS:
            snap = tasks.get(up)
            if snap is not None and snap.follow is not None and tid not in snap.follow:
                return True
    return False


def _verdict(
    graph: DagGraph,
    tid: str,
    states: Mapping[str, TaskState],
    tasks: Mapping[str, TaskSnapshot],
    instances: Mapping[str, Sequence[str]],
) -> Verdict:
    """Skipped when an upstream branch task did not follow it; otherwise the setup constraint over the
    task's indirect setups first, then its trigger rule."""
    if _excluded_by_branch(graph, tid, states, tasks):
        return Verdict.SKIP
    node = graph.nodes[tid]
    if node.indirect_setups:
        verdict = evaluate_setups(upstream_counts(graph, node.indirect_setups, states))
        if verdict is not Verdict.READY:
            return verdict
    return evaluate(node.trigger_rule, upstream_counts(graph, node.upstream, states, instances))


def upstream_counts(
    graph: DagGraph,
    task_ids: Collection[str],
    states: Mapping[str, TaskState],
    instances: Mapping[str, Sequence[str]] | None = None,
) -> UpstreamCounts:
    """The counts of ``task_ids`` by state for the trigger rules (removed tasks left out: a removed
    task no longer constrains its downstream tasks; a task without a state counts as not done). An
    expanded mapped task counts once per instance (``instances``: their keys by task id)."""
    success = failed = upstream_failed = skipped = removed = setups = setup_success = setup_skipped = 0
    total = 0
    for up in task_ids:
        setup = graph.nodes[up].setup
        for key in (instances.get(up) if instances else None) or (up,):
            total += 1
            s = states.get(key, TaskState.NONE)
            if s is TaskState.REMOVED:
                removed += 1
                continue
            setups += setup
            if s is TaskState.SUCCESS:
                success += 1
                setup_success += setup
            elif s is TaskState.FAILED:
                failed += 1
            elif s is TaskState.UPSTREAM_FAILED:
                failed += 1
                upstream_failed += 1
            elif s is TaskState.SKIPPED:
                skipped += 1
                setup_skipped += setup
    return UpstreamCounts(
        total=total - removed,
        success=success,
        failed=failed,
        skipped=skipped,
        upstream_failed=upstream_failed,
        setups=setups,
        setup_success=setup_success,
        setup_skipped=setup_skipped,
    )


def run_outcome(
    graph: DagGraph, states: Mapping[str, TaskState], instances: Mapping[str, Sequence[str]] | None = None
) -> RunState | None:
    """The final state of a run whose tasks are all finished, else None.

    As in Airflow, the leaves decide: the run fails when any leaf (any instance of a mapped leaf)
    failed or is upstream_failed, and succeeds otherwise.
    """
    if any(states.get(key, TaskState.NONE) not in TASK_FINISHED for key in _keys_of(graph.order, instances)):
        return None
    failed = any(
        states.get(key) in (TaskState.FAILED, TaskState.UPSTREAM_FAILED)
        for key in _keys_of(graph.leaves, instances)
    )
    return RunState.FAILED if failed else RunState.SUCCESS


def _keys_of(task_ids: Iterable[str], instances: Mapping[str, Sequence[str]] | None) -> Iterator[str]:
    """The task instance keys of ``task_ids``: the instances of an expanded mapped task, else the id."""
    if not instances:
        yield from task_ids
        return
    for tid in task_ids:
        yield from instances.get(tid) or (tid,)


def plan_timeout(graph: DagGraph, tasks: Mapping[str, TaskSnapshot]) -> RunPlan:
    """The run ran past its timeout: it fails; running attempts fail (their workers are told to stop
    them), and every task that has not run is skipped."""
    plan = RunPlan(run_state=RunState.FAILED)
    for key in _keys_of(graph.order, instances_of(graph, tasks)):
        snap = tasks.get(key)
        if snap is None:
            plan.to_create.append(key)
            plan.to_skip.append(key)
        elif snap.state is TaskState.RUNNING:
            plan.to_fail.append(key)
        elif snap.state in WAITING_TO_RUN:
            plan.to_skip.append(key)
    return plan
