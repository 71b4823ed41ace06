"""The leader's run cache: what a pass gets back, what it drops, and what it costs at rest."""

from __future__ import annotations

import sys
import tracemalloc

import pytest

from schedd_core.planner import TaskSnapshot
from schedd_core.states import TaskState
from schedd_scheduler.run_cache import RunCache
from schedd_store.planning_reads import PlanningRun

QUEUED = TaskSnapshot(TaskState.QUEUED)


def _run(pk: int, tasks: int, *, first_ti: int = 1, control_version: int = 0) -> PlanningRun:
    run = PlanningRun(pk=pk, version_id=1, state="running", control_version=control_version)
    for i in range(tasks):
        key = sys.intern(f"t{i}")
        run.tasks[key] = QUEUED
        run.ti_ids[key] = first_ti + i
        run.tries[key] = 1
    return run


def _changes(pk: int, **states: TaskSnapshot) -> PlanningRun:
    fresh = PlanningRun(pk=pk, version_id=1, state="running", changed=set(states))
    for key, snapshot in states.items():
        fresh.tasks[key] = snapshot
        fresh.ti_ids[key] = 1000 + int(key[1:])
        fresh.tries[key] = 2
    return fresh


@pytest.mark.parametrize("cooled", [False, True])
def test_a_merge_gives_back_what_was_kept_overlaid_with_the_changes(cooled: bool) -> None:
    cache = RunCache(hot_tasks=3)
    kept = _run(7, 3)
    kept.tasks["t1"] = TaskSnapshot(TaskState.SUCCESS, follow=frozenset({"x"}))
    cache.keep(kept, dirty={2})
    if cooled:
        cache.keep(_run(8, 1), dirty=set())  # past the hot bound: 7 is compacted
    entry = cache.get(7)
    assert entry is not None and entry.dirty == {2}
    assert (entry.maps is None) is cooled
    merged = cache.merge(_changes(7, t2=TaskSnapshot(TaskState.RUNNING)))
    assert merged.tasks == {
        "t0": QUEUED,
        "t1": TaskSnapshot(TaskState.SUCCESS, follow=frozenset({"x"})),
        "t2": TaskSnapshot(TaskState.RUNNING),
    }
    assert merged.ti_ids == {"t0": 1, "t1": 2, "t2": 1002}
    assert merged.tries == {"t0": 1, "t1": 1, "t2": 2}
    # What was kept is not changed by a merge (a pass that fails leaves it as it was).
    assert cache.merge(_changes(7)).tasks["t2"] == QUEUED


def test_the_runs_used_most_recently_stay_dictionaries() -> None:
    cache = RunCache(hot_tasks=250)
    for pk in (1, 2, 3, 4):
        cache.keep(_run(pk, 100), dirty=set())
    hot = {pk for pk in (1, 2, 3, 4) if cache.get(pk).maps is not None}  # type: ignore[union-attr]
    assert hot == {3, 4}
    cache.keep(cache.merge(_changes(1)), dirty=set())  # used again: hot, and 3 cools
    hot = {pk for pk in (1, 2, 3, 4) if cache.get(pk).maps is not None}  # type: ignore[union-attr]
    assert hot == {1, 4}
    cache.drop(4)
    cache.keep(_run(5, 100), dirty=set())
    hot = {pk for pk in (1, 2, 3, 5) if cache.get(pk).maps is not None}  # type: ignore[union-attr]
    assert hot == {1, 5}


def test_the_runs_used_longest_ago_go_first_past_the_bound() -> None:
    cache = RunCache(max_tasks=250)
    for pk in (1, 2, 3):
        cache.keep(_run(pk, 100), dirty=set())
    assert 1 not in cache and 2 in cache and 3 in cache
    cache.merge(_changes(2, t0=QUEUED))  # 2 is now the most recently used
    cache.keep(_run(4, 100), dirty=set())
    assert 2 in cache and 3 not in cache and 4 in cache


def test_a_run_larger_than_the_bound_is_kept_alone() -> None:
    cache = RunCache(max_tasks=50)
    cache.keep(_run(1, 10), dirty=set())
    cache.keep(_run(2, 80), dirty=set())
    assert 1 not in cache and 2 in cache


def test_written_task_instances_and_hand_offs_stay_with_their_run() -> None:
    cache = RunCache()
    cache.keep(_run(1, 2), dirty=set(), handoffs={"t0": "t1"})
    cache.mark_written(1, {5})
    cache.mark_written(99, {6})  # a run it does not know: nothing to remember
    entry = cache.get(1)
    assert entry is not None and entry.dirty == {5}
    assert cache.handoffs(1) == {"t0": "t1"}
    assert cache.handoffs(99) is None
    cache.drop(1)
    assert 1 not in cache and cache.handoffs(1) is None


def test_a_kept_task_instance_costs_a_few_dozen_bytes() -> None:
    """A cooled entry is parallel tuples and arrays whose snapshots and keys are shared: 100k task
    instances in dictionaries of their own took the leader from 64 to 77 MB."""
    cache = RunCache(max_tasks=1_000_000, hot_tasks=100)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for pk in range(200):
            cache.keep(_run(pk, 100, first_ti=pk * 1000), dirty=set())
        per_task = (tracemalloc.get_traced_memory()[0] - before) / 20_000
    finally:
        tracemalloc.stop()
    assert per_task < 48, f"{per_task:.0f} bytes per kept task instance"
