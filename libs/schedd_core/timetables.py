"""Data-interval timetables, and what every timetable answers.

A scheduled (or backfill) run covers a *data interval* and has a *logical date*; it is made at its
*run time*, the interval's end. Two families decide them (Airflow's names):

- **data-interval** timetables (this module): a run per interval ``[start, end)`` between two
  consecutive schedule times, logical date ``start``, made once the interval has ended, when the
  data it covers is complete: the ``@daily`` run for 2024-01-01 covers that day and is made just
  after midnight of 2024-01-02. ``CronDataIntervalTimetable`` (a cron expression or preset, in the
  DAG's IANA time zone, evaluated by ``cronsim``) and ``DeltaDataIntervalTimetable`` (a fixed
  duration counted from the start date, in absolute time). The first interval starts at the first
  schedule time at or after the start date; none starts after the end date.
- **trigger** timetables (:mod:`schedd_core.timetables_trigger`): a run at each tick ``T``, logical
  date ``T``, data interval ``[T - interval, T]`` (empty by default).

Daylight saving time, for cron schedules of either family (fields are local wall-clock times):

- a local time skipped by a spring-forward transition fires once, at the first instant after the
  gap (``30 2 * * *`` in Europe/Berlin fires at 03:00 that day), so that day's interval is an
  hour short;
- a local time repeated by a fall-back transition fires once, at its first occurrence (an
  interval that contains the repeated hour is an hour long), unless the hour field is ``*`` or a
  step: such frequent schedules fire in both occurrences, every real interval;
- so no interval is ever empty or scheduled twice. Fixed-duration timetables ignore DST
  altogether: ``timedelta(days=1)`` is always 24 hours.

Everything here is pure: datetimes in and out are timezone-aware, results in UTC.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from schedd.v1 import resources_pb2 as pb
from schedd_core.errors import InvalidArgument, quote

PRESETS = {
    "@hourly": "0 * * * *",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@weekly": "0 0 * * 0",
    "@monthly": "0 0 1 * *",
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
}
MIN_INTERVAL = timedelta(seconds=1)
MAX_INTERVAL = timedelta(days=366)
_TICK = timedelta(microseconds=1)


@dataclass(frozen=True)
class DataInterval:
    """One run of a timetable: its data interval ``[start, end)`` in UTC (``[start, end]`` for a
    trigger run, possibly empty), its logical date (``start`` unless ``logical`` says otherwise:
    a trigger run's is its tick, ``end``) and its run time, ``end``."""

    start: datetime
    end: datetime
    #: The logical date when it is not ``start``; equal to ``start`` is kept as None.
    logical: datetime | None = None

    def __post_init__(self) -> None:
        if self.logical is not None and self.logical == self.start:
            object.__setattr__(self, "logical", None)

    @property
    def logical_date(self) -> datetime:
        return self.start if self.logical is None else self.logical

    @property
    def run_after(self) -> datetime:
        """When its run is made (the interval's end, for every timetable)."""
        return self.end


class Timetable:
    """No schedule: manual runs only. The base of every timetable.

    Every timetable lists its runs in strictly increasing logical dates and run times, so a run is
    identified by its logical date, and walking from one run to the next leaves none out."""

    kind = "none"

    def __init__(self, start_date: datetime | None = None, end_date: datetime | None = None) -> None:
        self.start_date = start_date
        self.end_date = end_date

    def first_interval(self) -> DataInterval | None:
        """The first run at or after the start date, or None."""
        return None

    def runs_missed(self, run: DataInterval, now: datetime) -> bool:
        """With catch-up off: whether ``run``, the latest due one, is made although the scheduler was
        not waiting for it (a new or changed schedule, a pause, an outage). Data-interval timetables
        always make it; trigger timetables as their ``run_immediately`` says."""
        return True

    def first_from(self, covered_until: datetime | None, after: datetime | None) -> DataInterval | None:
        """The first run whose interval starts at or after ``covered_until`` and whose logical date is
        after ``after`` (each when given), within the start and end dates: where a schedule that
        has no stored next run (new, or changed) starts."""
        if covered_until is None and after is None:
            return self.first_interval()
        candidate = self.interval_starting_after(covered_until or self._earliest())
        while candidate is not None and after is not None and candidate.logical_date <= after:
            candidate = self.interval_after(candidate)
        return candidate

    def _earliest(self) -> datetime:
        assert self.start_date is not None
        return self.start_date

    def interval_after(self, interval: DataInterval) -> DataInterval | None:
        """The interval that follows ``interval``, or None when the schedule ends."""
        return None

    def interval_starting_after(self, moment: datetime) -> DataInterval | None:
        """The first interval starting at or after ``moment`` (and the start date)."""
        return None

    def latest_interval(self, now: datetime) -> DataInterval | None:
        """The latest interval that has ended by ``now`` (its run is due), or None."""
        return None

    def intervals(self, start: datetime, end: datetime) -> Iterator[DataInterval]:
        """The intervals whose logical date (start) lies in ``[start, end]``, oldest first, within
        the start and end dates."""
        interval = self.interval_starting_after(start)
        while interval is not None and interval.start <= end:
            yield interval
            interval = self.interval_after(interval)

    def intervals_between(self, start: datetime, end: datetime) -> Iterator[DataInterval]:
        """The schedule's intervals whose logical date lies in ``[start, end]``, oldest first, also
        before the start date and after the end date (a backfill's range is its own)."""
        return iter(())

    def _allowed(self, interval: DataInterval | None) -> DataInterval | None:
        if interval is None or (self.end_date is not None and interval.start > self.end_date):
            return None
        return interval


def cron_next(expression: str, zone: ZoneInfo, after: datetime) -> datetime | None:
    """The first time of the cron expression strictly after ``after`` (UTC), or None."""
    try:
        return next(CronSim(expression, after.astimezone(zone))).astimezone(UTC)
    except StopIteration:
        return None


def cron_previous(expression: str, zone: ZoneInfo, before: datetime) -> datetime | None:
    """The last time of the cron expression strictly before ``before`` (UTC), or None."""
    try:
        return next(CronSim(expression, before.astimezone(zone), reverse=True)).astimezone(UTC)
    except StopIteration:
        return None


def check_cron(field: str, value: str, zone: ZoneInfo, start: datetime) -> str:
    """The five-field expression of a cron expression or preset; InvalidArgument naming ``field``
    for an unknown preset, a malformed expression or one that never fires after ``start``."""
    expression = PRESETS.get(value.strip(), value.strip())
    if expression.startswith("@"):
        raise InvalidArgument(field, f"unknown preset {quote(value)}; use one of {', '.join(PRESETS)}")
    if len(expression.split()) != 5:
        raise InvalidArgument(field, f"{quote(value)} is not a cron expression of five fields")
    try:
        first = cron_next(expression, zone, start - _TICK)
    except CronSimError as exc:
        raise InvalidArgument(field, f"{quote(value)} is not a valid cron expression: {exc}") from None
    if first is None:
        raise InvalidArgument(field, f"{quote(value)} never fires")
    return expression


class CronTimetable(Timetable):
    """``CronDataIntervalTimetable``: intervals from one cron time to the next."""

    kind = "cron"

    def __init__(
        self, expression: str, zone: ZoneInfo, start_date: datetime, end_date: datetime | None
    ) -> None:
        super().__init__(start_date, end_date)
        self.expression = PRESETS.get(expression, expression)
        self.zone = zone

    def _next(self, after: datetime) -> datetime | None:
        return cron_next(self.expression, self.zone, after)

    def _previous(self, before: datetime) -> datetime | None:
        return cron_previous(self.expression, self.zone, before)

    def _interval_from(self, start: datetime | None) -> DataInterval | None:
        if start is None:
            return None
        end = self._next(start)
        return self._allowed(DataInterval(start, end)) if end is not None else None

    def first_interval(self) -> DataInterval | None:
        assert self.start_date is not None
        return self._interval_from(self._next(self.start_date - _TICK))

    def interval_after(self, interval: DataInterval) -> DataInterval | None:
        return self._interval_from(interval.end)

    def interval_starting_after(self, moment: datetime) -> DataInterval | None:
        assert self.start_date is not None
        return self._interval_from(self._next(max(moment, self.start_date) - _TICK))

    def intervals_between(self, start: datetime, end: datetime) -> Iterator[DataInterval]:
        moment = self._next(start - _TICK)
        while moment is not None and moment <= end:
            following = self._next(moment)
            if following is None:
                return
            yield DataInterval(moment, following)
            moment = following

    def latest_interval(self, now: datetime) -> DataInterval | None:
        assert self.start_date is not None
        end = self._previous(now + _TICK)  # the last schedule time at or before now
        if end is None:
            return None
        if self.end_date is not None:
            last_start = self._previous(self.end_date + _TICK)  # the last logical date allowed
            last_end = self._next(last_start) if last_start is not None else None
            if last_end is None:
                return None
            end = min(end, last_end)
        start = self._previous(end)
        if start is None or start < self.start_date:
            return None
        return DataInterval(start, end)


class IntervalTimetable(Timetable):
    """``DeltaDataIntervalTimetable``: intervals of a fixed duration from the start date."""

    kind = "interval"

    def __init__(self, every: timedelta, start_date: datetime, end_date: datetime | None) -> None:
        super().__init__(start_date, end_date)
        self.every = every

    def _at(self, index: int) -> DataInterval | None:
        assert self.start_date is not None
        if index < 0:
            return None
        start = self.start_date + index * self.every
        return self._allowed(DataInterval(start, start + self.every))

    def first_interval(self) -> DataInterval | None:
        return self._at(0)

    def interval_after(self, interval: DataInterval) -> DataInterval | None:
        return self._allowed(DataInterval(interval.end, interval.end + self.every))

    def interval_starting_after(self, moment: datetime) -> DataInterval | None:
        assert self.start_date is not None
        if moment <= self.start_date:
            return self._at(0)
        steps = -((self.start_date - moment) // self.every)  # ceiling division
        return self._at(steps)

    def intervals_between(self, start: datetime, end: datetime) -> Iterator[DataInterval]:
        assert self.start_date is not None
        index = -((self.start_date - start) // self.every)  # ceiling division, negative before start
        moment = self.start_date + index * self.every
        while moment <= end:
            yield DataInterval(moment, moment + self.every)
            moment += self.every

    def latest_interval(self, now: datetime) -> DataInterval | None:
        assert self.start_date is not None
        if now < self.start_date + self.every:
            return None
        index = (now - self.start_date) // self.every - 1
        if self.end_date is not None and self.end_date >= self.start_date:
            index = min(index, (self.end_date - self.start_date) // self.every)
        return self._at(index)


def zone_of(spec: pb.DagSpec, field: str = "spec.timezone") -> ZoneInfo:
    """The spec's IANA time zone (UTC when empty); InvalidArgument naming ``field`` otherwise."""
    name = spec.timezone or "UTC"
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise InvalidArgument(
            field, f"unknown time zone {quote(name)}; use an IANA name such as 'Europe/Berlin'"
        ) from None
