"""Backfills and fair sharing as pure logic: the intervals a backfill covers and their order, each
strategy's next step, pools shared between backfill runs and the others, depends_on_past in the
planner, and numbers that keep their type on the way to a task."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from google.protobuf.timestamp_pb2 import Timestamp
from hypothesis import given, strategies as st

from schedd.v1 import resources_pb2 as pb
from schedd_core.admission import Candidate, Capacity, admit
from schedd_core.backfill_plan import (
    MAX_INTERVALS,
    IntervalStatus,
    Strategy,
    WindowEntry,
    backfill_intervals,
    plan_backfill,
)
from schedd_core.errors import InvalidArgument
from schedd_core.planner import TaskSnapshot, plan_run
from schedd_core.states import BackfillState, TaskState
from schedd_core.timetable_spec import timetable_of
from schedd_exec.assignments import merged_params
from schedd_rpc import convert
from tests.unit.helpers import graph, task

S = IntervalStatus
START = datetime(2024, 1, 1, tzinfo=UTC)


def daily() -> Any:
    stamp = Timestamp()
    stamp.FromDatetime(START)
    spec = pb.DagSpec(
        dag_id="d",
        schedule="@daily",
        start_date=stamp,
        tasks=[pb.TaskSpec(task_id="a", shell=pb.ShellCommand())],
    )
    return timetable_of(spec)


# --- the intervals of a backfill -----------------------------------------------------------------------


def test_a_backfill_covers_every_logical_date_in_its_range_in_order_with_chunks() -> None:
    planned = backfill_intervals(daily(), START, START + timedelta(days=9), backward=False, chunk_size=4)
    assert [p.interval.start.day for p in planned] == list(range(1, 11))
    assert [p.chunk for p in planned] == [0, 0, 0, 0, 1, 1, 1, 1, 2, 2]
    assert all(p.interval.end - p.interval.start == timedelta(days=1) for p in planned)


def test_a_backward_backfill_starts_with_the_newest_interval() -> None:
    planned = backfill_intervals(daily(), START, START + timedelta(days=4), backward=True, chunk_size=2)
    assert [p.interval.start.day for p in planned] == [5, 4, 3, 2, 1]
    assert [p.position for p in planned] == [0, 1, 2, 3, 4]


def test_a_backfill_may_reach_before_the_dags_start_date() -> None:
    planned = backfill_intervals(daily(), START - timedelta(days=3), START, backward=False, chunk_size=10)
    assert [p.interval.start for p in planned] == [START - timedelta(days=n) for n in (3, 2, 1, 0)]


@pytest.mark.parametrize(
    ("start", "end", "field"),
    [
        (START + timedelta(days=2), START, "backfill.end_date"),
        (START + timedelta(hours=1), START + timedelta(hours=2), "backfill.start_date"),
        (START, START + timedelta(days=MAX_INTERVALS + 1), "backfill.end_date"),
    ],
    ids=["end before start", "no interval in range", "too many intervals"],
)
def test_bad_ranges_are_refused_naming_the_field(start: datetime, end: datetime, field: str) -> None:
    with pytest.raises(InvalidArgument) as caught:
        backfill_intervals(daily(), start, end, backward=False, chunk_size=10)
    assert caught.value.field == field


# --- strategies ---------------------------------------------------------------------------------------


def window(*statuses: IntervalStatus, chunk_size: int = 100, first: int = 0) -> list[WindowEntry]:
    return [WindowEntry(first + n, (first + n) // chunk_size, s) for n, s in enumerate(statuses)]


def test_sequential_starts_one_run_at_a_time_and_stops_at_a_failure() -> None:
    assert plan_backfill(Strategy.SEQUENTIAL, window(S.PENDING), failed=False, max_active_runs=4).start == [0]
    busy = window(S.CREATED, S.PENDING)
    assert plan_backfill(Strategy.SEQUENTIAL, busy, failed=False, max_active_runs=4).start == []
    stopped = plan_backfill(Strategy.SEQUENTIAL, window(S.PENDING, first=3), failed=True, max_active_runs=4)
    assert (stopped.start, stopped.final) == ([], BackfillState.FAILED)


def test_parallel_keeps_max_active_runs_going_and_fails_only_at_the_end() -> None:
    step = plan_backfill(
        Strategy.PARALLEL, window(S.CREATED, *[S.PENDING] * 5), failed=True, max_active_runs=3
    )
    assert step.start == [1, 2] and step.final is None
    assert plan_backfill(Strategy.PARALLEL, window(S.CREATED), failed=True, max_active_runs=3).final is None
    assert plan_backfill(Strategy.PARALLEL, [], failed=True, max_active_runs=3).final is BackfillState.FAILED
    assert (
        plan_backfill(Strategy.PARALLEL, [], failed=False, max_active_runs=3).final is BackfillState.SUCCEEDED
    )


def test_chunked_starts_a_whole_chunk_and_the_next_only_after_it() -> None:
    first = plan_backfill(
        Strategy.CHUNKED, window(*[S.PENDING] * 3, chunk_size=3), failed=False, max_active_runs=1
    )
    assert first.start == [0, 1, 2]
    # Chunk 0 still has a run in flight: chunk 1 waits.
    mixed = [WindowEntry(2, 0, S.CREATED), WindowEntry(3, 1, S.PENDING), WindowEntry(4, 1, S.PENDING)]
    assert plan_backfill(Strategy.CHUNKED, mixed, failed=False, max_active_runs=1).start == []
    following = [WindowEntry(3, 1, S.PENDING), WindowEntry(4, 1, S.PENDING), WindowEntry(5, 1, S.PENDING)]
    assert plan_backfill(Strategy.CHUNKED, following, failed=False, max_active_runs=1).start == [3, 4, 5]
    failed = plan_backfill(Strategy.CHUNKED, following, failed=True, max_active_runs=1)
    assert (failed.start, failed.final) == ([], BackfillState.FAILED)


# --- fair sharing of pools ---------------------------------------------------------------------------------


def cand(ti_id: int, *, backfill: bool, day: int = 0, priority: int = 1, slots: int = 1) -> Candidate:
    return Candidate(
        ti_id=ti_id,
        dag_id="bf" if backfill else "sched",
        task_id=f"t{ti_id}",
        pool="p",
        pool_slots=slots,
        priority=priority,
        logical_date=START + timedelta(days=day),
        backfill=backfill,
    )


def lanes(admitted: list[Candidate]) -> tuple[int, int]:
    return sum(c.backfill for c in admitted), sum(not c.backfill for c in admitted)


def test_backfills_hold_at_most_their_share_while_scheduled_work_waits() -> None:
    # Backfill candidates are older (they would win every slot on order alone).
    candidates = [cand(n, backfill=True, day=-100 + n) for n in range(20)] + [
        cand(100 + n, backfill=False) for n in range(20)
    ]
    capacity = Capacity(pool_slots={"p": 10}, pool_used={"p": 0}, backfill_share={"p": 0.3})
    assert lanes(admit(candidates, capacity)) == (3, 7)


def test_each_side_borrows_the_idle_slots_of_the_other() -> None:
    only_backfill = [cand(n, backfill=True) for n in range(20)]
    capacity = Capacity(pool_slots={"p": 10}, pool_used={"p": 0}, backfill_share={"p": 0.3})
    assert lanes(admit(only_backfill, capacity)) == (10, 0)
    few_scheduled = [cand(n, backfill=True, day=-1) for n in range(20)] + [cand(100, backfill=False)]
    capacity = Capacity(pool_slots={"p": 10}, pool_used={"p": 0}, backfill_share={"p": 0.3})
    assert lanes(admit(few_scheduled, capacity)) == (9, 1)


def test_scheduled_work_does_not_starve_a_backfill_of_its_share() -> None:
    candidates = [cand(n, backfill=True) for n in range(20)] + [
        cand(100 + n, backfill=False, priority=50) for n in range(20)
    ]
    capacity = Capacity(pool_slots={"p": 10}, pool_used={"p": 0}, backfill_share={"p": 0.3})
    assert lanes(admit(candidates, capacity)) == (3, 7)


def test_borrowed_slots_return_to_the_waiting_side_as_they_free_up() -> None:
    # Backfills borrowed all 10 slots; 2 ended. Scheduled work waits: it gets both, backfills none.
    candidates = [cand(n, backfill=True) for n in range(5)] + [
        cand(100 + n, backfill=False) for n in range(5)
    ]
    capacity = Capacity(
        pool_slots={"p": 10}, pool_used={"p": 8}, backfill_share={"p": 0.3}, backfill_used={"p": 8}
    )
    assert lanes(admit(candidates, capacity)) == (0, 2)


@given(
    slots=st.integers(1, 40),
    share=st.sampled_from([0.0, 0.1, 0.25, 0.5, 0.75, 1.0]),
    backfills=st.integers(0, 60),
    others=st.integers(0, 60),
)
def test_no_slot_idles_while_work_waits_and_no_pool_overflows(
    slots: int, share: float, backfills: int, others: int
) -> None:
    candidates = [cand(n, backfill=True) for n in range(backfills)] + [
        cand(1000 + n, backfill=False) for n in range(others)
    ]
    capacity = Capacity(pool_slots={"p": slots}, pool_used={"p": 0}, backfill_share={"p": share})
    admitted = admit(candidates, capacity)
    assert len(admitted) == min(slots, backfills + others)
    backfill_count, other_count = lanes(admitted)
    if others > other_count:  # scheduled work still waits: backfills are within their share
        assert backfill_count <= max(int(share * slots), 1 if share > 0 else 0)
    if backfills > backfill_count:
        assert other_count <= max(slots - int(share * slots), 1 if share < 1 else 0)


# --- depends_on_past ------------------------------------------------------------------------------------


def test_a_task_depending_on_its_past_waits_for_the_previous_runs_task() -> None:
    g = graph(task("load", depends_on_past=True), task("report", "load"))
    fresh: dict[str, TaskSnapshot] = {}
    assert plan_run(g, fresh, {"load": TaskState.RUNNING}).to_queue == []
    assert plan_run(g, fresh, {"load": TaskState.NONE}).to_queue == []
    assert plan_run(g, fresh, {"load": TaskState.FAILED}).to_queue == []
    assert plan_run(g, fresh, {"load": TaskState.SUCCESS}).to_queue == ["load"]
    assert plan_run(g, fresh, {"load": TaskState.SKIPPED}).to_queue == ["load"]
    assert plan_run(g, fresh, {}).to_queue == ["load"]  # a first run
    assert plan_run(g, fresh).to_queue == ["load"]


def test_depends_on_past_does_not_hide_an_upstream_failure() -> None:
    g = graph(task("extract"), task("load", "extract", depends_on_past=True))
    plan = plan_run(g, {"extract": TaskSnapshot(TaskState.FAILED)}, {"load": TaskState.RUNNING})
    assert plan.to_upstream_failed == ["load"]


# --- numbers keep their type -------------------------------------------------------------------------------


def test_integral_numbers_reach_a_task_as_integers() -> None:
    struct = convert.struct({"n": 10, "ratio": 0.5, "nested": {"k": [1, 2.5, 3]}, "big": 2**60})
    assert convert.from_struct(struct) == {
        "n": 10,
        "ratio": 0.5,
        "nested": {"k": [1, 2.5, 3]},
        "big": float(2**60),
    }
    assert isinstance(convert.from_struct(struct)["n"], int)


def test_params_are_the_dags_then_the_tasks_then_the_runs_conf() -> None:
    dag = pb.DagSpec(params=convert.struct({"region": "eu", "limit": 5, "day": "mon"}))
    task_spec = pb.TaskSpec(params=convert.struct({"limit": 7}))
    assert merged_params(dag, task_spec, {"day": "tue"}) == {"region": "eu", "limit": 7, "day": "tue"}
    assert merged_params(pb.DagSpec(), pb.TaskSpec(), {}) == {}
