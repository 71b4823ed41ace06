"""A DAG spec's timetable: which one its schedule fields say, validated naming the field.

| spec | timetable (Airflow's name) |
|---|---|
| neither ``schedule`` nor ``schedule_interval`` nor ``trigger`` | none: manual runs only |
| ``schedule: "0 3 * * *"`` or a preset, ``cron_semantics`` unset | ``CronDataIntervalTimetable`` |
| the same with ``cron_semantics: CRON_SEMANTICS_TRIGGER`` | ``CronTriggerTimetable`` |
| ``schedule_interval`` | ``DeltaDataIntervalTimetable`` |
| ``trigger.crons`` | ``MultipleCronTriggerTimetable`` |
| ``trigger.every`` | ``DeltaTriggerTimetable`` |
| ``trigger.events`` | ``EventsTimetable`` |
| ``schedule: "@once"`` / ``"@continuous"`` | ``OnceTimetable`` / ``ContinuousTimetable`` |

A stored spec's ``cron_semantics`` UNSPECIFIED means data intervals, whatever the deployment says:
:func:`resolve_cron_semantics` fixes a plain cron string's meaning when it is registered, so a DAG
version's runs never depend on a setting.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from google.protobuf.duration_pb2 import Duration

from schedd.v1 import resources_pb2 as pb
from schedd_core.errors import InvalidArgument
from schedd_core.timetables import (
    MAX_INTERVAL,
    MIN_INTERVAL,
    CronTimetable,
    IntervalTimetable,
    Timetable,
    check_cron,
    zone_of,
)
from schedd_core.timetables_trigger import (
    ContinuousTimetable,
    CronTriggerTimetable,
    DeltaTriggerTimetable,
    EventsTimetable,
    MultipleCronTriggerTimetable,
    OnceTimetable,
    RunImmediately,
)

#: Presets that are timetables of their own rather than cron expressions.
ONCE = "@once"
CONTINUOUS = "@continuous"
#: The most events one EventsTimetable may list.
MAX_EVENTS = 10_000


def is_cron_string(schedule: str) -> bool:
    """Whether ``schedule`` is a cron expression or preset (not empty, ``@once`` or ``@continuous``)."""
    value = schedule.strip()
    return bool(value) and value not in (ONCE, CONTINUOUS)


def resolve_cron_semantics(spec: pb.DagSpec, *, create_cron_data_intervals: bool) -> pb.DagSpec:
    """``spec`` with a plain cron string's meaning fixed by the deployment's setting (Airflow's
    ``[scheduler] create_cron_data_intervals``): UNSPECIFIED becomes TRIGGER when the setting is
    off and stays UNSPECIFIED (data intervals) when it is on. Anything else is returned as is."""
    if not is_cron_string(spec.schedule) or spec.cron_semantics or create_cron_data_intervals:
        return spec
    resolved = pb.DagSpec()
    resolved.CopyFrom(spec)
    resolved.cron_semantics = pb.CRON_SEMANTICS_TRIGGER
    return resolved


def timetable_of(spec: pb.DagSpec) -> Timetable:
    """The spec's timetable, validated: InvalidArgument naming the field for a malformed cron
    expression, one that can never fire, an unknown time zone, a duration out of range, two
    schedules at once, options the timetable does not have, a schedule without a start date, or an
    end date before the start date."""
    zone = zone_of(spec)
    start = spec.start_date.ToDatetime(tzinfo=UTC) if spec.HasField("start_date") else None
    end = spec.end_date.ToDatetime(tzinfo=UTC) if spec.HasField("end_date") else None
    if start is not None and end is not None and end < start:
        raise InvalidArgument("spec.end_date", "is before the start date")
    schedule = spec.schedule.strip()
    has_interval = spec.HasField("schedule_interval")
    has_trigger = spec.HasField("trigger")
    if sum((bool(schedule), has_interval, has_trigger)) > 1:
        field = "spec.trigger" if has_trigger else "spec.schedule_interval"
        raise InvalidArgument(field, "a DAG has a cron schedule, an interval or a trigger, not both")
    cron_trigger = spec.cron_semantics == pb.CRON_SEMANTICS_TRIGGER
    if spec.cron_semantics and not is_cron_string(schedule):
        raise InvalidArgument("spec.cron_semantics", "only a cron schedule has it")
    if spec.HasField("trigger_options") and not ((has_trigger and not spec.trigger.events) or cron_trigger):
        raise InvalidArgument(
            "spec.trigger_options", "only a cron trigger, several crons or a delta trigger has them"
        )
    if not (schedule or has_interval or has_trigger):
        return Timetable(start, end)
    if has_trigger and spec.trigger.events:
        return _events(spec, start, end)
    if start is None:
        raise InvalidArgument("spec.start_date", "a scheduled DAG needs a start date")
    if has_trigger:
        return _trigger(spec, start, end)
    if has_interval:
        return IntervalTimetable(_duration("spec.schedule_interval", spec.schedule_interval), start, end)
    if schedule == ONCE:
        return OnceTimetable(start, end)
    if schedule == CONTINUOUS:
        if spec.max_active_runs > 1:
            raise InvalidArgument(
                "spec.max_active_runs", "a @continuous DAG runs one run at a time; use 0 or 1"
            )
        return ContinuousTimetable(start, end)
    expression = check_cron("spec.schedule", schedule, zone, start)
    if cron_trigger:
        interval, immediately = _options(spec)
        return CronTriggerTimetable(
            expression, zone, start, end, interval=interval, run_immediately=immediately
        )
    return CronTimetable(expression, zone, start, end)


def _duration(field: str, value: Duration) -> timedelta:
    every = value.ToTimedelta()
    if not MIN_INTERVAL <= every <= MAX_INTERVAL:
        raise InvalidArgument(field, "must be between 1 second and 366 days")
    return every


def _options(spec: pb.DagSpec) -> tuple[timedelta, RunImmediately]:
    options = spec.trigger_options
    interval = timedelta(0)
    if options.HasField("interval"):
        interval = options.interval.ToTimedelta()
        if not timedelta(0) <= interval <= MAX_INTERVAL:
            raise InvalidArgument("spec.trigger_options.interval", "must be between 0 and 366 days")
    if options.HasField("run_immediately_within"):
        within = options.run_immediately_within.ToTimedelta()
        if within <= timedelta(0):
            raise InvalidArgument("spec.trigger_options.run_immediately_within", "must be positive")
        return interval, within
    return interval, options.run_immediately


def _trigger(spec: pb.DagSpec, start: datetime, end: datetime | None) -> Timetable:
    trigger = spec.trigger
    interval, immediately = _options(spec)
    if trigger.crons and trigger.HasField("every"):
        raise InvalidArgument("spec.trigger", "has crons or every or events, not several of them")
    if trigger.HasField("every"):
        every = _duration("spec.trigger.every", trigger.every)
        return DeltaTriggerTimetable(every, start, end, interval=interval, run_immediately=immediately)
    if not trigger.crons:
        raise InvalidArgument("spec.trigger", "needs crons, every or events")
    zone = zone_of(spec)
    expressions = [
        check_cron(f"spec.trigger.crons[{i}]", c, zone, start) for i, c in enumerate(trigger.crons)
    ]
    return MultipleCronTriggerTimetable(
        expressions, zone, start, end, interval=interval, run_immediately=immediately
    )


def _events(spec: pb.DagSpec, start: datetime | None, end: datetime | None) -> Timetable:
    trigger = spec.trigger
    if trigger.crons or trigger.HasField("every"):
        raise InvalidArgument("spec.trigger", "has crons or every or events, not several of them")
    if len(trigger.events) > MAX_EVENTS:
        raise InvalidArgument(
            "spec.trigger.events", f"has {len(trigger.events)} events; the limit is {MAX_EVENTS}"
        )
    events = [e.ToDatetime(tzinfo=UTC) for e in trigger.events]
    return EventsTimetable(events, start, end, restrict_to_events=trigger.restrict_to_events)


def schedule_key(spec: pb.DagSpec) -> str:
    """The fields that decide a DAG's runs; a new version that changes them is planned afresh (see
    :mod:`schedd_core.schedule_plan`), one that keeps them goes on from the stored next run. Empty
    for a DAG without a schedule. The fields of trigger timetables are appended only when set, so a
    data-interval schedule keeps the key it always had."""
    parts = [
        spec.schedule.strip(),
        str(spec.schedule_interval.ToTimedelta()) if spec.HasField("schedule_interval") else "",
        spec.timezone,
        spec.start_date.ToJsonString() if spec.HasField("start_date") else "",
        spec.end_date.ToJsonString() if spec.HasField("end_date") else "",
    ]
    if not any(parts[:2]) and not spec.HasField("trigger"):
        return ""
    if spec.cron_semantics == pb.CRON_SEMANTICS_TRIGGER:
        parts.append("trigger")
    for name in ("trigger", "trigger_options"):
        if spec.HasField(name):
            parts.append(getattr(spec, name).SerializeToString(deterministic=True).hex())
    return "|".join(parts)
