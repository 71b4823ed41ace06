"""Trigger timetables on fixed instants (the clock is an argument): the facts Airflow's timetable
documentation states for CronTriggerTimetable, DeltaTriggerTimetable, MultipleCronTriggerTimetable,
EventsTimetable, OnceTimetable and ContinuousTimetable, beside the data-interval ones (tick, logical
date, data interval, catch-up on and off, run_immediately, DST), and validation naming the field."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from google.protobuf.duration_pb2 import Duration
from google.protobuf.timestamp_pb2 import Timestamp

from schedd.v1 import resources_pb2 as pb
from schedd_core.errors import InvalidArgument
from schedd_core.schedule_plan import ScheduleState, plan_schedule, upcoming_intervals
from schedd_core.timetable_spec import resolve_cron_semantics, schedule_key, timetable_of
from schedd_core.timetables import DataInterval, Timetable

TRIGGER = pb.CRON_SEMANTICS_TRIGGER


def ts(value: datetime) -> Timestamp:
    out = Timestamp()
    out.FromDatetime(value)
    return out


def dur(value: timedelta) -> Duration:
    out = Duration()
    out.FromTimedelta(value)
    return out


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, second, tzinfo=UTC)


def spec(**options: Any) -> pb.DagSpec:
    task = pb.TaskSpec(task_id="a", shell=pb.ShellCommand(command="true"))
    return pb.DagSpec(dag_id="d", tasks=[task], **options)


def walk(timetable: Timetable, count: int) -> list[DataInterval]:
    runs: list[DataInterval] = []
    run = timetable.first_interval()
    while run is not None and len(runs) < count:
        runs.append(run)
        run = timetable.interval_after(run)
    return runs


def ticks(timetable: Timetable, count: int) -> list[datetime]:
    return [r.logical_date for r in walk(timetable, count)]


def plan(
    timetable: Timetable, now: datetime, *, catchup: bool, stored: DataInterval | None = None
) -> list[datetime]:
    state = ScheduleState(next_interval=stored, catchup=catchup, active_runs=0, max_active_runs=0)
    return [r.logical_date for r in plan_schedule(timetable, state, now).create]


# --- CronTriggerTimetable ------------------------------------------------------------------------


def test_a_cron_trigger_run_has_the_tick_as_logical_date_and_an_empty_interval() -> None:
    # Airflow: with CronTriggerTimetable("0 0 * * *") the run triggered at midnight of 2024-01-02 has
    # the logical date 2024-01-02 (CronDataIntervalTimetable's has 2024-01-01, covering that day).
    start = utc(2024, 1, 1)
    trigger = timetable_of(spec(schedule="0 0 * * *", cron_semantics=TRIGGER, start_date=ts(start)))
    data = timetable_of(spec(schedule="0 0 * * *", start_date=ts(start)))
    at = utc(2024, 1, 2, 0, 0, 1)
    assert plan(trigger, at, catchup=True) == [utc(2024, 1, 1), utc(2024, 1, 2)]
    assert plan(data, at, catchup=True) == [utc(2024, 1, 1)]
    run = walk(trigger, 2)[1]
    assert (run.start, run.end, run.logical_date, run.run_after) == (utc(2024, 1, 2),) * 4
    first = walk(data, 1)[0]
    assert (first.start, first.end, first.logical_date) == (utc(2024, 1, 1), utc(2024, 1, 2), utc(2024, 1, 1))


def test_a_cron_trigger_with_an_interval_covers_the_span_ending_at_the_tick() -> None:
    # Airflow's example: CronTriggerTimetable("0 1 * * 3", interval=timedelta(days=7)), Wednesdays
    # at 01:00, each run's data interval the week ending at its tick.
    timetable = timetable_of(
        spec(
            schedule="0 1 * * 3",
            cron_semantics=TRIGGER,
            start_date=ts(utc(2024, 1, 1)),
            trigger_options=pb.TriggerOptions(interval=dur(timedelta(days=7))),
        )
    )
    first, second = walk(timetable, 2)
    assert first == DataInterval(utc(2023, 12, 27, 1), utc(2024, 1, 3, 1), logical=utc(2024, 1, 3, 1))
    assert second.logical_date == utc(2024, 1, 10, 1) and second.start == first.end


def test_catchup_off_waits_for_the_next_tick_unlike_a_data_interval_timetable() -> None:
    # Airflow: enabling a @daily DAG at 15:00 on January 31st, CronTriggerTimetable triggers its
    # first run at midnight of February 1st; CronDataIntervalTimetable at once, for January 31st.
    start = utc(2024, 1, 1)
    now = utc(2024, 1, 31, 15)
    trigger = timetable_of(spec(schedule="@daily", cron_semantics=TRIGGER, start_date=ts(start)))
    data = timetable_of(spec(schedule="@daily", start_date=ts(start)))
    state = ScheduleState(next_interval=None, catchup=False, active_runs=0, max_active_runs=0)
    waiting = plan_schedule(trigger, state, now)
    assert waiting.create == [] and waiting.due_at == utc(2024, 2, 1)
    kept = ScheduleState(next_interval=waiting.next_interval, catchup=False, active_runs=0, max_active_runs=0)
    assert [r.logical_date for r in plan_schedule(trigger, kept, utc(2024, 2, 1)).create] == [utc(2024, 2, 1)]
    assert plan(data, now, catchup=False) == [utc(2024, 1, 30)]  # the interval Jan 30 .. Jan 31


@pytest.mark.parametrize(
    ("immediately", "runs_latest"),
    [
        (pb.TriggerOptions(run_immediately=True), True),
        (pb.TriggerOptions(run_immediately_within=dur(timedelta(hours=16))), True),
        (pb.TriggerOptions(run_immediately_within=dur(timedelta(hours=14))), False),
        (pb.TriggerOptions(run_immediately=False), False),
    ],
)
def test_run_immediately_decides_the_latest_missed_tick(
    immediately: pb.TriggerOptions, runs_latest: bool
) -> None:
    timetable = timetable_of(
        spec(
            schedule="@daily",
            cron_semantics=TRIGGER,
            start_date=ts(utc(2024, 1, 1)),
            trigger_options=immediately,
        )
    )
    now = utc(2024, 1, 31, 15)  # the latest tick, Jan 31 00:00, is 15 hours old
    assert plan(timetable, now, catchup=False) == ([utc(2024, 1, 31)] if runs_latest else [])


def test_the_tick_the_scheduler_waited_for_runs_however_late_whatever_run_immediately_says() -> None:
    timetable = timetable_of(spec(schedule="@hourly", cron_semantics=TRIGGER, start_date=ts(utc(2024, 1, 1))))
    waited = DataInterval(utc(2024, 1, 1, 5), utc(2024, 1, 1, 5), logical=utc(2024, 1, 1, 5))
    assert plan(timetable, utc(2024, 1, 1, 5, 40), catchup=False, stored=waited) == [utc(2024, 1, 1, 5)]
    # An outage past the next tick: the skipped ticks are missed ones, and run_immediately is False.
    assert plan(timetable, utc(2024, 1, 1, 7, 40), catchup=False, stored=waited) == []


def test_catchup_on_makes_every_missed_tick_oldest_first() -> None:
    timetable = timetable_of(
        spec(schedule="0 */6 * * *", cron_semantics=TRIGGER, start_date=ts(utc(2024, 3, 1)))
    )
    assert plan(timetable, utc(2024, 3, 2, 1), catchup=True) == [
        utc(2024, 3, 1, h) for h in (0, 6, 12, 18)
    ] + [utc(2024, 3, 2)]


def test_the_end_date_is_the_last_tick() -> None:
    timetable = timetable_of(
        spec(
            schedule="@daily",
            cron_semantics=TRIGGER,
            start_date=ts(utc(2024, 1, 1)),
            end_date=ts(utc(2024, 1, 3)),
        )
    )
    assert ticks(timetable, 10) == [utc(2024, 1, d) for d in (1, 2, 3)]
    assert timetable.latest_interval(utc(2024, 6, 1)) == walk(timetable, 3)[2]


def test_a_delta_data_interval_run_covers_the_duration_before_it_is_made_unlike_a_delta_trigger() -> None:
    # Airflow: DeltaDataIntervalTimetable(timedelta(days=1)) makes the run for [01-01, 01-02) at
    # 01-02, logical date 01-01; DeltaTriggerTimetable(timedelta(days=1)) runs at 01-01, logical 01-01.
    start = ts(utc(2024, 1, 1))
    data = walk(timetable_of(spec(schedule_interval=dur(timedelta(days=1)), start_date=start)), 1)[0]
    assert (data.logical_date, data.start, data.end, data.run_after) == (
        utc(2024, 1, 1),
        utc(2024, 1, 1),
        utc(2024, 1, 2),
        utc(2024, 1, 2),
    )
    every = pb.TriggerSchedule(every=dur(timedelta(days=1)))
    trigger = walk(timetable_of(spec(trigger=every, start_date=start)), 1)[0]
    assert (trigger.logical_date, trigger.start, trigger.end, trigger.run_after) == (utc(2024, 1, 1),) * 4


# --- DST -----------------------------------------------------------------------------------------


def test_a_cron_trigger_skipped_by_spring_forward_fires_once_right_after_the_gap() -> None:
    timetable = timetable_of(
        spec(
            schedule="30 2 * * *",
            cron_semantics=TRIGGER,
            timezone="Europe/Berlin",
            start_date=ts(utc(2026, 3, 27)),
        )
    )
    zone = ZoneInfo("Europe/Berlin")
    assert [t.astimezone(zone).strftime("%m-%d %H:%M") for t in ticks(timetable, 4)] == [
        "03-27 02:30",
        "03-28 02:30",
        "03-29 03:00",  # 02:30 does not exist that day: the first instant after the gap
        "03-30 02:30",
    ]


def test_a_cron_trigger_repeated_by_fall_back_fires_once_at_the_first_occurrence() -> None:
    timetable = timetable_of(
        spec(
            schedule="30 1 * * *",
            cron_semantics=TRIGGER,
            timezone="America/New_York",
            start_date=ts(utc(2026, 10, 31)),
        )
    )
    assert ticks(timetable, 3) == [utc(2026, 10, 31, 5, 30), utc(2026, 11, 1, 5, 30), utc(2026, 11, 2, 6, 30)]


def test_an_hourly_cron_trigger_fires_every_real_hour_and_its_interval_is_absolute_time() -> None:
    timetable = timetable_of(
        spec(
            schedule="0 * * * *",
            cron_semantics=TRIGGER,
            timezone="America/New_York",
            start_date=ts(utc(2026, 11, 1, 4)),
            trigger_options=pb.TriggerOptions(interval=dur(timedelta(hours=1))),
        )
    )
    runs = walk(timetable, 4)
    assert [r.logical_date for r in runs] == [utc(2026, 11, 1, h) for h in (4, 5, 6, 7)]  # 01:00 EDT and EST
    assert all(r.end - r.start == timedelta(hours=1) for r in runs)


def test_a_delta_trigger_ignores_daylight_saving() -> None:
    # Airflow: DeltaTriggerTimetable(timedelta(days=1)) runs every 24 hours of absolute time.
    timetable = timetable_of(
        spec(
            timezone="Europe/Berlin",
            start_date=ts(utc(2026, 3, 28, 12)),
            trigger=pb.TriggerSchedule(every=dur(timedelta(days=1))),
        )
    )
    assert ticks(timetable, 3) == [utc(2026, 3, 28, 12), utc(2026, 3, 29, 12), utc(2026, 3, 30, 12)]


# --- DeltaTriggerTimetable, MultipleCronTriggerTimetable, EventsTimetable, @once, @continuous -------


def test_a_delta_trigger_runs_at_the_start_date_and_every_delta_after_it() -> None:
    timetable = timetable_of(
        spec(
            start_date=ts(utc(2024, 1, 1)),
            trigger=pb.TriggerSchedule(every=dur(timedelta(days=7))),
            trigger_options=pb.TriggerOptions(interval=dur(timedelta(days=7))),
        )
    )
    first, second = walk(timetable, 2)
    assert (first.start, first.logical_date) == (utc(2023, 12, 25), utc(2024, 1, 1))
    assert second.logical_date == utc(2024, 1, 8)
    assert [r.logical_date for r in timetable.intervals_between(utc(2023, 12, 20), utc(2024, 1, 9))] == [
        utc(2023, 12, 25),  # a backfill may reach before the start date
        utc(2024, 1, 1),
        utc(2024, 1, 8),
    ]


def test_several_crons_make_one_run_per_distinct_tick() -> None:
    timetable = timetable_of(
        spec(
            start_date=ts(utc(2024, 1, 1)),
            trigger=pb.TriggerSchedule(crons=["0 3 * * *", "30 12 * * 1", "0 3 * * 1"]),
        )
    )
    # 2024-01-01 is a Monday: 03:00 (two crons, one run) and 12:30.
    assert ticks(timetable, 4) == [
        utc(2024, 1, 1, 3),
        utc(2024, 1, 1, 12, 30),
        utc(2024, 1, 2, 3),
        utc(2024, 1, 3, 3),
    ]


BASEBALL = [  # Airflow's EventsTimetable example: a team's baseball games, America/Chicago
    datetime(2022, 4, 5, 8, 27, tzinfo=ZoneInfo("America/Chicago")),
    datetime(2022, 4, 17, 8, 27, tzinfo=ZoneInfo("America/Chicago")),
    datetime(2022, 4, 22, 20, 50, tzinfo=ZoneInfo("America/Chicago")),
]


def test_events_run_at_each_event_with_an_empty_interval() -> None:
    timetable = timetable_of(spec(trigger=pb.TriggerSchedule(events=[ts(e) for e in reversed(BASEBALL)])))
    runs = walk(timetable, 10)
    assert [r.logical_date for r in runs] == BASEBALL
    assert all(r.start == r.end == r.logical_date for r in runs)
    assert plan(timetable, utc(2022, 4, 18), catchup=True) == BASEBALL[:2]
    assert plan(timetable, utc(2022, 4, 18), catchup=False) == [BASEBALL[1]]  # the latest missed event
    assert plan(timetable, utc(2023, 1, 1), catchup=False, stored=None) == [BASEBALL[2]]
    assert (
        plan_schedule(
            timetable, ScheduleState(None, True, 0, 0, covered_until=BASEBALL[2]), utc(2023, 1, 1)
        ).next_interval
        is None
    )  # all events have run: the schedule has ended


def test_once_runs_once_at_the_start_date_catchup_or_not() -> None:
    timetable = timetable_of(spec(schedule="@once", start_date=ts(utc(2024, 5, 1))))
    for catchup in (True, False):
        result = plan_schedule(timetable, ScheduleState(None, catchup, 0, 0), utc(2024, 6, 1))
        assert [r.logical_date for r in result.create] == [utc(2024, 5, 1)]
        assert (result.next_interval, result.due_at) == (None, None)
    waiting = plan_schedule(timetable, ScheduleState(None, False, 0, 0), utc(2024, 4, 1))
    assert waiting.create == [] and waiting.due_at == utc(2024, 5, 1)


def test_continuous_makes_the_next_run_only_when_none_is_active_and_chains_the_intervals() -> None:
    timetable = timetable_of(spec(schedule="@continuous", start_date=ts(utc(2024, 1, 1)), max_active_runs=1))
    first = plan_schedule(timetable, ScheduleState(None, False, 0, 0), utc(2024, 1, 1, 0, 0, 5))
    (run,) = first.create
    assert (run.start, run.end, run.logical_date) == (
        utc(2024, 1, 1),
        utc(2024, 1, 1, 0, 0, 5),
        utc(2024, 1, 1),
    )
    assert first.due_at is None  # its end wakes the timer
    busy = plan_schedule(timetable, ScheduleState(first.next_interval, False, 1, 1), utc(2024, 1, 1, 0, 0, 9))
    assert busy.create == [] and busy.due_at is None
    ended = plan_schedule(
        timetable, ScheduleState(first.next_interval, False, 0, 1), utc(2024, 1, 1, 0, 0, 9)
    )
    assert [(r.start, r.end) for r in ended.create] == [(run.end, utc(2024, 1, 1, 0, 0, 9))]
    early = plan_schedule(timetable, ScheduleState(None, False, 0, 0), utc(2023, 12, 31))
    assert early.create == [] and early.due_at == utc(2024, 1, 1) + timedelta(microseconds=1)


def test_a_new_schedule_starts_after_the_covered_span_and_the_latest_logical_date() -> None:
    trigger = timetable_of(spec(schedule="0 * * * *", cron_semantics=TRIGGER, start_date=ts(utc(2024, 1, 1))))
    data = timetable_of(spec(schedule="@daily", start_date=ts(utc(2024, 1, 1))))
    # After daily runs up to 01-05 00:00: the hourly trigger's first run is 01-05 00:00, the empty
    # interval at the covered span's end, unless a run has that logical date already.
    assert trigger.first_from(utc(2024, 1, 5), utc(2024, 1, 4)) == DataInterval(
        utc(2024, 1, 5), utc(2024, 1, 5), logical=utc(2024, 1, 5)
    )
    assert trigger.first_from(utc(2024, 1, 5), utc(2024, 1, 5)).logical_date == utc(2024, 1, 5, 1)  # type: ignore[union-attr]
    # After trigger runs up to 01-05 10:00: the daily interval starting 01-05 would cover it again.
    assert data.first_from(utc(2024, 1, 5, 10), utc(2024, 1, 5, 10)).start == utc(2024, 1, 6)  # type: ignore[union-attr]


def test_next_runs_list_the_run_time_logical_date_and_interval() -> None:
    timetable = timetable_of(
        spec(
            schedule="0 3 * * *",
            cron_semantics=TRIGGER,
            start_date=ts(utc(2024, 1, 1)),
            trigger_options=pb.TriggerOptions(interval=dur(timedelta(hours=1))),
        )
    )
    state = ScheduleState(None, False, 0, 0)
    listed = list(upcoming_intervals(timetable, state, utc(2024, 1, 10, 12), 2))
    assert [(r.run_after, r.logical_date, r.start) for r in listed] == [
        (utc(2024, 1, 11, 3), utc(2024, 1, 11, 3), utc(2024, 1, 11, 2)),
        (utc(2024, 1, 12, 3), utc(2024, 1, 12, 3), utc(2024, 1, 12, 2)),
    ]


# --- the deployment default, the schedule key, validation ----------------------------------------


def test_a_plain_cron_string_is_resolved_once_at_registration() -> None:
    plain = spec(schedule="0 3 * * *", start_date=ts(utc(2024, 1, 1)))
    as_trigger = resolve_cron_semantics(plain, create_cron_data_intervals=False)
    assert as_trigger.cron_semantics == TRIGGER and timetable_of(as_trigger).kind == "cron_trigger"
    assert resolve_cron_semantics(plain, create_cron_data_intervals=True) == plain
    assert timetable_of(plain).kind == "cron"  # a stored spec without it means data intervals
    explicit = spec(
        schedule="0 3 * * *", start_date=ts(utc(2024, 1, 1)), cron_semantics=pb.CRON_SEMANTICS_DATA_INTERVAL
    )
    assert resolve_cron_semantics(explicit, create_cron_data_intervals=False) == explicit
    once = spec(schedule="@once", start_date=ts(utc(2024, 1, 1)))
    assert resolve_cron_semantics(once, create_cron_data_intervals=False) == once
    assert schedule_key(as_trigger) != schedule_key(plain)
    assert schedule_key(plain) == f"0 3 * * *|||{ts(utc(2024, 1, 1)).ToJsonString()}|"  # as it always was


@pytest.mark.parametrize(
    ("options", "field", "problem"),
    [
        ({"schedule": "@once"}, "spec.start_date", "needs a start date"),
        (
            {"schedule": "@continuous", "start_date": ts(utc(2024, 1, 1)), "max_active_runs": 2},
            "spec.max_active_runs",
            "one run at a time",
        ),
        (
            {
                "trigger": pb.TriggerSchedule(crons=["0 3 * * *", "61 * * * *"]),
                "start_date": ts(utc(2024, 1, 1)),
            },
            "spec.trigger.crons[1]",
            "Bad minute",
        ),
        (
            {"trigger": pb.TriggerSchedule(every=dur(timedelta(0))), "start_date": ts(utc(2024, 1, 1))},
            "spec.trigger.every",
            "between 1 second",
        ),
        (
            {"trigger": pb.TriggerSchedule(), "start_date": ts(utc(2024, 1, 1))},
            "spec.trigger",
            "needs crons, every or events",
        ),
        (
            {
                "trigger": pb.TriggerSchedule(crons=["0 3 * * *"], every=dur(timedelta(hours=1))),
                "start_date": ts(utc(2024, 1, 1)),
            },
            "spec.trigger",
            "not several",
        ),
        (
            {"schedule": "@daily", "trigger": pb.TriggerSchedule(crons=["0 3 * * *"])},
            "spec.trigger",
            "not both",
        ),
        ({"schedule": "@once", "cron_semantics": TRIGGER}, "spec.cron_semantics", "only a cron schedule"),
        (
            {"schedule": "@daily", "trigger_options": pb.TriggerOptions(run_immediately=True)},
            "spec.trigger_options",
            "only a cron trigger",
        ),
        (
            {
                "schedule": "@daily",
                "cron_semantics": TRIGGER,
                "start_date": ts(utc(2024, 1, 1)),
                "trigger_options": pb.TriggerOptions(interval=dur(timedelta(seconds=-1))),
            },
            "spec.trigger_options.interval",
            "between 0 and 366 days",
        ),
        (
            {
                "schedule": "@daily",
                "cron_semantics": TRIGGER,
                "start_date": ts(utc(2024, 1, 1)),
                "trigger_options": pb.TriggerOptions(run_immediately_within=dur(timedelta(0))),
            },
            "spec.trigger_options.run_immediately_within",
            "must be positive",
        ),
    ],
)
def test_bad_trigger_schedules_are_refused_naming_the_field(
    options: dict[str, Any], field: str, problem: str
) -> None:
    with pytest.raises(InvalidArgument) as info:
        timetable_of(spec(**options))
    assert info.value.field == field and problem in info.value.problem, str(info.value)
