"""The leader's time-based wake-ups: when a deadline is due, and when the deadline timer looks next.

A deadline is a retry coming due (``up_for_retry`` with its retry time set), the next poke of a
reschedule-mode sensor (``up_for_reschedule``) or a run's timeout. The deadline timer reads them
with the database's ``now()`` and hands the due ones to the scheduling loop, whose pass reads the
run again, later, with its own ``now()``. Both decide with the same predicates: :func:`retry_due`
is what the pass's ``next_retry_at <= now()`` computes, and :func:`run_timed_out` is what the pass
calls. So a deadline the timer finds due is one the pass acts on (the database's clock does not go
back between the two reads), and one the timer finds not yet due is one it waits for.

What :class:`WakePlanner` guarantees, for the deadlines read at ``now``:

- a due deadline is handed over (its run woken) the first time a look finds it due;
- a deadline that a later look still finds due (no pass acted on it yet: the pass was busy, failed,
  or the database's clock stepped back) is handed over again, ``OVERDUE_RECHECK_FIRST`` later, then
  twice as late each time, at most ``OVERDUE_RECHECK_MAX`` apart: never dropped, never a busy loop;
- the next look is no later than the earliest deadline still to come plus ``WAKE_MARGIN`` (so the
  timer looks just after it, not a hair before), and no later than ``idle_recheck``;
- a due deadline of a paused DAG is not handed over: the pass does not plan paused runs, and
  unpausing a DAG wakes its unfinished runs.

Not guaranteed here: that a pass runs soon after its run is woken (the scheduling loop's part), and
anything about a deadline the look did not read (a pass that makes a new deadline pokes the timer,
which looks again).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import NamedTuple

from schedd_core.planner import TaskSnapshot
from schedd_core.states import TaskState

#: Seconds added to the wait for a deadline still to come, so the next look finds it due.
WAKE_MARGIN = 0.005
#: Seconds after which a deadline found due, and not acted on since, is handed over again.
OVERDUE_RECHECK_FIRST = 0.1
#: The longest wait between two hand-overs of a deadline that stays due.
OVERDUE_RECHECK_MAX = 1.0


def retry_due(at: datetime, now: datetime) -> bool:
    """A retry or a sensor's next poke set for ``at`` is due at ``now`` (the pass's
    ``next_retry_at <= now()``)."""
    return at <= now


def run_timed_out(age: float, timeout: float) -> bool:
    """A run that has been running ``age`` seconds has reached its ``timeout`` (seconds, > 0)."""
    return age >= timeout


def waits_for_time(snap: TaskSnapshot) -> bool:
    """A task instance waiting for a moment still to come: a retry with its time set, or a sensor's
    next poke. A pass that reads one tells the timer, which may not know that moment yet."""
    if snap.retry_due:
        return False
    if snap.state is TaskState.UP_FOR_RESCHEDULE:
        return True
    return snap.state is TaskState.UP_FOR_RETRY and not snap.retry_unscheduled


class Deadline(NamedTuple):
    """One deadline as a look read it: due when ``remaining`` (seconds) is not positive."""

    #: Identifies the deadline across looks (the same key is the same deadline).
    key: Hashable
    run_pk: int
    remaining: float
    paused: bool = False


def task_deadline(ti_id: int, run_pk: int, at: datetime, now: datetime, *, paused: bool = False) -> Deadline:
    """A retry or a sensor's next poke, set for ``at``; due exactly when :func:`retry_due` says so."""
    return Deadline(("task", ti_id, at), run_pk, (at - now) / timedelta(seconds=1), paused)


def timeout_deadline(run_pk: int, age: float, timeout: float, *, paused: bool = False) -> Deadline:
    """A run's timeout; due exactly when :func:`run_timed_out` says so."""
    return Deadline(("run", run_pk), run_pk, timeout - age, paused)


@dataclass(frozen=True)
class Wake:
    #: The runs to evaluate now.
    runs: frozenset[int]
    #: Seconds until the next look.
    delay: float


@dataclass
class _Handed:
    again_at: datetime
    interval: float


class WakePlanner:
    """Decides, at each look of the deadline timer, which runs to wake and when to look next. It
    remembers the due deadlines it handed over, to hand them over again while they stay due."""

    def __init__(self, *, idle_recheck: float = 30.0) -> None:
        self._idle_recheck = idle_recheck
        self._handed: dict[Hashable, _Handed] = {}

    def plan(self, now: datetime, deadlines: Iterable[Deadline]) -> Wake:
        """The runs whose deadlines are due and not handed over recently, and the next look's delay."""
        delay = self._idle_recheck
        runs: set[int] = set()
        handed: dict[Hashable, _Handed] = {}
        for deadline in deadlines:
            if deadline.remaining > 0:
                delay = min(delay, deadline.remaining + WAKE_MARGIN)
                continue
            if deadline.paused:
                continue
            entry = self._handed.get(deadline.key)
            if entry is None:
                entry = _Handed(now + timedelta(seconds=OVERDUE_RECHECK_FIRST), OVERDUE_RECHECK_FIRST)
                runs.add(deadline.run_pk)
            elif entry.again_at <= now:
                interval = min(entry.interval * 2, OVERDUE_RECHECK_MAX)
                entry = _Handed(now + timedelta(seconds=interval), interval)
                runs.add(deadline.run_pk)
            handed[deadline.key] = entry
            wait = min((entry.again_at - now) / timedelta(seconds=1), entry.interval)
            delay = min(delay, wait)
        self._handed = handed
        return Wake(frozenset(runs), max(delay, WAKE_MARGIN))
