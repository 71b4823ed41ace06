"""Successor hand-offs: which task runs next, decided by the leader before its upstream task ends.

In a chain, the leader's usual step after a success (read the result, plan, queue the next task,
then a registry claims it) costs a transaction and a process hop of its own. A *hand-off* is the
leader's standing decision, written ahead: "when ``source`` succeeds, ``target`` may run at once,
provided ``after`` all succeeded". The registry that applies ``source``'s success queues and claims
``target`` for the same worker in the same transaction (``schedd_store.handoffs``), re-checking
everything that could have changed since (the fence, the run's control version, the states, the
pool) in SQL. Whatever a hand-off does not cover goes the usual way: the leader plans it.

This module is pure: :func:`successor` says which downstream task a task instance hands off to,
given the run's states; :func:`plan_handoffs` lists the hand-offs a pass should write.

A task hands off only to a downstream task whose start needs no decision beyond "every upstream
task succeeded" and no limit beyond its upstream's slot: trigger rule ``all_success``, not mapped,
not ``depends_on_past``, no per-task limit (``max_active_instances``), no setup or teardown role,
no branch upstream, every upstream task not mapped, in the same pool as its upstream and needing
no more of its slots. Of several such downstream tasks, the one with the highest priority weight
(then the first by task id) is the hand-off; the others queue as usual.

A hand-off to its source's only downstream task is *quiet*: once it is used, nothing else waits on
that success, so the leader may look at the run a little later (``channels.RUNS_HANDED_OFF``) instead
of planning it at once; a chain's links then cost the leader no pass each.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import NamedTuple

from schedd_core.graph import DagGraph, TaskNode
from schedd_core.pass_plan import PlannedRun
from schedd_core.planner import TaskSnapshot
from schedd_core.states import TaskState
from schedd_core.triggers import TriggerRule

#: States of a task instance that may still succeed: a hand-off from it may still be used.
_MAY_SUCCEED = frozenset(
    {
        TaskState.NONE,
        TaskState.SCHEDULED,
        TaskState.QUEUED,
        TaskState.RUNNING,
        TaskState.UP_FOR_RETRY,
        TaskState.UP_FOR_RESCHEDULE,
    }
)
#: States of a task instance that a hand-off may start.
_STARTABLE = frozenset({TaskState.NONE, TaskState.SCHEDULED})


class Handoff(NamedTuple):
    """When ``source`` succeeds, ``target`` may start, provided every one of ``after`` succeeded
    (task instance keys of run ``run_pk``, planned at the run's ``control_version``). ``quiet``:
    ``target`` is ``source``'s only downstream task."""

    run_pk: int
    control_version: int
    source: str
    target: str
    after: tuple[str, ...]
    quiet: bool


def _can_receive(graph: DagGraph, node: TaskNode, source: TaskNode) -> bool:
    """Whether ``node`` may be started by a hand-off from ``source`` (static conditions only)."""
    return (
        node.trigger_rule is TriggerRule.ALL_SUCCESS
        and not node.expand
        and not node.depends_on_past
        and node.max_active_instances == 0
        and not (node.setup or node.teardown or node.indirect_setups)
        and node.pool == source.pool
        and node.pool_slots <= source.pool_slots
        and not any(graph.nodes[up].branch or graph.nodes[up].expand for up in node.upstream)
    )


def successor(
    graph: DagGraph, states: Mapping[str, TaskState], source: str
) -> tuple[str, tuple[str, ...]] | None:
    """The downstream task ``source`` hands off to, with the other upstream tasks it waits for, or
    None. ``states`` holds the run's task instance states by key (a task without one: NONE)."""
    return _successor(graph, lambda key: states.get(key, TaskState.NONE), source)


def _successor(
    graph: DagGraph, state_of: Callable[[str], TaskState], source: str
) -> tuple[str, tuple[str, ...]] | None:
    node = graph.nodes.get(source)
    if node is None or node.expand or node.branch or node.setup or node.teardown or not node.downstream:
        return None
    if state_of(source) not in _MAY_SUCCEED:
        return None
    best: tuple[int, str] | None = None
    for tid in node.downstream:
        down = graph.nodes[tid]
        if state_of(tid) not in _STARTABLE or not _can_receive(graph, down, node):
            continue
        if any(state_of(up) is not TaskState.SUCCESS for up in down.upstream - {source}):
            continue
        rank = (-down.priority_weight, tid)
        if best is None or rank < best:
            best = rank
    if best is None:
        return None
    target = best[1]
    return target, tuple(sorted(graph.nodes[target].upstream - {source}))


def sources_to_review(graph: DagGraph, changed: Iterable[str]) -> set[str]:
    """The task instances whose hand-off may differ after ``changed`` moved: each of them, and every
    upstream task of their downstream tasks (a success may complete another task's hand-off)."""
    review: set[str] = set()
    for key in changed:
        node = graph.nodes.get(key)
        if node is None:
            continue
        review.add(key)
        for tid in node.downstream:
            review.update(graph.nodes[tid].upstream)
    return review


def _states_of(tasks: Mapping[str, TaskSnapshot]) -> Callable[[str], TaskState]:
    """The state of a task instance by key, as read (NONE for one that does not exist yet)."""

    def state_of(key: str) -> TaskState:
        snap = tasks.get(key)
        return TaskState.NONE if snap is None else snap.state

    return state_of


def plan_handoffs(
    planned: Iterable[PlannedRun], written: Mapping[int, Mapping[str, str] | None]
) -> list[Handoff]:
    """The hand-offs to write for the runs ``planned``: for each task instance that may still
    succeed, its :func:`successor`, unless ``written`` (by run: source key -> target key, what the
    leader wrote in this term; None for a run it has not reviewed in full in this term) says it is
    in place. A run read in full, or not reviewed yet, is reviewed in full; an incremental one only
    where its changes reach (:func:`sources_to_review`), so a pass over a large run costs what
    changed. Runs of paused DAGs and finished runs get none. States are those the pass read (before
    its own writes): the registry checks at the moment of use what may have changed since."""
    handoffs: list[Handoff] = []
    for run, graph, plan in planned:
        if run.paused or run.state not in ("queued", "running") or plan.run_state is not None:
            continue
        # A run read in full may have changed in any way (a new term, a clear): review all of it.
        known = written.get(run.pk) if run.changed is not None else None
        review: Iterable[str] = graph.order if known is None else sources_to_review(graph, run.changed or ())
        state_of = _states_of(run.tasks)
        for source in review:
            found = _successor(graph, state_of, source)
            if found is not None and (known is None or known.get(source) != found[0]):
                target, after = found
                quiet = graph.nodes[source].downstream == {target}
                handoffs.append(Handoff(run.pk, run.control_version, source, target, after, quiet))
    return handoffs
