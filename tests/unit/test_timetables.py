"""Timetables and the schedule plan, on fixed instants (no clock): cron and interval schedules across
both DST transitions in zones with different rules, catch-up on and off after a 7-day pause and a
leader outage, and validation at registration."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from google.protobuf.duration_pb2 import Duration
from google.protobuf.timestamp_pb2 import Timestamp

from schedd.v1 import resources_pb2 as pb
from schedd_core.errors import InvalidArgument
from schedd_core.schedule_plan import ScheduleState, plan_schedule
from schedd_core.timetable_spec import timetable_of
from schedd_core.timetables import DataInterval, Timetable


def ts(value: datetime) -> Timestamp:
    out = Timestamp()
    out.FromDatetime(value)
    return out


def spec(**options: Any) -> pb.DagSpec:
    task = pb.TaskSpec(task_id="a", shell=pb.ShellCommand(command="true"))
    return pb.DagSpec(dag_id="d", tasks=[task], **options)


def cron(expression: str, zone: str, start: datetime, end: datetime | None = None) -> Timetable:
    options: dict[str, object] = {"schedule": expression, "timezone": zone, "start_date": ts(start)}
    if end is not None:
        options["end_date"] = ts(end)
    return timetable_of(spec(**options))


def walk(timetable: Timetable, count: int) -> list[DataInterval]:
    intervals: list[DataInterval] = []
    interval = timetable.first_interval()
    while interval is not None and len(intervals) < count:
        intervals.append(interval)
        interval = timetable.interval_after(interval)
    return intervals


def local(interval: DataInterval, zone: str) -> tuple[str, str]:
    z = ZoneInfo(zone)
    return interval.start.astimezone(z).strftime("%m-%d %H:%M%z"), interval.end.astimezone(z).strftime(
        "%m-%d %H:%M%z"
    )


def check_contiguous(intervals: list[DataInterval]) -> None:
    """No interval empty, none twice, none missing between two."""
    for interval in intervals:
        assert interval.start < interval.end
    for earlier, later in itertools.pairwise(intervals):
        assert earlier.end == later.start


# -- daylight saving time ---------------------------------------------------------------------------------

SPRING = {  # the local 02:30 that does not exist
    "Europe/Berlin": datetime(2026, 3, 28, tzinfo=UTC),  # 2026-03-29 02:00 -> 03:00
    "America/New_York": datetime(2026, 3, 7, tzinfo=UTC),  # 2026-03-08 02:00 -> 03:00
    "Australia/Sydney": datetime(2026, 10, 2, tzinfo=UTC),  # 2026-10-04 02:00 -> 03:00
}
FALL = {  # the local 02:30 (01:30 in New York) that occurs twice
    "Europe/Berlin": (datetime(2026, 10, 24, tzinfo=UTC), "30 2 * * *"),  # 03:00 -> 02:00
    "America/New_York": (datetime(2026, 10, 31, tzinfo=UTC), "30 1 * * *"),  # 02:00 -> 01:00
    "Australia/Sydney": (datetime(2026, 4, 3, tzinfo=UTC), "30 2 * * *"),  # 03:00 -> 02:00
}


@pytest.mark.parametrize("zone", sorted(SPRING))
def test_a_skipped_local_time_fires_once_right_after_the_gap(zone: str) -> None:
    intervals = walk(cron("30 2 * * *", zone, SPRING[zone]), 4)
    check_contiguous(intervals)
    starts = [i.start.astimezone(ZoneInfo(zone)) for i in intervals]
    assert [(s.hour, s.minute) for s in starts] == [(2, 30), (3, 0), (2, 30), (2, 30)]
    lengths = [i.end - i.start for i in intervals]
    assert lengths[0] == timedelta(hours=23, minutes=30), "the day of the gap is short"


@pytest.mark.parametrize("zone", sorted(FALL))
def test_a_repeated_local_time_fires_once(zone: str) -> None:
    start, expression = FALL[zone]
    intervals = walk(cron(expression, zone, start), 4)
    check_contiguous(intervals)
    assert len({i.start for i in intervals}) == 4
    assert intervals[1].end - intervals[1].start == timedelta(hours=25), "the day of the repeat is long"


@pytest.mark.parametrize("zone", ["Europe/Berlin", "America/New_York"])
def test_an_hourly_schedule_fires_every_real_hour_through_both_transitions(zone: str) -> None:
    for day in (SPRING[zone], FALL[zone][0]):
        intervals = walk(cron("0 * * * *", zone, day), 60)
        check_contiguous(intervals)
        assert all(i.end - i.start == timedelta(hours=1) for i in intervals)


def test_daily_in_a_zone_is_local_midnight() -> None:
    intervals = walk(cron("@daily", "Europe/Berlin", datetime(2026, 3, 27, tzinfo=UTC)), 3)
    assert [local(i, "Europe/Berlin")[0] for i in intervals] == [
        "03-28 00:00+0100",
        "03-29 00:00+0100",
        "03-30 00:00+0200",
    ]
    assert intervals[1].end - intervals[1].start == timedelta(hours=23)


def test_an_interval_timetable_ignores_daylight_saving() -> None:
    timetable = timetable_of(
        spec(
            schedule_interval=Duration(seconds=86400),
            timezone="Europe/Berlin",
            start_date=ts(SPRING["Europe/Berlin"]),
        )
    )
    intervals = walk(timetable, 5)
    check_contiguous(intervals)
    assert all(i.end - i.start == timedelta(days=1) for i in intervals)


def test_the_first_interval_starts_at_the_first_schedule_time_at_or_after_the_start() -> None:
    assert walk(cron("0 0 * * *", "UTC", datetime(2026, 1, 1, tzinfo=UTC)), 1)[0].start == datetime(
        2026, 1, 1, tzinfo=UTC
    )
    later = walk(cron("0 0 * * *", "UTC", datetime(2026, 1, 1, 0, 0, 1, tzinfo=UTC)), 1)[0]
    assert later.start == datetime(2026, 1, 2, tzinfo=UTC)


def test_end_date_is_the_last_logical_date() -> None:
    timetable = cron("@daily", "UTC", datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 1, 3, tzinfo=UTC))
    assert [i.start.day for i in walk(timetable, 10)] == [1, 2, 3]
    assert timetable.latest_interval(datetime(2026, 6, 1, tzinfo=UTC)) == DataInterval(
        datetime(2026, 1, 3, tzinfo=UTC), datetime(2026, 1, 4, tzinfo=UTC)
    )


def test_intervals_between_two_logical_dates() -> None:
    timetable = cron("0 6 * * *", "UTC", datetime(2026, 1, 1, tzinfo=UTC))
    found = list(timetable.intervals(datetime(2026, 2, 1, tzinfo=UTC), datetime(2026, 2, 10, 6, tzinfo=UTC)))
    assert [i.start.day for i in found] == list(range(1, 11))


# -- the schedule plan: catch-up and outages --------------------------------------------------------------

START = datetime(2026, 5, 1, tzinfo=UTC)


def daily() -> Timetable:
    return cron("@daily", "UTC", START)


def test_catchup_after_a_seven_day_pause_makes_every_missed_run_in_order() -> None:
    timetable = daily()
    paused_from = DataInterval(START + timedelta(days=3), START + timedelta(days=4))
    now = START + timedelta(days=11, hours=1)
    plan = plan_schedule(timetable, ScheduleState(paused_from, True, 0, 0), now)
    assert [i.start for i in plan.create] == [START + timedelta(days=d) for d in range(3, 10 + 1)]
    assert plan.next_interval is not None and plan.next_interval.start == START + timedelta(days=11)
    assert plan.due_at == START + timedelta(days=12)


def test_without_catchup_only_the_latest_interval_runs_after_a_pause() -> None:
    paused_from = DataInterval(START + timedelta(days=3), START + timedelta(days=4))
    now = START + timedelta(days=11, hours=1)
    plan = plan_schedule(daily(), ScheduleState(paused_from, False, 0, 0), now)
    assert [i.start for i in plan.create] == [START + timedelta(days=10)]
    assert plan.next_interval is not None and plan.next_interval.start == START + timedelta(days=11)


def test_a_past_start_date_without_catchup_runs_once() -> None:
    plan = plan_schedule(daily(), ScheduleState(None, False, 0, 0), START + timedelta(days=365, hours=2))
    assert len(plan.create) == 1 and plan.create[0].start == START + timedelta(days=364)


def test_max_active_runs_holds_creation_back_until_a_run_ends() -> None:
    now = START + timedelta(days=10, hours=1)
    plan = plan_schedule(daily(), ScheduleState(None, True, 1, 3), now)
    assert len(plan.create) == 2 and plan.due_at is None, "two more may run; then wait for one to end"
    assert plan_schedule(daily(), ScheduleState(plan.next_interval, True, 3, 3), now).create == []


def test_a_leader_outage_of_several_intervals_is_caught_up_once() -> None:
    """The leader that created the day-2 run dies; the next one leads five days later, and again a
    moment after (a second fail-over): every interval gets exactly one run."""
    timetable = daily()
    created: list[DataInterval] = []
    state_next: DataInterval | None = None
    for now in (
        START + timedelta(days=2, hours=1),
        START + timedelta(days=7, hours=3),
        START + timedelta(days=7, hours=4),
    ):
        plan = plan_schedule(timetable, ScheduleState(state_next, True, 0, 0), now)
        created += plan.create
        state_next = plan.next_interval
    assert [i.start for i in created] == [START + timedelta(days=d) for d in range(7)]


def test_the_per_look_limit_asks_to_look_again_at_once() -> None:
    now = START + timedelta(days=300)
    plan = plan_schedule(daily(), ScheduleState(None, True, 0, 0), now, limit=50)
    assert len(plan.create) == 50 and plan.due_at == now


def test_nothing_is_due_before_the_first_interval_ends() -> None:
    plan = plan_schedule(daily(), ScheduleState(None, True, 0, 0), START + timedelta(hours=23))
    assert plan.create == [] and plan.due_at == START + timedelta(days=1)


# -- validation -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "field", "problem"),
    [
        ({"schedule": "61 * * * *", "start_date": ts(START)}, "spec.schedule", "not a valid cron expression"),
        ({"schedule": "0 0 30 2 *", "start_date": ts(START)}, "spec.schedule", "not a valid cron expression"),
        ({"schedule": "* * * *", "start_date": ts(START)}, "spec.schedule", "five fields"),
        ({"schedule": "* * * * * *", "start_date": ts(START)}, "spec.schedule", "five fields"),
        ({"schedule": "@sometimes", "start_date": ts(START)}, "spec.schedule", "unknown preset"),
        (
            {"schedule": "@daily", "timezone": "Mars/Olympus_Mons", "start_date": ts(START)},
            "spec.timezone",
            "unknown time zone",
        ),
        (
            {"schedule": "@daily", "timezone": "../../etc/passwd", "start_date": ts(START)},
            "spec.timezone",
            "unknown time zone",
        ),
        ({"schedule": "@daily"}, "spec.start_date", "needs a start date"),
        (
            {"schedule": "@daily", "start_date": ts(START), "end_date": ts(START - timedelta(days=1))},
            "spec.end_date",
            "before the start date",
        ),
        (
            {"schedule": "@daily", "schedule_interval": Duration(seconds=60), "start_date": ts(START)},
            "spec.schedule_interval",
            "not both",
        ),
        (
            {"schedule_interval": Duration(nanos=1000), "start_date": ts(START)},
            "spec.schedule_interval",
            "between 1 second",
        ),
    ],
)
def test_bad_schedules_are_refused_naming_the_field(
    options: dict[str, object], field: str, problem: str
) -> None:
    with pytest.raises(InvalidArgument) as info:
        timetable_of(spec(**options))
    assert info.value.field == field and problem in info.value.problem, str(info.value)


def test_no_schedule_is_manual_only() -> None:
    timetable = timetable_of(spec())
    assert timetable.kind == "none" and timetable.first_interval() is None
