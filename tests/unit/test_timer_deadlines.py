"""The deadline timer's decisions (``schedd_core.deadlines``) on a fake clock: when a retry, a sensor's
next poke or a run's timeout is handed to the scheduling pass, and that the pass agrees it is due.

A small simulation drives :class:`WakePlanner` the way the timer does: look, hand the due runs over,
sleep the delay it asks for (the fake clock advances by exactly that), look again. The pass is
modelled as acting on a handed deadline (it leaves the read) or, for a stuck one, not yet.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import pytest
from hypothesis import given, settings, strategies as st

from schedd_core.clock import FakeClock
from schedd_core.deadlines import (
    OVERDUE_RECHECK_FIRST,
    OVERDUE_RECHECK_MAX,
    WAKE_MARGIN,
    WakePlanner,
    retry_due,
    run_timed_out,
    task_deadline,
    timeout_deadline,
    waits_for_time,
)
from schedd_core.planner import TaskSnapshot, plan_run
from schedd_core.states import TaskState
from tests.unit.helpers import graph, task

T = TaskState
MICROSECOND = timedelta(microseconds=1)
#: Float rounding of datetime arithmetic: far below the margin the bounds allow.
SLACK = 1e-6


def seconds(delta: timedelta) -> float:
    return delta / timedelta(seconds=1)


@dataclass
class World:
    """Retries set for given moments; the pass acts on one once it has been handed ``stuck[ti]``
    more times than zero (a stuck deadline is handed again until then)."""

    clock: FakeClock
    due_at: dict[int, datetime]
    stuck: dict[int, int] = field(default_factory=dict)
    paused: frozenset[int] = frozenset()
    #: Per task instance (its run has the same id): the moments it was handed over.
    handed: dict[int, list[datetime]] = field(default_factory=dict)
    looks: int = 0

    def run(self, planner: WakePlanner, until: datetime) -> None:
        while self.clock.now() <= until:
            now = self.clock.now()
            every = [
                task_deadline(ti, ti, at, now, paused=ti in self.paused) for ti, at in self.due_at.items()
            ]
            # What the timer reads: every due deadline, and the next one still to come.
            read = [d for d in every if d.remaining <= 0]
            read += sorted((d for d in every if d.remaining > 0), key=lambda d: d.remaining)[:1]
            wake = planner.plan(now, read)
            self.looks += 1
            for ti in wake.runs:
                self.handed.setdefault(ti, []).append(now)
                if self.stuck.get(ti, 0) > 0:
                    self.stuck[ti] -= 1
                else:
                    del self.due_at[ti]  # the pass queued it
            self.clock.advance(wake.delay)


def test_a_retry_still_to_come_is_waited_for_until_just_after_it() -> None:
    clock = FakeClock()
    planner = WakePlanner()
    at = clock.now() + timedelta(seconds=1)
    wake = planner.plan(clock.now(), [task_deadline(7, 70, at, clock.now())])
    assert wake.runs == frozenset()
    assert wake.delay == pytest.approx(1 + WAKE_MARGIN)
    clock.advance(wake.delay)
    wake = planner.plan(clock.now(), [task_deadline(7, 70, at, clock.now())])
    assert wake.runs == {70}


def test_an_overdue_retry_does_not_hide_the_next_one() -> None:
    """Three runs' retries, 0.4 s apart: when the first is handed over and not yet acted on, the timer
    still wakes for the second and the third on time (the lateness backfill runs saw was 30 s)."""
    clock = FakeClock()
    start = clock.now()
    world = World(clock, {1: start + timedelta(seconds=1.0), 2: start + timedelta(seconds=1.4)})
    world.due_at[3] = start + timedelta(seconds=1.8)
    world.stuck = {1: 1}  # the pass takes a while: the first look after it was handed still sees it
    world.run(WakePlanner(), start + timedelta(seconds=5))
    for ti, due in ((1, 1.0), (2, 1.4), (3, 1.8)):
        assert ti in world.handed, f"retry {ti} was never handed over: {world.handed}"
        late = seconds(world.handed[ti][0] - (start + timedelta(seconds=due)))
        assert 0 <= late <= WAKE_MARGIN + SLACK, (ti, late)


def test_a_due_retry_the_pass_does_not_act_on_is_handed_over_again_at_bounded_growing_intervals() -> None:
    clock = FakeClock()
    start = clock.now()
    world = World(clock, {1: start}, stuck={1: 10**6})
    world.run(WakePlanner(), start + timedelta(seconds=20))
    gaps = [seconds(b - a) for a, b in itertools.pairwise(world.handed[1])]
    assert gaps[:6] == pytest.approx([0.1, 0.2, 0.4, 0.8, 1.0, 1.0])
    assert all(OVERDUE_RECHECK_FIRST - SLACK <= g <= OVERDUE_RECHECK_MAX + SLACK for g in gaps), gaps
    assert len(world.handed[1]) >= 20 - 2, "never dropped"
    assert world.looks <= len(world.handed[1]) + 1, "no look in between: not a busy loop"


def test_a_paused_dags_due_retry_is_left_to_unpausing() -> None:
    clock = FakeClock()
    start = clock.now()
    world = World(clock, {1: start, 2: start + timedelta(seconds=3)}, paused=frozenset({1}))
    world.run(WakePlanner(idle_recheck=30.0), start + timedelta(seconds=10))
    assert 1 not in world.handed
    assert seconds(world.handed[2][0] - (start + timedelta(seconds=3))) <= WAKE_MARGIN + SLACK
    assert world.looks <= 3


def test_with_nothing_to_wait_for_the_timer_looks_again_after_idle_recheck() -> None:
    assert WakePlanner(idle_recheck=30.0).plan(FakeClock().now(), []).delay == 30.0


def test_a_new_retry_of_the_same_task_instance_is_handed_over_at_once() -> None:
    clock = FakeClock()
    planner = WakePlanner()
    first = clock.now()
    assert planner.plan(clock.now(), [task_deadline(1, 10, first, clock.now())]).runs == {10}
    clock.advance(0.01)
    second = clock.now()
    assert planner.plan(clock.now(), [task_deadline(1, 10, second, clock.now())]).runs == {10}


# --- the timer and the pass agree at the boundary ----------------------------------------------------


@pytest.mark.parametrize("state", [T.UP_FOR_RETRY, T.UP_FOR_RESCHEDULE])
@pytest.mark.parametrize("offset", [-MICROSECOND, timedelta(0), MICROSECOND])
def test_the_timer_hands_over_a_retry_or_poke_exactly_when_the_pass_queues_it(
    state: TaskState, offset: timedelta
) -> None:
    clock = FakeClock()
    now = clock.now()
    at = now + offset
    handed = WakePlanner().plan(now, [task_deadline(1, 10, at, now)]).runs == {10}
    g = graph(task("t"))
    queued = plan_run(g, {"t": TaskSnapshot(state, retry_due=retry_due(at, now))}).to_queue == ["t"]
    assert handed == queued == (offset <= timedelta(0))


@pytest.mark.parametrize("offset", [-1e-6, 0.0, 1e-6])
def test_the_timer_hands_over_a_run_timeout_exactly_when_the_pass_times_the_run_out(offset: float) -> None:
    timeout = 60.0
    age = timeout + offset
    handed = WakePlanner().plan(FakeClock().now(), [timeout_deadline(10, age, timeout)]).runs == {10}
    assert handed == run_timed_out(age, timeout) == (offset >= 0)


def test_after_waiting_the_delay_the_pass_finds_the_retry_due() -> None:
    """The timer looks a few milliseconds before a retry: it waits, and when it looks again the
    pass's own reading of the clock (later still) finds the retry due."""
    clock = FakeClock()
    planner = WakePlanner()
    at = clock.now() + timedelta(seconds=0.004)
    wake = planner.plan(clock.now(), [task_deadline(1, 10, at, clock.now())])
    assert wake.runs == frozenset()
    clock.advance(wake.delay)
    assert planner.plan(clock.now(), [task_deadline(1, 10, at, clock.now())]).runs == {10}
    clock.advance(0.003)  # the pass reads the run a little later
    g = graph(task("t"))
    snap = TaskSnapshot(T.UP_FOR_RETRY, retry_due=retry_due(at, clock.now()))
    assert plan_run(g, {"t": snap}).to_queue == ["t"]


