"""Timetables: when a DAG's scheduled runs are due, each covering a data interval.

A scheduled (or backfill) run covers a *data interval* ``[start, end)``. Its *logical date* is the
interval's start, and it becomes due at the interval's end, once the data it covers is complete,
as with Airflow's cron data-interval timetables: the ``@daily`` run for 2024-01-01 covers that
day and is created just after midnight of 2024-01-02. The first interval starts at the first
schedule time at or after the start date; an interval whose start is after the end date is not
scheduled.

Kinds (:func:`timetable_of` builds one from a spec and validates it, naming the field):

- **cron**: five fields or a preset (``@hourly``, ``@daily``, ``@weekly``, ``@monthly``,
  ``@yearly``), in the DAG's IANA time zone, evaluated by ``cronsim``. Each interval runs from one
  schedule time to the next.
- **interval**: a fixed duration from the start date (``schedule_interval``), in absolute time.
- **none**: manual runs only.

Daylight saving time, for cron schedules (fields are local wall-clock times):

- a local time skipped by a spring-forward transition fires once, at the first instant after the
  gap (``30 2 * * *`` in Europe/Berlin fires at 03:00 that day), so its interval is an hour short;
- a local time repeated by a fall-back transition fires once, at its first occurrence (an
  interval that contains the repeated hour is an hour long), unless the hour field is ``*`` or a
  step: such frequent schedules fire in both occurrences, every real interval;
- so no interval is ever empty or scheduled twice. Interval timetables ignore DST altogether:
  ``timedelta(days=1)`` is always 24 hours.

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
    """``[start, end)`` in UTC; the logical date of its run is ``start``."""

    start: datetime
    end: datetime


class Timetable:
    """No schedule: manual runs only. The base of every timetable."""

    kind = "none"

    def __init__(self, start_date: datetime | None = None, end_date: datetime | None = None) -> None:
        self.start_date = start_date
        self.end_date = end_date

    def first_interval(self) -> DataInterval | None:
        """The first interval at or after the start date, or None."""
        return None

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


class CronTimetable(Timetable):
    kind = "cron"

    def __init__(
        self, expression: str, zone: ZoneInfo, start_date: datetime, end_date: datetime | None
    ) -> None:
        super().__init__(start_date, end_date)
        self.expression = PRESETS.get(expression, expression)
        self.zone = zone

    def _next(self, after: datetime) -> datetime | None:
        """The first schedule time strictly after ``after``."""
        try:
            return next(CronSim(self.expression, after.astimezone(self.zone))).astimezone(UTC)
        except StopIteration:
            return None

    def _previous(self, before: datetime) -> datetime | None:
        """The last schedule time strictly before ``before``."""
        try:
            return next(CronSim(self.expression, before.astimezone(self.zone), reverse=True)).astimezone(UTC)
        except StopIteration:
            return None

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


def timetable_of(spec: pb.DagSpec) -> Timetable:
    """The spec's timetable, validated: InvalidArgument naming the field for a malformed cron
    expression, one that can never fire, an unknown time zone, an interval out of range, a
    schedule without a start date, or an end date before the start date."""
    zone = zone_of(spec)
    start = spec.start_date.ToDatetime(tzinfo=UTC) if spec.HasField("start_date") else None
    end = spec.end_date.ToDatetime(tzinfo=UTC) if spec.HasField("end_date") else None
    if start is not None and end is not None and end < start:
        raise InvalidArgument("spec.end_date", "is before the start date")
    has_interval = spec.HasField("schedule_interval")
    if spec.schedule and has_interval:
        raise InvalidArgument("spec.schedule_interval", "a DAG has a cron schedule or an interval, not both")
    if not spec.schedule and not has_interval:
        return Timetable(start, end)
    if start is None:
        raise InvalidArgument("spec.start_date", "a scheduled DAG needs a start date")
    if has_interval:
        every = spec.schedule_interval.ToTimedelta()
        if not MIN_INTERVAL <= every <= MAX_INTERVAL:
            raise InvalidArgument("spec.schedule_interval", "must be between 1 second and 366 days")
        return IntervalTimetable(every, start, end)
    expression = PRESETS.get(spec.schedule.strip(), spec.schedule.strip())
    if expression.startswith("@"):
        raise InvalidArgument(
            "spec.schedule", f"unknown preset {quote(spec.schedule)}; use one of {', '.join(PRESETS)}"
        )
    if len(expression.split()) != 5:
        raise InvalidArgument(
            "spec.schedule", f"{quote(spec.schedule)} is not a cron expression of five fields"
        )
    try:
        timetable = CronTimetable(expression, zone, start, end)
        first = timetable._next(start - _TICK)  # proves that it fires at all
    except CronSimError as exc:
        raise InvalidArgument(
            "spec.schedule", f"{quote(spec.schedule)} is not a valid cron expression: {exc}"
        ) from None
    if first is None:
        raise InvalidArgument("spec.schedule", f"{quote(spec.schedule)} never fires")
    return timetable


def schedule_key(spec: pb.DagSpec) -> str:
    """The fields that decide a DAG's intervals; a new version that changes them is planned afresh
    (from its latest scheduled run), one that keeps them goes on from the stored next interval."""
    parts = [
        spec.schedule.strip(),
        str(spec.schedule_interval.ToTimedelta()) if spec.HasField("schedule_interval") else "",
        spec.timezone,
        spec.start_date.ToJsonString() if spec.HasField("start_date") else "",
        spec.end_date.ToJsonString() if spec.HasField("end_date") else "",
    ]
    return "|".join(parts) if any(parts[:2]) else ""
