"""Trigger timetables (Airflow 3's default for cron strings): a run at each tick.

A trigger run at tick ``T`` has the logical date ``T``, is made at ``T``, and covers the data
interval ``[T - interval, T]``: empty (``[T, T]``) unless the timetable has an ``interval``, which
is absolute time (one hour is 3600 seconds, also across a DST transition). Consecutive runs'
intervals may overlap (an interval longer than the time between ticks) or leave gaps (shorter):
a trigger timetable promises runs at ticks, not a partition of time.

- :class:`CronTriggerTimetable`: the ticks of one cron expression in the DAG's time zone, with the
  DST rules of :mod:`schedd_core.timetables` (a skipped local time fires once right after the gap,
  a repeated one once at its first occurrence, frequent schedules every real hour);
- :class:`MultipleCronTriggerTimetable`: the ticks of any of several crons; a moment two of them
  share is one tick (one run);
- :class:`DeltaTriggerTimetable`: ``start_date + k * delta``;
- :class:`EventsTimetable`: explicit moments; :class:`OnceTimetable` (``@once``): the start date;
- :class:`ContinuousTimetable` (``@continuous``): no ticks; a run as soon as the previous one ended.

The first tick is the first at or after the start date (the interval may reach before it); no tick
after the end date runs. With catch-up off, a tick that passed while the scheduler was not
waiting for it (the DAG was new, changed, paused, or no scheduler led) runs only as
``run_immediately`` says: True, always; a timedelta, if the tick is at most that old; False (the
default), never: the DAG waits for its next tick. Events and ``@once`` always run it.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Sequence
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from schedd_core.timetables import DataInterval, Timetable, cron_next, cron_previous

_TICK = timedelta(microseconds=1)

#: How a trigger timetable treats the latest missed tick with catch-up off (see the module).
RunImmediately = bool | timedelta


class TickTimetable(Timetable):
    """A trigger timetable whose runs are the ticks ``_next_tick`` and ``_previous_tick`` list."""

    def __init__(
        self,
        start_date: datetime | None,
        end_date: datetime | None,
        *,
        interval: timedelta = timedelta(0),
        run_immediately: RunImmediately = False,
    ) -> None:
        super().__init__(start_date, end_date)
        self.interval = interval
        self.run_immediately = run_immediately

    def _next_tick(self, after: datetime) -> datetime | None:
        """The first tick strictly after ``after``, start and end dates aside."""
        raise NotImplementedError

    def _previous_tick(self, before: datetime) -> datetime | None:
        """The last tick strictly before ``before``, start and end dates aside."""
        raise NotImplementedError

    def _run(self, tick: datetime | None) -> DataInterval | None:
        if tick is None or (self.end_date is not None and tick > self.end_date):
            return None
        return DataInterval(tick - self.interval, tick, logical=tick)

    def first_interval(self) -> DataInterval | None:
        return self._run(self._next_tick(self._earliest() - _TICK))

    def interval_after(self, interval: DataInterval) -> DataInterval | None:
        return self._run(self._next_tick(interval.logical_date))

    def interval_starting_after(self, moment: datetime) -> DataInterval | None:
        return self._run(self._next_tick(max(moment + self.interval, self._earliest()) - _TICK))

    def latest_interval(self, now: datetime) -> DataInterval | None:
        tick = self._previous_tick(now + _TICK)
        if tick is not None and self.end_date is not None and tick > self.end_date:
            tick = self._previous_tick(self.end_date + _TICK)
        if tick is None or tick < self._earliest():
            return None
        return self._run(tick)

    def intervals_between(self, start: datetime, end: datetime) -> Iterator[DataInterval]:
        tick = self._next_tick(start - _TICK)
        while tick is not None and tick <= end:
            yield DataInterval(tick - self.interval, tick, logical=tick)
            tick = self._next_tick(tick)

    def runs_missed(self, run: DataInterval, now: datetime) -> bool:
        if isinstance(self.run_immediately, timedelta):
            return now - run.logical_date <= self.run_immediately
        return self.run_immediately


class CronTriggerTimetable(TickTimetable):
    kind = "cron_trigger"

    def __init__(
        self,
        expression: str,
        zone: ZoneInfo,
        start_date: datetime | None,
        end_date: datetime | None,
        *,
        interval: timedelta = timedelta(0),
        run_immediately: RunImmediately = False,
    ) -> None:
        super().__init__(start_date, end_date, interval=interval, run_immediately=run_immediately)
        self.expression = expression
        self.zone = zone

    def _next_tick(self, after: datetime) -> datetime | None:
        return cron_next(self.expression, self.zone, after)

    def _previous_tick(self, before: datetime) -> datetime | None:
        return cron_previous(self.expression, self.zone, before)


class MultipleCronTriggerTimetable(TickTimetable):
    kind = "multiple_cron_trigger"

    def __init__(
        self,
        expressions: Sequence[str],
        zone: ZoneInfo,
        start_date: datetime | None,
        end_date: datetime | None,
        *,
        interval: timedelta = timedelta(0),
        run_immediately: RunImmediately = False,
    ) -> None:
        super().__init__(start_date, end_date, interval=interval, run_immediately=run_immediately)
        self.expressions = tuple(expressions)
        self.zone = zone

    def _next_tick(self, after: datetime) -> datetime | None:
        ticks = [t for e in self.expressions if (t := cron_next(e, self.zone, after)) is not None]
        return min(ticks, default=None)

    def _previous_tick(self, before: datetime) -> datetime | None:
        ticks = [t for e in self.expressions if (t := cron_previous(e, self.zone, before)) is not None]
        return max(ticks, default=None)


class DeltaTriggerTimetable(TickTimetable):
    """Ticks at ``start_date + k * delta`` (also before the start date, for backfills)."""

    kind = "delta_trigger"

    def __init__(
        self,
        delta: timedelta,
        start_date: datetime,
        end_date: datetime | None,
        *,
        interval: timedelta = timedelta(0),
        run_immediately: RunImmediately = False,
    ) -> None:
        super().__init__(start_date, end_date, interval=interval, run_immediately=run_immediately)
        self.delta = delta

    def _next_tick(self, after: datetime) -> datetime | None:
        assert self.start_date is not None
        return self.start_date + ((after - self.start_date) // self.delta + 1) * self.delta

    def _previous_tick(self, before: datetime) -> datetime | None:
        assert self.start_date is not None
        return self.start_date + (-((self.start_date - before) // self.delta) - 1) * self.delta


class EventsTimetable(TickTimetable):
    """Runs at explicit moments (at least one; duplicates are one event); without a start date the
    first event is the first run; catch-up off runs the latest missed one."""

    kind = "events"

    def __init__(
        self,
        events: Sequence[datetime],
        start_date: datetime | None,
        end_date: datetime | None,
        *,
        restrict_to_events: bool = False,
    ) -> None:
        ordered = sorted(set(events))
        super().__init__(start_date if start_date is not None else ordered[0], end_date, run_immediately=True)
        self.events = ordered
        self.restrict_to_events = restrict_to_events

    def _next_tick(self, after: datetime) -> datetime | None:
        index = bisect.bisect_right(self.events, after)
        return self.events[index] if index < len(self.events) else None

    def _previous_tick(self, before: datetime) -> datetime | None:
        index = bisect.bisect_left(self.events, before)
        return self.events[index - 1] if index > 0 else None


class OnceTimetable(EventsTimetable):
    """``@once``: one run, at the start date (at once if it has passed, catch-up on or off)."""

    kind = "once"

    def __init__(self, start_date: datetime, end_date: datetime | None) -> None:
        super().__init__([start_date], start_date, end_date)


class ContinuousTimetable(Timetable):
    """``@continuous``: a run as soon as the previous one ended, never two at once.

    Its runs chain: each covers ``[previous run's end (or the start date), the moment it is made]``
    with the interval's start as logical date, so consecutive runs neither overlap nor leave a gap,
    and logical dates strictly increase. It has no ticks: nothing to backfill, nothing to list in
    advance but the next run. :func:`schedd_core.schedule_plan.plan_schedule` makes its runs."""

    kind = "continuous"

    def next_run(self, since: datetime, now: datetime) -> DataInterval | None:
        """The run to make at ``now`` when the previous one covered up to ``since`` (None: none yet,
        or the end date has passed)."""
        assert self.start_date is not None
        start = max(since, self.start_date)
        if now <= start or (self.end_date is not None and now > self.end_date):
            return None
        return DataInterval(start, now)

    def first_from(self, covered_until: datetime | None, after: datetime | None) -> DataInterval | None:
        """Where the chain starts: an empty interval at the latest of the start date, the covered
        span's end and just after the latest logical date (a placeholder for :meth:`next_run`)."""
        assert self.start_date is not None
        since = max(m for m in (self.start_date, covered_until, after + _TICK if after else None) if m)
        return DataInterval(since, since)