@pytest.mark.parametrize(
    ("snap", "waits"),
    [
        (TaskSnapshot(T.UP_FOR_RESCHEDULE), True),
        (TaskSnapshot(T.UP_FOR_RESCHEDULE, retry_due=True), False),
        (TaskSnapshot(T.UP_FOR_RETRY), True),
        (TaskSnapshot(T.UP_FOR_RETRY, retry_unscheduled=True), False),
        (TaskSnapshot(T.UP_FOR_RETRY, retry_due=True), False),
        (TaskSnapshot(T.RUNNING), False),
    ],
)
def test_a_pass_tells_the_timer_about_every_task_instance_waiting_for_a_moment(
    snap: TaskSnapshot, waits: bool
) -> None:
    assert waits_for_time(snap) is waits


# --- every deadline, whatever the others do ----------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(
    offsets=st.lists(st.integers(min_value=0, max_value=5_000_000), min_size=1, max_size=12),
    stuck=st.lists(st.integers(min_value=0, max_value=3), min_size=12, max_size=12),
)
def test_every_deadline_is_handed_over_within_the_margin_of_its_due_time(
    offsets: list[int], stuck: list[int]
) -> None:
    """Deadlines up to 5 s ahead (microseconds), some of them not acted on by the first passes: each
    one is first handed over no earlier than its due time and at most ``WAKE_MARGIN`` after it."""
    clock = FakeClock()
    start = clock.now()
    due = {i: start + timedelta(microseconds=o) for i, o in enumerate(offsets)}
    world = World(clock, dict(due), stuck=dict(enumerate(stuck)))
    world.run(WakePlanner(), start + timedelta(seconds=10))
    for ti, at in due.items():
        assert ti in world.handed, f"deadline {ti} was never handed over: {world.handed}"
        late = seconds(world.handed[ti][0] - at)
        assert 0 <= late <= WAKE_MARGIN + SLACK, (ti, late)
    assert not world.due_at, "every stuck deadline was handed over again until acted on"
