"""Timetables as objects, with Airflow 3's names: ``DAG(schedule=CronTriggerTimetable(...))``.

Each writes its fields into the DAG's spec (see ``schedd_core.timetable_spec``); the checks of the
cron expressions and durations are the server's, run by the SDK before it sends the spec.

| class | runs |
|---|---|
| ``CronDataIntervalTimetable("0 3 * * *")`` | one per interval between ticks, logical date its start |
| ``DeltaDataIntervalTimetable(timedelta(hours=6))`` | the same, fixed-length intervals |
| ``CronTriggerTimetable("0 3 * * *", interval=...)`` | one at each tick T, logical date T |
| ``MultipleCronTriggerTimetable("0 3 * * *", "30 12 * * 1")`` | one at each tick of any of the crons |
| ``DeltaTriggerTimetable(timedelta(minutes=10))`` | one at start_date + k * delta |
| ``EventsTimetable([...])`` | one at each given moment |
| ``OnceTimetable()`` (``"@once"``) | one, at the start date |
| ``ContinuousTimetable()`` (``"@continuous"``) | one as soon as the previous one ended |

A plain cron string (``schedule="0 3 * * *"``) is read as the deployment says when the DAG is
registered (``SCHEDD_CREATE_CRON_DATA_INTERVALS``; data intervals unless it is false). A
``timezone`` given to a timetable becomes the DAG's; a naive event date is read in the DAG's zone.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta, tzinfo

from google.protobuf import duration_pb2, timestamp_pb2

from schedd.v1 import resources_pb2 as pb
from schedd_sdk.errors import DagDefinitionError

__all__ = [
    "ContinuousTimetable",
    "CronDataIntervalTimetable",
    "CronTriggerTimetable",
    "DeltaDataIntervalTimetable",
    "DeltaTriggerTimetable",
    "EventsTimetable",
    "MultipleCronTriggerTimetable",
    "OnceTimetable",
    "Timetable",
]


class Timetable:
    """The base of the timetable classes: what a DAG's ``schedule`` may be besides a string or a
    timedelta."""

    #: The IANA zone the timetable's crons are read in; None: the DAG's ``timezone``.
    timezone: str | None = None

    def apply(self, spec: pb.DagSpec, zone: tzinfo) -> None:
        """Write the schedule fields of ``spec``; ``zone`` is the DAG's time zone."""
        raise NotImplementedError


