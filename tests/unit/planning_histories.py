"""Random runs planned and applied step by step, for the property that an incremental plan
(``plan_run(focus=...)``) is the full plan: shared by the planner's tests with and without mapped tasks."""

from __future__ import annotations

from hypothesis import strategies as st

from schedd.v1 import resources_pb2 as pb
from schedd_core.graph import DagGraph
from schedd_core.planner import RunPlan, TaskSnapshot, plan_run
from schedd_core.states import TaskState as T
from tests.unit.helpers import dag_specs

#: The states of a run's task instances before a plan, and the keys that changed since the last one.
Steps = list[tuple[dict[str, TaskSnapshot], set[str]]]


def plan_as_the_leader(
    g: DagGraph, states: dict[str, TaskSnapshot], focus: set[str] | None = None
) -> RunPlan:
    """Plan, and plan again with the expanded lists' lengths when a mapped task asks for them (the
    mapped tasks here expand over literal lists only)."""
    p = plan_run(g, states, focus=focus)
    if not p.to_measure:
        return p
    lengths = {tid: [(s.name, s.literal_length) for s in g.nodes[tid].expand] for tid in g.mapped}
    return plan_run(g, states, focus=focus, map_lengths=lengths)


def _apply(states: dict[str, TaskSnapshot], p: RunPlan, draw: st.DrawFn) -> None:
    """What the store makes of a plan: ready tasks are queued or wait for a slot, the rest as planned."""
    for key in p.to_create:
        states[key] = TaskSnapshot(T.NONE)
    for key in p.to_remove:
        del states[key]
    for key in p.to_queue:
        states[key] = TaskSnapshot(T.QUEUED if draw(st.booleans()) else T.SCHEDULED)
    for key in p.to_skip:
        states[key] = TaskSnapshot(T.SKIPPED)
    for key in p.to_upstream_failed:
        states[key] = TaskSnapshot(T.UPSTREAM_FAILED)
    for key, _ in p.to_fail_unrun:
        states[key] = TaskSnapshot(T.FAILED)
    for key in p.to_schedule_retry:
        states[key] = TaskSnapshot(T.UP_FOR_RETRY)


@st.composite
def histories(draw: st.DrawFn, *, mapped: bool = False) -> tuple[DagGraph, Steps]:
    """A run planned and applied step by step, with workers changing task instances in between: the
    states before each plan and the keys whose instances changed since the previous one. With
    ``mapped``, some tasks are mapped over literal lists of 0 to 3 elements."""
    spec = draw(dag_specs(max_tasks=8 if mapped else 10, trigger_rules=True))
    for t in spec.tasks if mapped else ():
        if draw(st.booleans()):
            values = pb.Argument()
            values.literal.list_value.extend(list(range(draw(st.integers(0, 3)))))
            t.mapping.CopyFrom(pb.TaskMapping(expand=[pb.MappedArgument(name="x", values=values)]))
    g = DagGraph.from_spec(spec)
    states: dict[str, TaskSnapshot] = {}
    _apply(states, plan_as_the_leader(g, states), draw)
    steps = []
    for _ in range(draw(st.integers(1, 8))):
        changed: set[str] = set()
        for key in sorted(states):
            state = states[key].state
            if state is T.QUEUED and draw(st.booleans()):
                states[key] = TaskSnapshot(T.RUNNING)  # a claim: not reported to the leader
            elif state in (T.QUEUED, T.RUNNING) and draw(st.booleans()):
                states[key] = TaskSnapshot(draw(st.sampled_from([T.SUCCESS, T.FAILED, T.UP_FOR_RETRY])))
                changed.add(key)
        steps.append((dict(states), changed))
        _apply(states, plan_as_the_leader(g, states), draw)
    return g, steps


def assert_incremental_plans_are_full_plans(g: DagGraph, steps: Steps) -> None:
    for states, changed in steps:
        full = plan_as_the_leader(g, states)
        focused = plan_as_the_leader(g, states, focus=changed)
        waiting = {key for key, snap in states.items() if snap.state is T.SCHEDULED}
        assert set(focused.to_queue) <= set(full.to_queue)
        assert set(full.to_queue) - set(focused.to_queue) <= waiting
        for name in (
            "to_create",
            "to_remove",
            "to_skip",
            "to_upstream_failed",
            "to_fail_unrun",
            "to_schedule_retry",
            "to_fail",
            "run_state",
        ):
            assert getattr(focused, name) == getattr(full, name), name
