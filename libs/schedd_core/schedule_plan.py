"""Which scheduled runs of a DAG to create now: a pure function of its timetable and state.

The store keeps, per DAG, the next interval whose run is to be created. Each time the leader looks
at a DAG (when that interval ends, when the DAG is registered or unpaused, when one of its runs
ends) :func:`plan_schedule` says which intervals get a run now and what to keep:

- **catch-up on**: every interval that has ended gets its run, oldest first, while the DAG has
  fewer than ``max_active_runs`` runs queued or running (0: no limit), at most ``limit`` a look;
- **catch-up off**: intervals older than the latest that has ended are skipped; only the latest
  gets a run (so a DAG registered with a start date a year ago, or unpaused after a week, runs
  once for the most recent interval, not 365 or 7 times);
- ``due_at`` says when to look again: the end of the next interval, *now* when the per-look
  limit was reached, and never (None) while ``max_active_runs`` holds creation back, since a run
  ending triggers a look anyway.

A leader outage changes nothing here: the next interval stays stored, and the next leader catches
up from it exactly as the catch-up rule says. Without a stored interval (a DAG seen for the first
time, or one whose schedule changed) planning starts after the DAG's latest scheduled or backfill
run (or where its previous schedule had got to, whichever is later), or at the first interval.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from schedd_core.timetables import DataInterval, Timetable


@dataclass(frozen=True)
class ScheduleState:
    #: The next interval whose run is to be created; None before the first look.
    next_interval: DataInterval | None
    catchup: bool
    #: Runs of the DAG (of any type) queued or running now.
    active_runs: int
    #: 0 for no limit.
    max_active_runs: int
    #: For a DAG without a stored next interval: planning starts after it (the logical date of its
    #: latest scheduled or backfill run, or where its previous schedule had got to).
    latest_logical_date: datetime | None = None


@dataclass
class SchedulePlan:
    create: list[DataInterval] = field(default_factory=list)
    #: The next interval to keep (None: the schedule has ended, or there is none).
    next_interval: DataInterval | None = None
    #: When to look at the DAG again; None: not on a timer.
    due_at: datetime | None = None


def plan_schedule(
    timetable: Timetable, state: ScheduleState, now: datetime, *, limit: int = 100
) -> SchedulePlan:
    """The runs to create now and what to keep; see the module docstring."""
    upcoming = _starting_interval(timetable, state, now)
    room = limit
    if state.max_active_runs:
        room = min(limit, max(0, state.max_active_runs - state.active_runs))
    plan = SchedulePlan()
    while upcoming is not None and upcoming.end <= now and len(plan.create) < room:
        plan.create.append(upcoming)
        upcoming = timetable.interval_after(upcoming)
    plan.next_interval = upcoming
    if upcoming is None:
        plan.due_at = None
    elif upcoming.end > now:
        plan.due_at = upcoming.end
    elif len(plan.create) >= limit:
        plan.due_at = now  # more are due than one look creates: look again at once
    else:
        plan.due_at = None  # held back by max_active_runs: a run ending brings the next look
    return plan


def _starting_interval(timetable: Timetable, state: ScheduleState, now: datetime) -> DataInterval | None:
    upcoming = state.next_interval
    if upcoming is None:
        if state.latest_logical_date is not None:
            upcoming = timetable.interval_starting_after(
                state.latest_logical_date + timedelta(microseconds=1)
            )
        else:
            upcoming = timetable.first_interval()
    if upcoming is not None and not state.catchup:
        latest = timetable.latest_interval(now)
        if latest is not None and latest.start > upcoming.start:
            upcoming = latest
    return upcoming


def upcoming_intervals(
    timetable: Timetable, state: ScheduleState, now: datetime, count: int
) -> Iterator[DataInterval]:
    """The next ``count`` intervals the scheduler will make runs for, in order (the first may have
    ended already: its run is due)."""
    interval = _starting_interval(timetable, state, now)
    for _ in range(count):
        if interval is None:
            return
        yield interval
        interval = timetable.interval_after(interval)
