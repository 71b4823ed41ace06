"""schedd_core.pass_plan: the run-level rules of a scheduling pass (order, max_active_runs, paused DAGs,
run timeouts, which plans are written), on fake runs."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from google.protobuf import duration_pb2
from hypothesis import given, settings, strategies as st

from schedd.v1 import resources_pb2 as pb
from schedd_core.graph import DagGraph
from schedd_core.pass_plan import PlannedRun, finish_plans, limited_dags, plan_runs, to_measure
from schedd_core.states import RunState, TaskState
from tests.unit.helpers import dag, task
from tests.unit.pass_fakes import FakeRun, Graphs, run

T = TaskState


def chain_graph(dag_id: str = "d", **options: Any) -> DagGraph:
    return DagGraph.from_spec(dag(task("a"), task("b", "a"), dag_id=dag_id, **options))


def timeout(seconds: float) -> duration_pb2.Duration:
    d = duration_pb2.Duration()
    d.FromTimedelta(timedelta(seconds=seconds))
    return d


def plan_all(runs: list[FakeRun], graphs: Graphs, running: dict[str, int] | None = None) -> list[PlannedRun]:
    return plan_runs(runs, graphs, running=running or {}, past={}, max_map_length=1024)


def pks(planned: list[PlannedRun]) -> list[int]:
    return [p.run.pk for p in planned]


# --- order and max_active_runs ----------------------------------------------------------------------


def test_runs_are_planned_oldest_logical_date_first_and_runs_without_one_last() -> None:
    graphs = Graphs(v1=chain_graph())
    runs = [run(1, day=3), run(2, logical_date=None), run(3, day=1), run(4, day=2)]
    assert pks(plan_all(runs, graphs)) == [3, 4, 1, 2]


def test_max_active_runs_starts_only_the_oldest_queued_runs_that_fit() -> None:
    graphs = Graphs(v1=chain_graph(max_active_runs=2))
    runs = [run(pk, state="queued", day=10 - pk) for pk in range(1, 6)]
    assert pks(plan_all(runs, graphs)) == [5, 4]


def test_running_runs_count_against_max_active_runs() -> None:
    graphs = Graphs(v1=chain_graph(max_active_runs=2))
    runs = [run(1, state="queued", day=1), run(2, state="queued", day=2)]
    assert pks(plan_all(runs, graphs, {"d": 1})) == [1]
    assert pks(plan_all(runs, graphs, {"d": 2})) == []
    assert pks(plan_all(runs, graphs, {"d": 5})) == []


def test_running_runs_are_planned_whatever_the_limit() -> None:
    graphs = Graphs(v1=chain_graph(max_active_runs=1))
    runs = [run(1, {"a": T.RUNNING}, day=1), run(2, {"a": T.SUCCESS}, day=2), run(3, state="queued")]
    assert pks(plan_all(runs, graphs, {"d": 2})) == [1, 2]  # run 3 waits


def test_the_limit_is_per_dag() -> None:
    graphs = Graphs(v1=chain_graph("x", max_active_runs=1), v2=chain_graph("y", max_active_runs=1))
    runs = [
        run(1, state="queued", dag_id="x", day=1),
        run(2, state="queued", dag_id="x", day=2),
        run(3, state="queued", dag_id="y", version_id=2, day=3),
    ]
    assert pks(plan_all(runs, graphs, {"y": 0})) == [1, 3]


def test_a_backfills_runs_are_not_held_by_the_dags_limit() -> None:
    graphs = Graphs(v1=chain_graph(max_active_runs=1))
    runs = [run(pk, state="queued", backfill_id=7, day=pk) for pk in (1, 2, 3)]
    assert pks(plan_all(runs, graphs, {"d": 1})) == [1, 2, 3]


def test_a_dag_without_a_limit_starts_every_queued_run() -> None:
    graphs = Graphs(v1=chain_graph())
    runs = [run(pk, state="queued", day=pk) for pk in (1, 2, 3)]
    assert pks(plan_all(runs, graphs, {"d": 100})) == [1, 2, 3]


def test_limited_dags_names_only_unpaused_dags_with_a_limit_and_a_queued_run_not_a_backfills() -> None:
    graphs = Graphs(
        v1=chain_graph("limited", max_active_runs=1),
        v2=chain_graph("free"),
        v3=chain_graph("paused", max_active_runs=1),
        v4=chain_graph("backfilled", max_active_runs=1),
        v5=chain_graph("running", max_active_runs=1),
    )
    runs = [
        run(1, state="queued", dag_id="limited", version_id=1),
        run(2, state="queued", dag_id="free", version_id=2),
        run(3, state="queued", dag_id="paused", version_id=3, paused=True),
        run(4, state="queued", dag_id="backfilled", version_id=4, backfill_id=1),
        run(5, state="running", dag_id="running", version_id=5),
        run(6, state="queued", dag_id="limited", version_id=1),
    ]
    assert limited_dags(runs, graphs) == ["limited"]
    assert limited_dags([], graphs) == []


@settings(max_examples=200, deadline=None)
@given(
    limit=st.integers(1, 4),
    running=st.integers(0, 6),
    runs=st.lists(st.tuples(st.sampled_from(["queued", "running"]), st.booleans()), max_size=10),
)
def test_no_pass_starts_more_runs_than_the_limit_leaves_room_for(
    limit: int, running: int, runs: list[tuple[str, bool]]
) -> None:
    graphs = Graphs(v1=chain_graph(max_active_runs=limit))
    fakes = [
        run(i + 1, state=state, backfill_id=1 if bf else None, day=i) for i, (state, bf) in enumerate(runs)
    ]
    planned = plan_all(fakes, graphs, {"d": running})
    started = [p.run for p in planned if p.run.state == "queued" and p.run.backfill_id is None]
    eligible = [r for r in fakes if r.state == "queued" and r.backfill_id is None]
    assert len(started) == min(len(eligible), max(0, limit - running))
    assert started == eligible[: len(started)]  # the oldest
    assert {p.run.pk for p in planned} >= {r.pk for r in fakes if r.state == "running" or r.backfill_id}


# --- paused DAGs ------------------------------------------------------------------------------------


def test_a_paused_run_is_planned_only_when_it_finishes() -> None:
    graphs = Graphs(v1=chain_graph())
    done = run(1, {"a": T.SUCCESS, "b": T.SUCCESS}, paused=True)
    waiting = run(2, {"a": T.SUCCESS, "b": T.NONE}, paused=True)  # b would queue: it must not
    in_flight = run(3, {"a": T.RUNNING, "b": T.NONE}, paused=True)
    planned = plan_all([done, waiting, in_flight], graphs)
    assert pks(planned) == [1]
    assert planned[0].plan.run_state is RunState.SUCCESS


def test_a_paused_queued_run_does_not_take_a_place_of_its_dag() -> None:
    graphs = Graphs(v1=chain_graph(max_active_runs=1))
    runs = [run(1, state="queued", paused=True, day=1), run(2, state="queued", day=2)]
    assert pks(plan_all(runs, graphs)) == [2]


def test_a_paused_run_that_timed_out_is_not_failed() -> None:
    graphs = Graphs(v1=chain_graph(dagrun_timeout=timeout(10)))
    assert plan_all([run(1, {"a": T.RUNNING, "b": T.NONE}, age=60.0, paused=True)], graphs) == []


# --- run timeouts -----------------------------------------------------------------------------------


def test_a_run_past_its_timeout_fails_its_running_tasks_and_skips_the_rest() -> None:
    graphs = Graphs(v1=chain_graph(dagrun_timeout=timeout(10)))
    (planned,) = plan_all([run(1, {"a": T.RUNNING, "b": T.NONE}, age=10.0)], graphs)
    assert planned.plan.to_fail == ["a"]
    assert planned.plan.to_skip == ["b"]
    assert planned.plan.run_state is RunState.FAILED


def test_a_run_within_its_timeout_is_planned_as_usual() -> None:
    graphs = Graphs(v1=chain_graph(dagrun_timeout=timeout(10)))
    for age in (None, 0.0, 9.99):
        (planned,) = plan_all([run(1, {"a": T.SUCCESS, "b": T.NONE}, age=age)], graphs)
        assert planned.plan.to_queue == ["b"]
        assert planned.plan.run_state is None


def test_a_dag_without_a_timeout_never_times_out() -> None:
    (planned,) = plan_all([run(1, {"a": T.RUNNING, "b": T.NONE}, age=1e9)], Graphs(v1=chain_graph()))
    assert planned.plan.empty


def test_a_held_run_is_not_timed_out_by_the_pass() -> None:
    graphs = Graphs(v1=chain_graph(max_active_runs=1, dagrun_timeout=timeout(1)))
    assert plan_all([run(1, state="queued", age=5.0)], graphs, {"d": 1}) == []


# --- past states and incremental plans --------------------------------------------------------------


def test_past_states_hold_a_depends_on_past_task() -> None:
    graphs = Graphs(v1=DagGraph.from_spec(dag(task("a", depends_on_past=True))))
    fake = run(1, {"a": T.NONE})
    (held,) = plan_runs([fake], graphs, running={}, past={1: {"a": T.FAILED}}, max_map_length=8)
    (free,) = plan_runs([fake], graphs, running={}, past={1: {"a": T.SUCCESS}}, max_map_length=8)
    assert (held.plan.to_queue, free.plan.to_queue) == ([], ["a"])


def test_an_incremental_run_is_planned_around_what_changed() -> None:
    graphs = Graphs(v1=DagGraph.from_spec(dag(task("a"), task("b"))))
    # b is ready too, but only a changed: b (waiting in its pool, SCHEDULED) is admission's to find
    fake = run(1, {"a": T.SCHEDULED, "b": T.SCHEDULED}, changed={"a"})
    (planned,) = plan_all([fake], graphs)
    assert planned.plan.to_queue == ["a"]


# --- what is written, and mapped tasks ---------------------------------------------------------------


def test_finish_plans_drops_plans_that_change_nothing_unless_the_run_starts() -> None:
    graphs = Graphs(v1=chain_graph())
    idle = run(1, {"a": T.RUNNING, "b": T.NONE})
    starting = run(2, {"a": T.RUNNING, "b": T.NONE}, state="queued")
    moving = run(3, {"a": T.SUCCESS, "b": T.NONE})
    planned = finish_plans(
        plan_all([idle, starting, moving], graphs), past={}, map_lengths={}, max_map_length=8
    )
    assert pks(planned) == [2, 3]


def mapped_graph() -> DagGraph:
    mapping = pb.TaskMapping(
        expand=[pb.MappedArgument(name="x", values=pb.Argument(result=pb.ResultReference(task_id="make")))]
    )
    python = pb.PythonCallable(target="m:f")
    return DagGraph.from_spec(
        dag(task("make", python=python), task("work", "make", python=python, mapping=mapping))
    )


def test_mapped_tasks_are_measured_then_planned_again_with_their_lengths() -> None:
    graphs = Graphs(v1=mapped_graph())
    ready = run(1, {"make": T.SUCCESS, "work": T.NONE})
    waiting = run(2, {"make": T.RUNNING, "work": T.NONE})
    planned = plan_all([ready, waiting], graphs)
    assert to_measure(planned) == [(1, graphs(1), "work")]
    lengths = {1: {"work": [("x", 3)]}}
    (expanded,) = finish_plans(planned, past={}, map_lengths=lengths, max_map_length=8)  # run 2: nothing
    assert expanded.run.pk == 1
    assert expanded.plan.to_remove == ["work"]
    assert expanded.plan.to_queue == ["work[0]", "work[1]", "work[2]"]


def test_a_mapped_task_longer_than_the_limit_fails_its_placeholder() -> None:
    graphs = Graphs(v1=mapped_graph())
    planned = plan_all([run(1, {"make": T.SUCCESS, "work": T.NONE})], graphs)
    (done,) = finish_plans(planned, past={}, map_lengths={1: {"work": [("x", 9)]}}, max_map_length=8)
    assert [key for key, _ in done.plan.to_fail_unrun] == ["work"]


def test_nothing_to_measure_without_mapped_tasks() -> None:
    assert to_measure(plan_all([run(1, {"a": T.SUCCESS, "b": T.NONE})], Graphs(v1=chain_graph()))) == []