def _cron(value: object, name: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise DagDefinitionError(f"{name}: a cron expression must be a non-empty string, got {value!r}")
    return value


def _delta(value: object, name: str) -> timedelta:
    if not isinstance(value, timedelta):
        raise DagDefinitionError(f"{name}: expected a timedelta, got {value!r}")
    return value


def _duration(value: timedelta) -> duration_pb2.Duration:
    out = duration_pb2.Duration()
    out.FromTimedelta(value)
    return out


def _zone_name(value: object, name: str) -> str | None:
    if value is None or isinstance(value, str):
        return value
    key = getattr(value, "key", None) or getattr(value, "name", None)  # ZoneInfo, pendulum zones
    if isinstance(key, str):
        return key
    raise DagDefinitionError(f"{name}: timezone must be an IANA name or a ZoneInfo, got {value!r}")


class _TriggerOptions:
    def __init__(self, name: str, interval: object, run_immediately: object) -> None:
        self.interval = _delta(interval, f"{name}: interval")
        if not isinstance(run_immediately, bool | timedelta):
            raise DagDefinitionError(f"{name}: run_immediately must be a bool or a timedelta")
        self.run_immediately = run_immediately

    def write(self, spec: pb.DagSpec) -> None:
        options = pb.TriggerOptions()
        if self.interval:
            options.interval.CopyFrom(_duration(self.interval))
        if isinstance(self.run_immediately, timedelta):
            options.run_immediately_within.CopyFrom(_duration(self.run_immediately))
        else:
            options.run_immediately = self.run_immediately
        if options.ByteSize():
            spec.trigger_options.CopyFrom(options)


class CronDataIntervalTimetable(Timetable):
    """A run per interval between two ticks of ``cron``; logical date = the interval's start."""

    def __init__(self, cron: str, timezone: object = None) -> None:
        self.cron = _cron(cron, "CronDataIntervalTimetable")
        self.timezone = _zone_name(timezone, "CronDataIntervalTimetable")

    def apply(self, spec: pb.DagSpec, zone: tzinfo) -> None:
        spec.schedule = self.cron
        spec.cron_semantics = pb.CRON_SEMANTICS_DATA_INTERVAL


class DeltaDataIntervalTimetable(Timetable):
    """A run per interval of ``delta`` from the start date; logical date = the interval's start."""

    def __init__(self, delta: timedelta) -> None:
        self.delta = _delta(delta, "DeltaDataIntervalTimetable")

    def apply(self, spec: pb.DagSpec, zone: tzinfo) -> None:
        spec.schedule_interval.CopyFrom(_duration(self.delta))


class CronTriggerTimetable(Timetable):
    """A run at each tick T of ``cron``: logical date T, data interval ``[T - interval, T]``.
    With catchup off, ``run_immediately`` says whether a tick missed while nothing waited for it
    runs at once (True, or a timedelta: if at most that old) or the DAG waits for the next tick."""

    def __init__(
        self,
        cron: str,
        *,
        timezone: object = None,
        interval: timedelta = timedelta(0),
        run_immediately: bool | timedelta = False,
    ) -> None:
        self.cron = _cron(cron, "CronTriggerTimetable")
        self.timezone = _zone_name(timezone, "CronTriggerTimetable")
        self.options = _TriggerOptions("CronTriggerTimetable", interval, run_immediately)

    def apply(self, spec: pb.DagSpec, zone: tzinfo) -> None:
        spec.schedule = self.cron
        spec.cron_semantics = pb.CRON_SEMANTICS_TRIGGER
        self.options.write(spec)


class MultipleCronTriggerTimetable(Timetable):
    """A run at each tick of any of ``crons`` (a moment two share is one run), as CronTriggerTimetable."""

    def __init__(
        self,
        *crons: str,
        timezone: object = None,
        interval: timedelta = timedelta(0),
        run_immediately: bool | timedelta = False,
    ) -> None:
        if not crons:
            raise DagDefinitionError("MultipleCronTriggerTimetable: give at least one cron expression")
        self.crons = [_cron(c, "MultipleCronTriggerTimetable") for c in crons]
        self.timezone = _zone_name(timezone, "MultipleCronTriggerTimetable")
        self.options = _TriggerOptions("MultipleCronTriggerTimetable", interval, run_immediately)

    def apply(self, spec: pb.DagSpec, zone: tzinfo) -> None:
        spec.trigger.crons.extend(self.crons)
        self.options.write(spec)


class DeltaTriggerTimetable(Timetable):
    """A run at each ``start_date + k * delta``: logical date that moment, interval ``[T - interval, T]``."""

    def __init__(
        self,
        delta: timedelta,
        *,
        interval: timedelta = timedelta(0),
        run_immediately: bool | timedelta = False,
    ) -> None:
        self.delta = _delta(delta, "DeltaTriggerTimetable")
        self.options = _TriggerOptions("DeltaTriggerTimetable", interval, run_immediately)

    def apply(self, spec: pb.DagSpec, zone: tzinfo) -> None:
        spec.trigger.every.CopyFrom(_duration(self.delta))
        self.options.write(spec)


class EventsTimetable(Timetable):
    """A run at each of ``event_dates`` (logical date = the event, empty interval). Without a start
    date the first event is the first run. ``restrict_to_events`` concerns manual runs' data
    intervals in Airflow; schedd's manual runs have none, so it is kept but changes no run.
    ``presorted`` and ``description`` are accepted as Airflow's."""

    def __init__(
        self,
        event_dates: Iterable[datetime],
        restrict_to_events: bool = False,
        presorted: bool = False,
        description: str | None = None,
    ) -> None:
        self.events = list(event_dates)
        if not self.events or not all(isinstance(e, datetime) for e in self.events):
            raise DagDefinitionError("EventsTimetable: event_dates must be one or more datetimes")
        self.restrict_to_events = bool(restrict_to_events)
        self.description = description

    def apply(self, spec: pb.DagSpec, zone: tzinfo) -> None:
        for event in self.events:
            stamp = timestamp_pb2.Timestamp()
            stamp.FromDatetime(event if event.tzinfo is not None else event.replace(tzinfo=zone))
            spec.trigger.events.append(stamp)
        spec.trigger.restrict_to_events = self.restrict_to_events


class OnceTimetable(Timetable):
    """One run, at the start date (``"@once"``)."""

    def apply(self, spec: pb.DagSpec, zone: tzinfo) -> None:
        spec.schedule = "@once"


class ContinuousTimetable(Timetable):
    """A run as soon as the previous one ended, never two at once (``"@continuous"``)."""

    def apply(self, spec: pb.DagSpec, zone: tzinfo) -> None:
        spec.schedule = "@continuous"
