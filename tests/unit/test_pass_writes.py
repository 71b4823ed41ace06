"""schedd_core.pass_writes: the writes of a scheduling pass, decided from its plans and admissions."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import timedelta
from typing import Any

from google.protobuf import duration_pb2
from hypothesis import given, settings, strategies as st

from schedd.v1 import resources_pb2 as pb
from schedd_core.admission import Candidate
from schedd_core.graph import DagGraph
from schedd_core.pass_plan import PlannedRun
from schedd_core.pass_writes import (
    FailUnrun,
    PassWrites,
    Retry,
    RunEvent,
    RunFinish,
    decide_writes,
    ready_candidates,
)
from schedd_core.planner import RunPlan, plan_run
from schedd_core.states import RunState, TaskState
from tests.unit.helpers import dag, dag_specs, task
from tests.unit.pass_fakes import DAY0, FakeRun, run

T = TaskState
CALLBACK = pb.Callback(webhook_url="https://example.com/hook")


def diamond(**options: Any) -> DagGraph:
    return DagGraph.from_spec(dag(task("a"), task("b", "a"), task("c", "a"), task("d", "b", "c"), **options))


def planned(fake: FakeRun, graph: DagGraph, plan: RunPlan | None = None) -> PlannedRun:
    return PlannedRun(fake, graph, plan if plan is not None else plan_run(graph, fake.tasks))


def decide(
    plans: list[PlannedRun],
    admit: Collection[str] | None = None,
    *,
    waiting: Sequence[tuple[Candidate, int]] = (),
    jitter: float = 0.5,
) -> PassWrites:
    """Decide with the ready candidates whose keys are in ``admit`` admitted (all when None), and the
    ``waiting`` ones (with their runs) admitted after them."""
    ready = ready_candidates(plans)
    admitted = [r.candidate for r in ready if admit is None or r.key in admit]
    admitted += [c for c, _ in waiting]
    return decide_writes(plans, ready, admitted, {c.ti_id: pk for c, pk in waiting}, lambda: jitter)


def waiting_candidate(ti_id: int) -> Candidate:
    return Candidate(ti_id, "other", "t", "default_pool", 1, 1, DAY0)


# --- ready candidates -------------------------------------------------------------------------------


def test_ready_candidates_key_new_instances_negatively_in_plan_order() -> None:
    g = DagGraph.from_spec(dag(task("a"), task("b")))
    first, second = run(1), run(2, {"a": T.SUCCESS, "b": T.UP_FOR_RETRY}, retry_due={"b"})
    ready = ready_candidates([planned(first, g), planned(second, g)])
    assert [(r.run.pk, r.key, r.candidate.ti_id, r.new) for r in ready] == [
        (1, "a", -1, True),
        (1, "b", -2, True),
        (2, "b", 202, False),
    ]


def test_a_ready_candidate_carries_its_tasks_pool_priority_and_lane() -> None:
    g = DagGraph.from_spec(dag(task("a", pool="big", pool_slots=3, priority_weight=7)))
    (ready,) = ready_candidates([planned(run(1, backfill_id=4), g)])
    c = ready.candidate
    assert (c.dag_id, c.task_id, c.pool, c.pool_slots, c.priority, c.backfill) == (
        "d",
        "a",
        "big",
        3,
        7,
        True,
    )
    assert c.logical_date == DAY0


# --- a new run --------------------------------------------------------------------------------------


def test_a_new_run_is_created_with_its_admitted_root_queued_and_started() -> None:
    p = planned(run(1, state="queued"), diamond())
    writes = decide([p])
    assert {(n.task_id, n.state) for n in writes.create} == {
        ("a", T.QUEUED),
        ("b", T.NONE),
        ("c", T.NONE),
        ("d", T.NONE),
    }
    assert writes.start_runs == [1]
    assert (writes.queue, writes.schedule) == ([], [])  # created queued: nothing to move
    assert writes.runs == 1
    assert writes.outcome.written == {}  # created ones: the store adds them


def test_a_new_root_not_admitted_is_created_waiting_in_its_pool() -> None:
    writes = decide([planned(run(1, state="queued"), diamond())], admit=())
    assert [n.state for n in writes.create if n.task_id == "a"] == [T.SCHEDULED]
    assert writes.schedule == []


def test_a_created_instance_carries_its_tasks_settings() -> None:
    g = DagGraph.from_spec(
        dag(task("a", retries=2, pool="p", pool_slots=2, queue="q", priority_weight=5, on_failure=[CALLBACK]))
    )
    (new,) = decide([planned(run(1, state="queued"), g)]).create
    assert new == (1, "a", -1, T.QUEUED, 3, 5, "p", 2, "q", False, "failure")


# --- existing task instances ------------------------------------------------------------------------


def test_admitted_instances_queue_and_the_others_wait_in_their_pools() -> None:
    fake = run(1, {"a": T.SUCCESS, "b": T.NONE, "c": T.NONE, "d": T.NONE})
    writes = decide([planned(fake, diamond())], admit={"b"})
    assert writes.queue == [102]
    assert writes.schedule == [103]
    assert writes.outcome.written == {1: {102, 103}}


def test_an_instance_already_waiting_in_its_pool_is_not_scheduled_again() -> None:
    fake = run(1, {"a": T.SUCCESS, "b": T.SCHEDULED, "c": T.NONE, "d": T.NONE})
    writes = decide([planned(fake, diamond())], admit=())
    assert writes.schedule == [103]


def test_admitted_instances_of_other_runs_queue_in_admission_order_and_count_as_their_runs_writes() -> None:
    fake = run(1, {"a": T.SUCCESS, "b": T.NONE, "c": T.NONE, "d": T.NONE})
    writes = decide([planned(fake, diamond())], admit={"c"}, waiting=[(waiting_candidate(900), 9)])
    assert writes.queue == [103, 900]
    assert writes.outcome.written == {1: {102, 103}, 9: {900}}


def test_with_nothing_planned_admitted_waiting_instances_still_queue() -> None:
    writes = decide([], waiting=[(waiting_candidate(5), 3), (waiting_candidate(6), 4)])
    assert writes.queue == [5, 6]
    assert writes.runs == 0
    assert writes.outcome.written == {3: {5}, 4: {6}}


def test_failure_marks_existing_instances_upstream_failed_and_finishes_the_run() -> None:
    fake = run(1, {"a": T.FAILED, "b": T.NONE, "c": T.NONE, "d": T.NONE})
    writes = decide([planned(fake, diamond())])
    assert sorted(writes.upstream_failed) == [102, 103, 104]
    assert writes.finish_runs == [RunFinish(1, RunState.FAILED)]
    assert writes.outcome.finished_runs == {1}
    assert writes.outcome.finished_dags == {"d"}
    assert writes.outcome.written == {1: {102, 103, 104}}


def test_new_instances_that_will_not_run_are_created_finished() -> None:
    g = DagGraph.from_spec(dag(task("a"), task("b", "a")))
    fake = run(1, {"a": T.FAILED})  # b has no task instance yet
    writes = decide([planned(fake, g)])
    assert [(n.task_id, n.state) for n in writes.create] == [("b", T.UPSTREAM_FAILED)]
    assert writes.upstream_failed == []


def test_a_timed_out_run_fails_its_running_instances_and_skips_the_rest() -> None:
    g = diamond(on_failure=[CALLBACK])
    fake = run(1, {"a": T.SUCCESS, "b": T.RUNNING, "c": T.SCHEDULED})  # d not created yet
    plan = RunPlan(to_fail=["b"], to_skip=["c", "d"], to_create=["d"], run_state=RunState.FAILED)
    writes = decide([planned(fake, g, plan)])
    assert writes.fail_running == [102]
    assert writes.skip == [103]
    assert [(n.task_id, n.state) for n in writes.create] == [("d", T.SKIPPED)]
    assert writes.run_events == [RunEvent("failure", 1, "d")]


def test_a_run_event_is_recorded_only_when_the_dag_has_a_callback_for_it() -> None:
    done = {"a": T.SUCCESS, "b": T.SUCCESS, "c": T.SUCCESS, "d": T.SUCCESS}
    assert decide([planned(run(1, done), diamond(on_failure=[CALLBACK]))]).run_events == []
    success = decide([planned(run(1, done), diamond(on_success=[CALLBACK]))])
    assert success.run_events == [RunEvent("success", 1, "d")]


# --- runs --------------------------------------------------------------------------------------------


def test_a_finished_run_of_a_dag_with_max_active_runs_frees_a_place() -> None:
    done = {"a": T.SUCCESS, "b": T.SUCCESS, "c": T.SUCCESS, "d": T.SUCCESS}
    g = diamond(max_active_runs=2)
    writes = decide([planned(run(1, done), g), planned(run(2, done), g)])
    assert writes.outcome.freed_runs == {"d": 2}
    assert writes.outcome.finished_backfills == set()
    assert decide([planned(run(1, done), diamond())]).outcome.freed_runs == {}


def test_a_finished_backfill_run_frees_its_backfill_not_its_dag() -> None:
    done = {"a": T.SUCCESS, "b": T.SUCCESS, "c": T.SUCCESS, "d": T.SUCCESS}
    writes = decide([planned(run(1, done, backfill_id=5), diamond(max_active_runs=1))])
    assert writes.outcome.finished_backfills == {5}
    assert writes.outcome.freed_runs == {}


def test_starting_a_run_with_a_timeout_wakes_the_deadline_timer() -> None:
    d = duration_pb2.Duration()
    d.FromTimedelta(timedelta(minutes=5))
    assert decide([planned(run(1, state="queued"), diamond(dagrun_timeout=d))]).outcome.deadlines_changed
    assert not decide([planned(run(1, state="queued"), diamond())]).outcome.deadlines_changed
    running = run(1, {"a": T.RUNNING, "b": T.NONE, "c": T.NONE, "d": T.NONE})
    assert not decide([planned(running, diamond(dagrun_timeout=d))]).outcome.deadlines_changed


def test_a_sensor_waiting_for_its_next_poke_wakes_the_deadline_timer() -> None:
    fake = run(1, {"a": T.UP_FOR_RESCHEDULE, "b": T.NONE, "c": T.NONE, "d": T.NONE})
    assert decide([planned(fake, diamond())]).outcome.deadlines_changed


# --- retries, mapped tasks ----------------------------------------------------------------------------


def test_retry_times_follow_the_policy_with_the_failed_try_and_the_jitter() -> None:
    delay = duration_pb2.Duration(seconds=10)
    g = DagGraph.from_spec(dag(task("a", retries=5, retry_delay=delay, retry_exponential_backoff=True)))
    fake = run(1, {"a": T.UP_FOR_RETRY}, retry_unscheduled={"a"})
    fake.tries = {"a": 3}
    writes = decide([planned(fake, g)], jitter=0.0)
    (retry,) = writes.retries
    assert retry.ti_id == 101
    assert 0 < retry.delay <= 40.0
    assert decide([planned(fake, g)], jitter=0.99).retries[0].delay > retry.delay
    assert writes.outcome.deadlines_changed
    assert writes.outcome.written == {1: {101}}


def test_a_fixed_retry_delay_ignores_the_jitter() -> None:
    g = DagGraph.from_spec(dag(task("a", retries=1, retry_delay=duration_pb2.Duration(seconds=7))))
    fake = run(1, {"a": T.UP_FOR_RETRY}, retry_unscheduled={"a"})
    assert decide([planned(fake, g)], jitter=0.3).retries == [Retry(101, 7.0)]


def test_an_expanded_placeholder_is_removed_and_its_instances_created_queued() -> None:
    g = DagGraph.from_spec(dag(task("make"), task("work", "make")))
    fake = run(1, {"make": T.SUCCESS, "work": T.NONE})
    keys = ["work[0]", "work[1]"]
    plan = RunPlan(to_remove=["work"], to_create=keys, to_queue=keys)
    writes = decide([planned(fake, g, plan)], admit={"work[0]"})
    assert writes.remove == [102]
    assert [(n.task_id, n.map_index, n.state) for n in writes.create] == [
        ("work", 0, T.QUEUED),
        ("work", 1, T.SCHEDULED),
    ]
    assert writes.outcome.expanded_runs == {1}


def test_a_placeholder_made_and_expanded_in_one_pass_is_never_created() -> None:
    g = DagGraph.from_spec(dag(task("make"), task("work", "make")))
    plan = RunPlan(to_remove=["work"], to_create=["work", "work[0]"], to_queue=["work[0]"])
    writes = decide([planned(run(1, {"make": T.SUCCESS}), g, plan)])
    assert [n.map_index for n in writes.create] == [0]
    assert writes.remove == []


def test_a_task_that_cannot_expand_fails_existing_or_created() -> None:
    g = DagGraph.from_spec(dag(task("make"), task("work", "make"), task("other", "make")))
    fake = run(1, {"make": T.SUCCESS, "work": T.NONE})
    plan = RunPlan(to_create=["other"], to_fail_unrun=[("work", "too long"), ("other", "bad")])
    writes = decide([planned(fake, g, plan)])
    assert writes.fail_unrun == [FailUnrun(1, "work", 102, "too long"), FailUnrun(1, "other", None, "bad")]
    assert writes.outcome.written == {1: {102}}


# --- properties on random DAGs ------------------------------------------------------------------------

STATES = st.sampled_from(list(TaskState))


@settings(max_examples=150, deadline=None)
@given(spec=dag_specs(trigger_rules=True), data=st.data())
def test_every_existing_instance_gets_at_most_one_state_write_and_every_task_one_instance(
    spec: pb.DagSpec, data: st.DataObject
) -> None:
    g = DagGraph.from_spec(spec)
    present = data.draw(st.lists(st.sampled_from(list(g.order)), unique=True))
    states = {tid: data.draw(STATES) for tid in present}
    fake = run(1, states, state=data.draw(st.sampled_from(["queued", "running"])))
    p = planned(fake, g)
    ready = ready_candidates([p])
    admit = {r.key for r in ready if data.draw(st.booleans(), label=f"admit {r.key}")}
    writes = decide([p], admit)
    named = [*writes.queue, *writes.schedule, *writes.skip, *writes.upstream_failed, *writes.fail_running]
    assert len(named) == len(set(named))
    assert set(named) <= set(fake.ti_ids.values())
    assert sorted(n.task_id for n in writes.create) == sorted(set(g.order) - set(present))
    assert set(writes.outcome.written.get(1, set())) == set(named) | {r.ti_id for r in writes.retries}
    assert writes.start_runs == ([1] if fake.state == "queued" else [])
    created_queued = sum(n.state is T.QUEUED for n in writes.create)
    assert len(writes.queue) + created_queued == len(admit)
