"""The pure scheduling semantics: ``admit`` (pools and limits), ``retry_delay`` (backoff), ``explain``
(why a task is not running) and ``plan_timeout`` (a run past its dagrun_timeout)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, strategies as st

from schedd.v1 import resources_pb2 as pb
from schedd_core.admission import Candidate, Capacity, admit
from schedd_core.explain import ExplainFacts, explain
from schedd_core.graph import DagGraph
from schedd_core.planner import TaskSnapshot, plan_timeout
from schedd_core.retry import DEFAULT_RETRY_DELAY, RetryPolicy, retry_delay
from schedd_core.states import RunState, TaskState
from tests.unit.helpers import EXPLAIN_NOW, dag, explain_facts, graph, snaps, task

T = TaskState
DAY = datetime(2026, 1, 1, tzinfo=UTC)

# --- admit ------------------------------------------------------------------------------------------


def cand(
    ti_id: int,
    *,
    pool: str = "p",
    slots: int = 1,
    priority: int = 1,
    dag_id: str = "d",
    task_id: str | None = None,
    day: int = 0,
) -> Candidate:
    return Candidate(
        ti_id=ti_id,
        dag_id=dag_id,
        task_id=task_id or f"t{ti_id}",
        pool=pool,
        pool_slots=slots,
        priority=priority,
        logical_date=DAY + timedelta(days=day),
    )


def ids(admitted: Iterable[Candidate]) -> list[int]:
    return [c.ti_id for c in admitted]


def test_admits_by_priority_then_logical_date_then_id_up_to_the_pool_size() -> None:
    candidates = [
        cand(1, priority=1, day=0),
        cand(2, priority=5, day=3),
        cand(3, priority=1, day=-1),  # older logical date: first among equal priority
        cand(4, priority=5, day=3),
        cand(5, priority=1, day=0),
    ]
    capacity = Capacity(pool_slots={"p": 4}, pool_used={"p": 0})
    assert ids(admit(candidates, capacity)) == [2, 4, 3, 1]
    assert capacity.pool_used == {"p": 4}


def test_slots_already_used_count() -> None:
    capacity = Capacity(pool_slots={"p": 3}, pool_used={"p": 2})
    assert ids(admit([cand(1), cand(2)], capacity)) == [1]
    assert ids(admit([cand(3)], Capacity(pool_slots={"p": 3}, pool_used={"p": 3}))) == []


def test_head_of_line_blocks_its_pool_so_a_multi_slot_task_is_not_starved() -> None:
    # 1 slot free: the 2-slot head does not fit, and the 1-slot tasks behind it must not take the slot.
    candidates = [cand(1, slots=2, priority=9), cand(2), cand(3)]
    capacity = Capacity(pool_slots={"p": 2}, pool_used={"p": 1})
    assert admit(candidates, capacity) == []
    assert capacity.pool_used == {"p": 1}
    # Once the pool is empty, the head goes first and fills it.
    capacity = Capacity(pool_slots={"p": 2}, pool_used={"p": 0})
    assert ids(admit(candidates, capacity)) == [1]


def test_a_blocked_pool_does_not_block_another_pool() -> None:
    candidates = [cand(1, pool="a", slots=2, priority=9), cand(2, pool="a"), cand(3, pool="b", priority=1)]
    capacity = Capacity(pool_slots={"a": 2, "b": 1}, pool_used={"a": 1, "b": 0})
    assert ids(admit(candidates, capacity)) == [3]
    assert capacity.pool_used == {"a": 1, "b": 1}


def test_a_task_bigger_than_its_pool_is_passed_over_not_blocking() -> None:
    candidates = [cand(1, slots=3, priority=9), cand(2), cand(3)]
    capacity = Capacity(pool_slots={"p": 2}, pool_used={"p": 0})
    assert ids(admit(candidates, capacity)) == [2, 3]


def test_an_unknown_pool_admits_nothing() -> None:
    capacity = Capacity(pool_slots={"p": 2}, pool_used={})
    assert ids(admit([cand(1, pool="ghost"), cand(2)], capacity)) == [2]


def test_dag_limit_skips_without_blocking_the_pool() -> None:
    candidates = [
        cand(1, dag_id="limited", priority=9),
        cand(2, dag_id="limited", priority=8),
        cand(3, dag_id="free", priority=1),
    ]
    capacity = Capacity(pool_slots={"p": 10}, pool_used={"p": 0}, dag_tasks={"limited": (2, 1)})
    assert ids(admit(candidates, capacity)) == [1, 3]
    assert capacity.dag_tasks == {"limited": (2, 2)}


def test_task_limit_skips_without_blocking_the_pool() -> None:
    candidates = [
        cand(1, task_id="t", priority=9),
        cand(2, task_id="t", priority=9, day=1),
        cand(3, task_id="u", priority=1),
    ]
    capacity = Capacity(pool_slots={"p": 10}, pool_used={"p": 0}, task_instances={("d", "t"): (1, 0)})
    assert ids(admit(candidates, capacity)) == [1, 3]
    assert capacity.task_instances == {("d", "t"): (1, 1)}


def test_limits_count_across_pools() -> None:
    candidates = [cand(1, pool="a"), cand(2, pool="b"), cand(3, pool="c")]
    capacity = Capacity(pool_slots={"a": 5, "b": 5, "c": 5}, pool_used={}, dag_tasks={"d": (2, 0)})
    assert len(admit(candidates, capacity)) == 2


def test_a_limit_held_multi_slot_candidate_does_not_block_its_pool() -> None:
    candidates = [cand(1, dag_id="limited", slots=2, priority=9), cand(2, dag_id="other", priority=1)]
    capacity = Capacity(pool_slots={"p": 2}, pool_used={"p": 1}, dag_tasks={"limited": (1, 1)})
    assert ids(admit(candidates, capacity)) == [2]


@given(
    st.lists(
        st.tuples(st.sampled_from(["a", "b"]), st.integers(1, 3), st.integers(0, 3), st.integers(0, 3)),
        max_size=25,
    ),
    st.integers(0, 4),
    st.integers(0, 4),
)
def test_admission_never_overfills_and_keeps_strict_order_per_pool(
    specs: list[tuple[str, int, int, int]], size_a: int, size_b: int
) -> None:
    candidates = [
        cand(i + 1, pool=pool, slots=slots, priority=prio, day=day)
        for i, (pool, slots, prio, day) in enumerate(specs)
    ]
    sizes = {"a": size_a, "b": size_b}
    capacity = Capacity(pool_slots=sizes, pool_used={"a": 0, "b": 0})
    admitted = admit(candidates, capacity)
    for pool, size in sizes.items():
        mine = [c for c in admitted if c.pool == pool]
        assert sum(c.pool_slots for c in mine) <= size
        # Strict order: what was admitted is a prefix of the pool's order, skipping only tasks that can
        # never fit; the first fitting task not admitted blocks everything behind it.
        fitting = sorted(
            (c for c in candidates if c.pool == pool and c.pool_slots <= size), key=Candidate.sort_key
        )
        assert mine == fitting[: len(mine)]


# --- retry_delay ------------------------------------------------------------------------------------


def test_fixed_delay_is_the_same_every_time() -> None:
    policy = RetryPolicy(retries=5, delay=7.0)
    assert [retry_delay(policy, n, 0.5) for n in (1, 2, 3, 10)] == [7.0] * 4


def test_fixed_delay_is_capped_by_max_delay() -> None:
    assert retry_delay(RetryPolicy(retries=1, delay=30.0, max_delay=10.0), 1, 0.0) == 10.0


def test_exponential_doubles_per_try_before_jitter() -> None:
    policy = RetryPolicy(retries=10, delay=1.5, exponential=True)
    # jitter -> 1.0 (just under) scales by almost exactly 1
    top = [retry_delay(policy, n, 0.999999) for n in (1, 2, 3, 4)]
    assert top == pytest.approx([1.5, 3.0, 6.0, 12.0], rel=1e-5)
    bottom = [retry_delay(policy, n, 0.0) for n in (1, 2, 3, 4)]
    assert bottom == pytest.approx([0.75 * x for x in (1.5, 3.0, 6.0, 12.0)])


def test_exponential_is_capped() -> None:
    policy = RetryPolicy(retries=20, delay=1.0, exponential=True, max_delay=10.0)
    assert retry_delay(policy, 4, 0.999999) == pytest.approx(8.0, rel=1e-5)
    assert retry_delay(policy, 5, 0.999999) == pytest.approx(10.0, rel=1e-5)
    assert retry_delay(policy, 15, 0.0) == pytest.approx(7.5)


def test_exponential_cap_holds_for_very_many_tries() -> None:
    policy = RetryPolicy(retries=5000, delay=1.0, exponential=True, max_delay=60.0)
    assert retry_delay(policy, 1100, 0.5) == pytest.approx(60.0 * 0.875)


@given(
    delay=st.floats(0.01, 100.0),
    failed_try=st.integers(1, 30),
    jitter=st.floats(0.0, 1.0, exclude_max=True),
    cap=st.sampled_from([0.0, 5.0, 1000.0]),
)
def test_exponential_jitter_stays_within_three_quarters_and_all_of_the_base(
    delay: float, failed_try: int, jitter: float, cap: float
) -> None:
    policy = RetryPolicy(retries=50, delay=delay, exponential=True, max_delay=cap)
    base = delay * 2 ** (failed_try - 1)
    if cap:
        base = min(base, cap)
    value = retry_delay(policy, failed_try, jitter)
    assert 0.75 * base * (1 - 1e-9) <= value <= base * (1 + 1e-9)


@given(delay=st.floats(0.01, 100.0), failed_try=st.integers(1, 20), j1=st.floats(0, 1, exclude_max=True))
def test_each_retry_waits_longer_than_the_one_before_until_the_cap(
    delay: float, failed_try: int, j1: float
) -> None:
    policy = RetryPolicy(retries=50, delay=delay, exponential=True)
    # whatever the jitters, try n+1's delay is at least try n's (0.75 * 2x >= 1x)
    for j2 in (0.0, 0.5, 0.999):
        assert retry_delay(policy, failed_try + 1, j2) >= retry_delay(policy, failed_try, j1)


@pytest.mark.parametrize("jitter", [-0.1, 1.0, 2.0])
def test_jitter_out_of_range_is_rejected(jitter: float) -> None:
    with pytest.raises(ValueError, match="jitter"):
        retry_delay(RetryPolicy(retries=1, exponential=True), 1, jitter)


def test_policy_from_spec() -> None:
    spec = pb.TaskSpec(task_id="t", retries=3, retry_exponential_backoff=True)
    spec.retry_delay.FromSeconds(2)
    spec.max_retry_delay.FromSeconds(20)
    assert RetryPolicy.from_spec(spec) == RetryPolicy(retries=3, delay=2.0, exponential=True, max_delay=20.0)
    assert RetryPolicy.from_spec(pb.TaskSpec(task_id="t", retries=1)) == RetryPolicy(
        retries=1, delay=DEFAULT_RETRY_DELAY
    )


def test_graph_carries_max_tries_and_retry_policy() -> None:
    g = graph(task("a", retries=2, retry_exponential_backoff=True), task("b"))
    assert g.nodes["a"].max_tries == 3
    assert g.nodes["a"].retry.exponential
    assert g.nodes["b"].max_tries == 1


# --- explain ----------------------------------------------------------------------------------------

CHAIN = graph(task("a"), task("b", "a"))


def reasons(g: DagGraph, f: ExplainFacts, states: dict[str, TaskState]) -> list[str]:
    result = explain(g, f, snaps(states))
    assert result, "explain must never be empty"
    return result


@pytest.mark.parametrize("state", [T.SUCCESS, T.FAILED, T.SKIPPED, T.UPSTREAM_FAILED])
def test_explain_finished(state: TaskState) -> None:
    (reason,) = reasons(CHAIN, explain_facts("a", state), {"a": state})
    assert f"it is finished ({state.value})" in reason and "clear it" in reason


def test_explain_running() -> None:
    assert reasons(CHAIN, explain_facts("a", T.RUNNING), {"a": T.RUNNING}) == ["it is running"]


def test_explain_waiting_for_upstream() -> None:
    (reason,) = reasons(CHAIN, explain_facts("b", T.NONE), {"a": T.RUNNING, "b": T.NONE})
    assert reason == "trigger rule all_success is not met yet; waiting for upstream a (running)"


def test_explain_waiting_for_upstream_names_only_the_unfinished_ones() -> None:
    g = graph(
        task("a"), task("b"), task("c"), task("j", "a", "b", "c", trigger_rule=pb.TRIGGER_RULE_ALL_DONE)
    )
    (reason,) = reasons(g, explain_facts("j", T.NONE), {"a": T.SUCCESS, "b": T.UP_FOR_RETRY, "c": T.QUEUED})
    assert reason.startswith("trigger rule all_done is not met yet")
    assert "b (up_for_retry)" in reason and "c (queued)" in reason and "a (" not in reason


def test_explain_nothing_holds_it_back() -> None:
    (reason,) = reasons(CHAIN, explain_facts("b", T.NONE), {"a": T.SUCCESS, "b": T.NONE})
    assert "nothing holds it back" in reason


def test_explain_paused_comes_first() -> None:
    got = reasons(CHAIN, explain_facts("b", T.NONE, paused=True), {"a": T.RUNNING, "b": T.NONE})
    assert got[0] == "its DAG is paused"
    assert "waiting for upstream a (running)" in got[1]


def test_explain_pool_full() -> None:
    f = explain_facts("a", T.SCHEDULED, pool="p", pool_total=2, pool_used=2)
    assert reasons(CHAIN, f, {"a": T.SCHEDULED}) == ["pool 'p' is full: 2 of 2 slots taken, it needs 1"]


def test_explain_pool_full_for_a_multi_slot_task() -> None:
    f = explain_facts("a", T.SCHEDULED, pool="p", pool_slots=2, pool_total=2, pool_used=1)
    assert reasons(CHAIN, f, {"a": T.SCHEDULED}) == ["pool 'p' is full: 1 of 2 slots taken, it needs 2"]


def test_explain_task_bigger_than_its_pool() -> None:
    f = explain_facts("a", T.SCHEDULED, pool="p", pool_slots=3, pool_total=2, pool_used=0)
    assert reasons(CHAIN, f, {"a": T.SCHEDULED}) == ["it needs 3 slots but pool 'p' has only 2"]


def test_explain_missing_pool() -> None:
    f = explain_facts("a", T.SCHEDULED, pool="gone", pool_total=None)
    assert reasons(CHAIN, f, {"a": T.SCHEDULED}) == ["pool 'gone' does not exist"]


def test_explain_tasks_waiting_ahead() -> None:
    f = explain_facts("a", T.SCHEDULED, pool="p", pool_total=4, pool_used=1, waiting_ahead=3)
    (reason,) = reasons(CHAIN, f, {"a": T.SCHEDULED})
    assert reason.startswith("3 task instances wait ahead of it in pool 'p'")


def test_explain_dag_max_active_tasks() -> None:
    g = DagGraph.from_spec(dag(task("a"), max_active_tasks=2))
    got = reasons(g, explain_facts("a", T.SCHEDULED, dag_active=2), {"a": T.SCHEDULED})
    assert got == ["its DAG runs 2 tasks, its max_active_tasks is 2"]
    assert "nothing holds" in reasons(g, explain_facts("a", T.SCHEDULED, dag_active=1), {"a": T.SCHEDULED})[0]


def test_explain_task_max_active_instances() -> None:
    g = graph(task("a", max_active_instances=1))
    got = reasons(g, explain_facts("a", T.SCHEDULED, task_active=1), {"a": T.SCHEDULED})
    assert got == ["1 instances of this task run, its max_active_instances is 1"]


def test_explain_run_waiting_for_max_active_runs() -> None:
    g = DagGraph.from_spec(dag(task("a"), max_active_runs=1))
    got = reasons(g, explain_facts("a", T.NONE, run_state="queued", dag_running_runs=1), {"a": T.NONE})
    assert got[0] == "its run waits to start: 1 of max_active_runs=1 runs of the DAG are running"


def test_explain_retry_time() -> None:
    f = explain_facts(
        "a", T.UP_FOR_RETRY, try_number=1, max_tries=3, next_retry_at=EXPLAIN_NOW + timedelta(seconds=42.25)
    )
    (reason,) = reasons(CHAIN, f, {"a": T.UP_FOR_RETRY})
    assert reason.startswith("try 1 of 3 failed; it retries in 42.2s (") or reason.startswith(
        "try 1 of 3 failed; it retries in 42.3s ("
    )
    assert (EXPLAIN_NOW + timedelta(seconds=42.25)).isoformat() in reason


def test_explain_overdue_retry_says_zero_and_unscheduled_retry_says_so() -> None:
    overdue = explain_facts(
        "a", T.UP_FOR_RETRY, try_number=2, max_tries=3, next_retry_at=EXPLAIN_NOW - timedelta(seconds=5)
    )
    assert "it retries in 0.0s" in reasons(CHAIN, overdue, {"a": T.UP_FOR_RETRY})[0]
    unset = explain_facts("a", T.UP_FOR_RETRY, try_number=1, max_tries=2)
    assert "at an unset time" in reasons(CHAIN, unset, {"a": T.UP_FOR_RETRY})[0]


def test_explain_queued_with_and_without_workers() -> None:
    (with_worker,) = reasons(CHAIN, explain_facts("a", T.QUEUED, queue="gpu"), {"a": T.QUEUED})
    assert with_worker == "it is queued on queue 'gpu', waiting for a worker with a free slot"
    (without,) = reasons(
        CHAIN, explain_facts("a", T.QUEUED, queue="gpu", workers_for_queue=0), {"a": T.QUEUED}
    )
    assert without.endswith("(no active worker serves queue 'gpu')")


def test_explain_scheduled_lists_every_admission_reason() -> None:
    g = DagGraph.from_spec(dag(task("a", max_active_instances=1), max_active_tasks=1))
    f = explain_facts(
        "a", T.SCHEDULED, pool="p", pool_total=1, pool_used=1, waiting_ahead=2, dag_active=1, task_active=1
    )
    got = reasons(g, f, {"a": T.SCHEDULED})
    assert len(got) == 4
    assert got[0].startswith("pool 'p' is full")
    assert got[1].startswith("2 task instances wait ahead")
    assert got[2].startswith("its DAG runs 1 tasks")
    assert got[3].startswith("1 instances of this task run")


# --- plan_timeout -----------------------------------------------------------------------------------


def test_timeout_fails_running_skips_unrun_and_keeps_finished() -> None:
    g = graph(
        task("done"),
        task("bad"),
        task("run", "done"),
        task("q"),
        task("sched"),
        task("retry"),
        task("later", "run"),
        task("never", "later"),
    )
    states = {
        "done": T.SUCCESS,
        "bad": T.FAILED,
        "run": T.RUNNING,
        "q": T.QUEUED,
        "sched": T.SCHEDULED,
        "retry": T.UP_FOR_RETRY,
        "later": T.NONE,
    }
    plan = plan_timeout(g, snaps(states))
    assert plan.run_state is RunState.FAILED
    assert plan.to_fail == ["run"]
    assert sorted(plan.to_skip) == ["later", "never", "q", "retry", "sched"]
    assert plan.to_create == ["never"]
    assert plan.to_queue == [] and plan.to_upstream_failed == [] and plan.to_schedule_retry == []


def test_timeout_of_a_run_without_task_instances_creates_them_skipped() -> None:
    g = graph(task("a"), task("b", "a"))
    plan = plan_timeout(g, {})
    assert sorted(plan.to_create) == ["a", "b"] and sorted(plan.to_skip) == ["a", "b"]
    assert plan.run_state is RunState.FAILED


def test_timeout_of_a_finished_run_still_fails_it_and_touches_no_task() -> None:
    g = graph(task("a"), task("b", "a"))
    plan = plan_timeout(g, {"a": TaskSnapshot(T.SUCCESS), "b": TaskSnapshot(T.SUCCESS)})
    assert plan.to_fail == [] and plan.to_skip == [] and plan.to_create == []
    assert plan.run_state is RunState.FAILED
