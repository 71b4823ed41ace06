"""plan_run: what a run does next, given the states of its task instances."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from schedd.v1 import resources_pb2 as pb
from schedd_core.graph import DagGraph
from schedd_core.planner import RunPlan, TaskSnapshot, plan_run, run_outcome
from schedd_core.states import TASK_FINISHED, RunState, TaskState
from schedd_core.triggers import UpstreamCounts, Verdict, evaluate
from tests.unit.helpers import dag_specs, graph, snaps, task
from tests.unit.planning_histories import Steps, assert_incremental_plans_are_full_plans, histories

T = TaskState
FAILED_LIKE = (T.FAILED, T.UPSTREAM_FAILED)


def plan(g: DagGraph, states: dict[str, TaskState], *, retry_due: frozenset[str] = frozenset()) -> RunPlan:
    return plan_run(g, snaps(states, retry_due=retry_due))


def diamond() -> DagGraph:
    return graph(task("a"), task("b", "a"), task("c", "a"), task("d", "b", "c"))


def chain(n: int) -> DagGraph:
    return graph(*(task(f"t{i}", *([f"t{i - 1}"] if i else [])) for i in range(n)))


# --- the diamond, step by step --------------------------------------------------------------------


def test_diamond_new_run_creates_every_task_and_queues_the_root() -> None:
    g = diamond()
    p = plan(g, {})
    assert p.to_create == list(g.order)
    assert sorted(p.to_create) == ["a", "b", "c", "d"]
    assert p.to_queue == ["a"]
    assert (p.to_skip, p.to_upstream_failed, p.run_state) == ([], [], None)


@pytest.mark.parametrize("root", [T.QUEUED, T.RUNNING])
def test_diamond_waits_while_the_root_is_in_flight(root: TaskState) -> None:
    p = plan(diamond(), {"a": root, "b": T.NONE, "c": T.NONE, "d": T.NONE})
    assert p.empty
    assert p == RunPlan()


def test_diamond_root_success_queues_both_branches() -> None:
    p = plan(diamond(), {"a": T.SUCCESS, "b": T.NONE, "c": T.NONE, "d": T.NONE})
    assert sorted(p.to_queue) == ["b", "c"]
    assert not p.to_create
    assert p.run_state is None


@pytest.mark.parametrize("other", [T.NONE, T.QUEUED, T.RUNNING, T.UP_FOR_RETRY])
def test_diamond_join_waits_for_the_slower_branch(other: TaskState) -> None:
    p = plan(diamond(), {"a": T.SUCCESS, "b": T.SUCCESS, "c": other, "d": T.NONE})
    assert "d" not in p.to_queue
    assert p.to_queue == (["c"] if other is T.NONE else [])
    assert p.run_state is None


def test_diamond_join_queued_when_both_branches_succeeded() -> None:
    p = plan(diamond(), {"a": T.SUCCESS, "b": T.SUCCESS, "c": T.SUCCESS, "d": T.NONE})
    assert p.to_queue == ["d"]
    assert p.run_state is None


def test_diamond_finishes_when_the_join_succeeded() -> None:
    p = plan(diamond(), {"a": T.SUCCESS, "b": T.SUCCESS, "c": T.SUCCESS, "d": T.SUCCESS})
    assert p.run_state is RunState.SUCCESS
    assert (p.to_queue, p.to_skip, p.to_upstream_failed, p.to_create) == ([], [], [], [])
    assert not p.empty  # a finished run is still something to apply


def test_diamond_one_branch_failing_fails_the_join_and_the_run_when_the_other_is_done() -> None:
    p = plan(diamond(), {"a": T.SUCCESS, "b": T.FAILED, "c": T.RUNNING, "d": T.NONE})
    assert p.to_upstream_failed == ["d"]  # all_success decides at once
    assert p.run_state is None  # c is still running
    p = plan(diamond(), {"a": T.SUCCESS, "b": T.FAILED, "c": T.SUCCESS, "d": T.UPSTREAM_FAILED})
    assert p.run_state is RunState.FAILED


# --- propagation in one pass ----------------------------------------------------------------------


def test_failure_propagates_down_a_whole_chain_in_one_pass() -> None:
    g = chain(6)
    p = plan(g, {"t0": T.FAILED} | {f"t{i}": T.NONE for i in range(1, 6)})
    assert p.to_upstream_failed == ["t1", "t2", "t3", "t4", "t5"]
    assert p.to_queue == []
    assert p.run_state is RunState.FAILED


def test_failure_propagates_through_tasks_not_created_yet() -> None:
    p = plan(chain(4), {"t0": T.SUCCESS, "t1": T.FAILED})
    assert p.to_create == ["t2", "t3"]
    assert p.to_upstream_failed == ["t2", "t3"]
    assert p.run_state is RunState.FAILED


def test_failure_does_not_touch_an_independent_branch() -> None:
    g = graph(task("a"), task("b", "a"), task("x"), task("y", "x"))
    p = plan(g, {"a": T.FAILED, "b": T.NONE, "x": T.SUCCESS, "y": T.NONE})
    assert p.to_upstream_failed == ["b"]
    assert p.to_queue == ["y"]
    assert p.run_state is None


def test_skip_propagates_down_a_chain_and_the_run_succeeds() -> None:
    p = plan(chain(4), {"t0": T.SKIPPED, "t1": T.NONE, "t2": T.NONE, "t3": T.NONE})
    assert p.to_skip == ["t1", "t2", "t3"]
    assert p.run_state is RunState.SUCCESS  # skipped leaves do not fail a run


def test_skip_stops_at_trigger_rules_that_tolerate_it() -> None:
    g = graph(
        task("a"),
        task("b", "a"),
        task("nf", "b", trigger_rule=pb.TRIGGER_RULE_NONE_FAILED),
        task("min1", "b", trigger_rule=pb.TRIGGER_RULE_NONE_FAILED_MIN_ONE_SUCCESS),
        task("after", "nf"),
    )
    p = plan(g, {"a": T.SKIPPED, "b": T.NONE, "nf": T.NONE, "min1": T.NONE, "after": T.NONE})
    assert sorted(p.to_skip) == ["b", "min1"]
    assert p.to_queue == ["nf"]
    assert p.run_state is None


def test_upstream_failed_counts_as_failed_downstream() -> None:
    # a failed -> b upstream_failed -> c (all_failed) runs; d (one_failed) runs too.
    g = graph(
        task("a"),
        task("b", "a"),
        task("c", "b", trigger_rule=pb.TRIGGER_RULE_ALL_FAILED),
        task("d", "b", trigger_rule=pb.TRIGGER_RULE_ONE_FAILED),
    )
    p = plan(g, {"a": T.FAILED, "b": T.NONE, "c": T.NONE, "d": T.NONE})
    assert p.to_upstream_failed == ["b"]
    assert sorted(p.to_queue) == ["c", "d"]


# --- cleanup tasks and Airflow's leaf semantics ---------------------------------------------------


def cleanup_dag() -> DagGraph:
    """extract -> load -> report, and cleanup (one_failed) watching extract and load."""
    return graph(
        task("extract"),
        task("load", "extract"),
        task("report", "load"),
        task("cleanup", "extract", "load", trigger_rule=pb.TRIGGER_RULE_ONE_FAILED),
    )


def test_one_failed_cleanup_runs_when_something_failed() -> None:
    g = cleanup_dag()
    p = plan(g, {"extract": T.SUCCESS, "load": T.FAILED, "report": T.NONE, "cleanup": T.NONE})
    assert p.to_upstream_failed == ["report"]
    assert p.to_queue == ["cleanup"]
    assert p.run_state is None
    p = plan(g, {"extract": T.SUCCESS, "load": T.FAILED, "report": T.UPSTREAM_FAILED, "cleanup": T.SUCCESS})
    assert p.run_state is RunState.FAILED  # the leaf report is upstream_failed


def test_one_failed_cleanup_runs_before_the_rest_is_done() -> None:
    p = plan(cleanup_dag(), {"extract": T.FAILED, "load": T.NONE, "report": T.NONE, "cleanup": T.NONE})
    assert p.to_upstream_failed == ["load", "report"]
    assert p.to_queue == ["cleanup"]


def test_one_failed_cleanup_is_skipped_when_nothing_failed() -> None:
    p = plan(cleanup_dag(), {"extract": T.SUCCESS, "load": T.SUCCESS, "report": T.SUCCESS, "cleanup": T.NONE})
    assert p.to_skip == ["cleanup"]
    assert p.run_state is RunState.SUCCESS


def test_one_failed_cleanup_waits_while_upstream_runs() -> None:
    p = plan(cleanup_dag(), {"extract": T.SUCCESS, "load": T.RUNNING, "report": T.NONE, "cleanup": T.NONE})
    assert p.empty


def test_all_done_leaf_makes_the_run_succeed_although_a_middle_task_failed() -> None:
    g = graph(task("a"), task("b", "a"), task("c", "b", trigger_rule=pb.TRIGGER_RULE_ALL_DONE))
    p = plan(g, {"a": T.SUCCESS, "b": T.FAILED, "c": T.NONE})
    assert p.to_queue == ["c"]
    assert p.run_state is None
    assert plan(g, {"a": T.SUCCESS, "b": T.FAILED, "c": T.SUCCESS}).run_state is RunState.SUCCESS
    assert plan(g, {"a": T.SUCCESS, "b": T.FAILED, "c": T.FAILED}).run_state is RunState.FAILED


@pytest.mark.parametrize(
    ("leaves", "expected"),
    [
        ((T.SUCCESS, T.SUCCESS), RunState.SUCCESS),
        ((T.SUCCESS, T.SKIPPED), RunState.SUCCESS),
        ((T.SKIPPED, T.SKIPPED), RunState.SUCCESS),
        ((T.SUCCESS, T.FAILED), RunState.FAILED),
        ((T.UPSTREAM_FAILED, T.SUCCESS), RunState.FAILED),
        ((T.SKIPPED, T.UPSTREAM_FAILED), RunState.FAILED),
    ],
)
def test_leaves_decide_the_run(leaves: tuple[TaskState, TaskState], expected: RunState) -> None:
    g = graph(task("root"), task("x", "root"), task("y", "root"))
    states = {"root": T.FAILED, "x": leaves[0], "y": leaves[1]}  # the failed root is not a leaf
    assert g.leaves == {"x", "y"}
    assert run_outcome(g, states) is expected


# --- retries --------------------------------------------------------------------------------------


def test_up_for_retry_not_due_waits_and_keeps_the_run_open() -> None:
    g = graph(task("a", retries=2), task("b", "a"))
    p = plan(g, {"a": T.UP_FOR_RETRY, "b": T.NONE})
    assert p.empty
    assert p.run_state is None


def test_up_for_retry_due_is_queued_and_downstream_keeps_waiting() -> None:
    g = graph(task("a", retries=2), task("b", "a"), task("c", "a", trigger_rule=pb.TRIGGER_RULE_ONE_FAILED))
    p = plan(g, {"a": T.UP_FOR_RETRY, "b": T.NONE, "c": T.NONE}, retry_due=frozenset({"a"}))
    assert p.to_queue == ["a"]  # a retry is not a failure: c does not fire
    assert (p.to_skip, p.to_upstream_failed, p.run_state) == ([], [], None)


@pytest.mark.parametrize("state", [T.NONE, T.SCHEDULED, T.QUEUED, T.RUNNING, T.SUCCESS, T.FAILED])
def test_retry_due_matters_only_for_up_for_retry(state: TaskState) -> None:
    g = graph(task("up"), task("a", "up"))
    due = plan(g, {"up": T.RUNNING, "a": state}, retry_due=frozenset({"a"}))
    assert due == plan(g, {"up": T.RUNNING, "a": state})
    assert due.to_queue == []


def test_failed_after_last_retry_propagates() -> None:
    g = graph(task("a", retries=1), task("b", "a"))
    p = plan(g, {"a": T.FAILED, "b": T.NONE}, retry_due=frozenset({"a"}))
    assert p.to_upstream_failed == ["b"]
    assert p.run_state is RunState.FAILED


# --- creation, readiness and unfinished runs ------------------------------------------------------


def test_missing_task_instances_are_created_and_planned_as_none() -> None:
    g = diamond()
    p = plan(g, {"a": T.SUCCESS, "b": T.RUNNING})
    assert p.to_create == ["c", "d"]
    assert p.to_queue == ["c"]
    assert p.run_state is None


def test_scheduled_tasks_are_reevaluated() -> None:
    g = graph(task("a"), task("b", "a"))
    assert plan(g, {"a": T.SCHEDULED, "b": T.NONE}).to_queue == ["a"]
    assert plan(g, {"a": T.FAILED, "b": T.SCHEDULED}).to_upstream_failed == ["b"]


@pytest.mark.parametrize("state", [T.NONE, T.SCHEDULED, T.QUEUED, T.RUNNING, T.UP_FOR_RETRY])
def test_run_state_is_none_while_any_task_is_unfinished(state: TaskState) -> None:
    # The only leaf ran already (one_success); "busy" is not a leaf but keeps the run open.
    g = graph(
        task("root"), task("busy"), task("leaf", "root", "busy", trigger_rule=pb.TRIGGER_RULE_ONE_SUCCESS)
    )
    assert g.leaves == {"leaf"}
    states = {"root": T.SUCCESS, "busy": state, "leaf": T.SUCCESS}
    assert plan(g, states).run_state is None
    assert run_outcome(g, states) is None


@pytest.mark.parametrize("state", sorted(TASK_FINISHED))
def test_run_state_is_set_once_every_task_is_finished(state: TaskState) -> None:
    g = graph(task("root"), task("leaf", "root", trigger_rule=pb.TRIGGER_RULE_ALWAYS))
    states = {"root": state, "leaf": T.SUCCESS}
    assert run_outcome(g, states) is RunState.SUCCESS
    assert plan(g, states).run_state is RunState.SUCCESS


def test_run_outcome_treats_missing_tasks_as_unfinished() -> None:
    g = graph(task("a"), task("b"))
    assert run_outcome(g, {"a": T.SUCCESS}) is None


def test_plan_lists_follow_topological_order() -> None:
    g = graph(task("z"), task("y", "z"), task("x", "y"), task("w"))
    p = plan(g, {})
    assert p.to_create == list(g.order)
    position = {tid: i for i, tid in enumerate(g.order)}
    assert p.to_queue == sorted(p.to_queue, key=position.__getitem__)


# --- properties -----------------------------------------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(dag_specs())
def test_all_success_states_finish_the_run(spec: pb.DagSpec) -> None:
    g = DagGraph.from_spec(spec)
    p = plan(g, dict.fromkeys(g.order, T.SUCCESS))
    assert p.run_state is RunState.SUCCESS
    assert (p.to_queue, p.to_skip, p.to_upstream_failed, p.to_create) == ([], [], [], [])


def _levels(g: DagGraph) -> dict[str, int]:
    level: dict[str, int] = {}
    for tid in g.order:
        level[tid] = 1 + max((level[u] for u in g.nodes[tid].upstream), default=0)
    return level


@settings(max_examples=150, deadline=None)
@given(dag_specs())
def test_simulated_run_runs_every_task_once_after_its_upstream(spec: pb.DagSpec) -> None:
    g = DagGraph.from_spec(spec)
    levels = _levels(g)
    states: dict[str, TaskState] = {}
    ran: list[str] = []
    rounds = 0
    while True:
        p = plan(g, states)
        assert not p.to_skip and not p.to_upstream_failed
        for tid in p.to_create:
            assert tid not in states
            states[tid] = T.NONE
        if p.run_state is not None:
            assert p.run_state is RunState.SUCCESS
            assert not p.to_queue
            break
        assert p.to_queue, "no progress on an unfinished run"
        rounds += 1
        assert rounds <= len(g.order)
        for tid in p.to_queue:
            assert tid not in ran, f"{tid} queued twice"
            assert all(states[u] is T.SUCCESS for u in g.nodes[tid].upstream), tid
            assert levels[tid] == rounds, "queued later than its upstream allowed"
            states[tid] = T.QUEUED
        # Planning again while they are in flight changes nothing.
        assert plan(g, states).empty
        for tid in p.to_queue:
            states[tid] = T.SUCCESS
            ran.append(tid)
    assert sorted(ran) == sorted(g.order)
    assert len(ran) == len(set(ran))
    assert rounds == max(levels.values())


@settings(max_examples=200, deadline=None)
@given(dag_specs(trigger_rules=True), st.data())
def test_simulated_run_with_any_rules_and_outcomes_always_finishes(
    spec: pb.DagSpec, data: st.DataObject
) -> None:
    g = DagGraph.from_spec(spec)
    outcome = {tid: data.draw(st.sampled_from([T.SUCCESS, T.FAILED]), label=tid) for tid in sorted(g.order)}
    states: dict[str, TaskState] = {}
    ran: set[str] = set()
    for _ in range(len(g.order) + 1):
        p = plan(g, states)
        for tid in p.to_create:
            states[tid] = T.NONE
        for tid in p.to_queue + p.to_skip + p.to_upstream_failed:
            assert tid not in ran
            assert states[tid] is T.NONE
        for tid in p.to_skip:
            states[tid] = T.SKIPPED
        for tid in p.to_upstream_failed:
            states[tid] = T.UPSTREAM_FAILED
        for tid in p.to_queue:
            states[tid] = outcome[tid]
            ran.add(tid)
        if p.run_state is not None:
            break
    else:
        pytest.fail(f"run did not finish: {states}")
    assert not p.to_queue, "finished with tasks being queued"
    assert all(s in TASK_FINISHED for s in states.values())
    assert set(states) == set(g.order)
    leaf_failed = any(states[leaf] in FAILED_LIKE for leaf in g.leaves)
    assert p.run_state is (RunState.FAILED if leaf_failed else RunState.SUCCESS)
    for tid in ran:  # whatever ran had its trigger rule met, and still has
        counts = _counts(g, tid, states)
        assert evaluate(g.nodes[tid].trigger_rule, counts) is Verdict.READY, (tid, counts)


def _counts(g: DagGraph, tid: str, states: dict[str, TaskState]) -> UpstreamCounts:
    ups = [states[u] for u in g.nodes[tid].upstream]
    return UpstreamCounts(
        total=len(ups),
        success=sum(s is T.SUCCESS for s in ups),
        failed=sum(s in FAILED_LIKE for s in ups),
        skipped=sum(s is T.SKIPPED for s in ups),
    )


def test_snapshot_defaults() -> None:
    assert TaskSnapshot(T.NONE).retry_due is False


def test_a_removed_upstream_no_longer_constrains_its_downstream() -> None:
    from schedd.v1 import resources_pb2 as pb
    from schedd_core.graph import DagGraph
    from schedd_core.planner import TaskSnapshot, plan_run
    from schedd_core.states import TaskState

    spec = pb.DagSpec(
        dag_id="d",
        tasks=[
            pb.TaskSpec(task_id="gone", shell=pb.ShellCommand(command="true")),
            pb.TaskSpec(task_id="a", shell=pb.ShellCommand(command="true")),
            pb.TaskSpec(task_id="b", upstream=["gone", "a"], shell=pb.ShellCommand(command="true")),
        ],
    )
    plan = plan_run(
        DagGraph.from_spec(spec),
        {
            "gone": TaskSnapshot(TaskState.REMOVED),
            "a": TaskSnapshot(TaskState.SUCCESS),
            "b": TaskSnapshot(TaskState.NONE),
        },
    )
    assert plan.to_queue == ["b"]


# --- incremental planning -------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(histories())
def test_an_incremental_plan_is_the_full_plan(history: tuple[DagGraph, Steps]) -> None:
    assert_incremental_plans_are_full_plans(*history)
