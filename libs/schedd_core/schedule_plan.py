"""Which scheduled runs of a DAG to create now: a pure function of its timetable and state.

The store keeps, per DAG, the next run to create (its interval and logical date). Each time the
leader looks at a DAG (when that run's time comes, when the DAG is registered or unpaused, when
one of its runs ends) :func:`plan_schedule` says which runs to create now and what to keep:

- **catch-up on**: every run whose time has come is created, oldest first, while the DAG has
  fewer than ``max_active_runs`` runs queued or running (0: no limit), at most ``limit`` a look;
- **catch-up off**: runs older than the latest due one are skipped. The latest is created when it
  is the one the scheduler was waiting for; when it passed while nothing waited for it (a new or
  changed schedule, a pause, an outage of more than one tick) the timetable decides
  (:meth:`~schedd_core.timetables.Timetable.runs_missed`): data-interval timetables, events and
  ``@once`` create it, cron and delta triggers as their ``run_immediately`` says, else the next tick;
- **continuous**: one run when none of the DAG's runs is queued or running, covering from where the
  previous one ended to now; a run ending brings the next look;
- ``due_at`` says when to look again: the next run's time, *now* when the per-look limit was
  reached, and never (None) while ``max_active_runs`` or a continuous run holds creation back,
  since a run ending triggers a look anyway.

A leader outage changes nothing here: the next run stays stored, and the next leader goes on from
it as the catch-up rule says. Without a stored next run (a DAG seen for the first time, or one whose
schedule changed) planning starts at the first run of the timetable whose data interval starts at
or after ``covered_until`` and whose logical date is after ``latest_logical_date`` (both from the
store: the span the DAG's scheduled and backfill runs cover, and where a previous schedule had got
to), so a new schedule never covers again what a run covered; the span between ``covered_until``
and the first run's interval start is covered by no run.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from schedd_core.timetables import DataInterval, Timetable
from schedd_core.timetables_trigger import ContinuousTimetable

_MICROSECOND = timedelta(microseconds=1)


@dataclass(frozen=True)
class ScheduleState:
    #: The next run to create; None before the first look or after a schedule change.
    next_interval: DataInterval | None
    catchup: bool
    #: Runs of the DAG (of any type but backfill) queued or running now.
    active_runs: int
    #: 0 for no limit.
    max_active_runs: int
    #: Without a stored next run: the latest logical date of the DAG's scheduled and backfill runs.
    latest_logical_date: datetime | None = None
    #: Without a stored next run: the end of the span the DAG's runs cover (the latest end of their
    #: data intervals, of an unfinished backfill's intervals, and where a previous schedule had got to).
    covered_until: datetime | None = None


@dataclass
class SchedulePlan:
    create: list[DataInterval] = field(default_factory=list)
    #: The next run to keep (None: the schedule has ended, or there is none).
    next_interval: DataInterval | None = None
    #: When to look at the DAG again; None: not on a timer.
    due_at: datetime | None = None


def plan_schedule(
    timetable: Timetable, state: ScheduleState, now: datetime, *, limit: int = 100
) -> SchedulePlan:
    """The runs to create now and what to keep; see the module docstring."""
    if isinstance(timetable, ContinuousTimetable):
        return _plan_continuous(timetable, state, now)
    upcoming = _starting_interval(timetable, state, now)
    room = limit
    if state.max_active_runs:
        room = min(limit, max(0, state.max_active_runs - state.active_runs))
    plan = SchedulePlan()
    while upcoming is not None and upcoming.run_after <= now and len(plan.create) < room:
        plan.create.append(upcoming)
        upcoming = timetable.interval_after(upcoming)
    plan.next_interval = upcoming
    if upcoming is None:
        plan.due_at = None
    elif upcoming.run_after > now:
        plan.due_at = upcoming.run_after
    elif len(plan.create) >= limit:
        plan.due_at = now  # more are due than one look creates: look again at once
    else:
        plan.due_at = None  # held back by max_active_runs: a run ending brings the next look
    return plan


def _plan_continuous(timetable: ContinuousTimetable, state: ScheduleState, now: datetime) -> SchedulePlan:
    """The stored next run of a continuous DAG is an empty placeholder at the end of the last one."""
    since = _starting_interval(timetable, state, now)
    assert since is not None
    if state.active_runs:
        return SchedulePlan(next_interval=since, due_at=None)
    run = timetable.next_run(since.end, now)
    if run is not None:
        return SchedulePlan(create=[run], next_interval=DataInterval(run.end, run.end), due_at=None)
    assert timetable.start_date is not None
    if timetable.end_date is not None and now > timetable.end_date:
        return SchedulePlan()
    return SchedulePlan(next_interval=since, due_at=max(since.end, timetable.start_date) + _MICROSECOND)


def _starting_interval(timetable: Timetable, state: ScheduleState, now: datetime) -> DataInterval | None:
    upcoming = state.next_interval
    waited_for = upcoming is not None
    if upcoming is None:
        upcoming = timetable.first_from(state.covered_until, state.latest_logical_date)
    if upcoming is None or state.catchup or isinstance(timetable, ContinuousTimetable):
        return upcoming
    latest = timetable.latest_interval(now)
    if latest is None or latest.logical_date < upcoming.logical_date:
        return upcoming
    if latest.logical_date == upcoming.logical_date and waited_for:
        return upcoming  # the run the scheduler was waiting for: made however late
    if timetable.runs_missed(latest, now):
        return latest
    return timetable.interval_after(latest)


def upcoming_intervals(
    timetable: Timetable, state: ScheduleState, now: datetime, count: int
) -> Iterator[DataInterval]:
    """The next ``count`` runs the scheduler will make, in order (the first may be due already). A
    continuous DAG lists one: the run it would make now."""
    if isinstance(timetable, ContinuousTimetable):
        plan = _plan_continuous(timetable, state, now)
        yield from plan.create[:count]
        return
    interval = _starting_interval(timetable, state, now)
    for _ in range(count):
        if interval is None:
            return
        yield interval
        interval = timetable.interval_after(interval)
