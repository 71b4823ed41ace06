"""The leader's schedule timer against the real store, with an injected clock: runs made per interval
through both DST transitions in two zones, interval schedules, catch-up on and off after a 7-day
pause, a leader outage of several intervals, max_active_runs holding catch-up back, a changed
schedule, and one run per (dag, logical date) however many writers try."""

from __future__ import annotations

import asyncio
import itertools
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from google.protobuf.duration_pb2 import Duration
from google.protobuf.timestamp_pb2 import Timestamp

from schedd.v1 import resources_pb2 as pb
from schedd_api import dags as dag_api
from schedd_core.clock import FakeClock
from schedd_core.errors import FencedOut
from schedd_core.states import RunType
from schedd_core.timetables import DataInterval
from schedd_scheduler.schedules import ScheduleTimer
from schedd_store import control, schedules
from schedd_store.database import Engine
from schedd_store.fence import Fence, raise_fence
from schedd_store.named_sql import Statement
from schedd_store.schedules import NewRun, RunExists
from schedd_store.versions import VersionCache

pytestmark = pytest.mark.integration


def ts(value: datetime) -> Timestamp:
    out = Timestamp()
    out.FromDatetime(value)
    return out


def scheduled_spec(dag_id: str, start: datetime, **options: Any) -> pb.DagSpec:
    return pb.DagSpec(
        dag_id=dag_id,
        start_date=ts(start),
        tasks=[pb.TaskSpec(task_id="a", shell=pb.ShellCommand(command="true"))],
        **options,
    )


async def timer(engine: Engine, clock: FakeClock, token: int = 1) -> ScheduleTimer:
    await raise_fence(engine, token, f"test-{token}")
    return ScheduleTimer(engine, Fence(engine, token), VersionCache(), clock=clock)


async def runs_of(engine: Engine, dag_id: str) -> list[tuple[str, datetime, datetime, datetime]]:
    """(run_id, logical date, data interval start, end) of the DAG's scheduled runs, in creation order."""
    async with engine.connect() as conn:
        rows = (
            await conn.execute(
                Statement(
                    "SELECT run_id, logical_date, data_interval_start, data_interval_end FROM dag_runs "
                    "WHERE dag_id = :d AND run_type = 'scheduled' ORDER BY id"
                ),
                {"d": dag_id},
            )
        ).all()
    return [(r[0], r[1], r[2], r[3]) for r in rows]


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, second, tzinfo=UTC)


async def test_a_daily_local_time_skipped_by_spring_forward_runs_once_after_the_gap(
    engine: Engine,
) -> None:
    # Europe/Berlin springs forward on 2026-03-29 at 02:00 (to 03:00): 02:30 does not exist that day.
    spec = scheduled_spec(
        "berlin", utc(2026, 3, 26, 12), schedule="30 2 * * *", timezone="Europe/Berlin", catchup=True
    )
    await dag_api.register(engine, spec)
    clock = FakeClock(utc(2026, 4, 1, 6))
    await (await timer(engine, clock)).step()
    made = await runs_of(engine, "berlin")
    assert [r[1] for r in made] == [
        utc(2026, 3, 27, 1, 30),  # 02:30 CET
        utc(2026, 3, 28, 1, 30),
        utc(2026, 3, 29, 1, 0),  # the gap: fires at 03:00 CEST, the first instant after it
        utc(2026, 3, 30, 0, 30),  # 02:30 CEST
        utc(2026, 3, 31, 0, 30),
    ]
    # Each data interval ends where the next begins: the spring-forward day is an hour short.
    assert all(a[3] == b[2] for a, b in itertools.pairwise(made))
    assert made[1][3] - made[1][2] == timedelta(hours=23, minutes=30)
    assert made[0][0] == "scheduled__2026-03-27T01.30.00Z"


async def test_an_hourly_schedule_runs_every_real_hour_through_fall_back(engine: Engine) -> None:
    # America/New_York falls back on 2026-11-01 at 02:00 (to 01:00): 01:xx happens twice.
    spec = scheduled_spec(
        "newyork", utc(2026, 11, 1, 3), schedule="0 * * * *", timezone="America/New_York", catchup=True
    )
    await dag_api.register(engine, spec)
    clock = FakeClock(utc(2026, 11, 1, 9))
    await (await timer(engine, clock)).step()
    made = await runs_of(engine, "newyork")
    assert [r[1] for r in made] == [utc(2026, 11, 1, h) for h in range(3, 9)]  # 23:00 EDT .. 03:00 EST
    assert all(r[3] - r[2] == timedelta(hours=1) for r in made)


async def test_a_fixed_interval_counts_from_the_start_date(engine: Engine) -> None:
    every = Duration()
    every.FromTimedelta(timedelta(hours=6))
    spec = scheduled_spec(
        "every6h", utc(2026, 3, 28, 3), schedule_interval=every, timezone="Europe/Berlin", catchup=True
    )
    await dag_api.register(engine, spec)
    await (await timer(engine, FakeClock(utc(2026, 3, 29, 16)))).step()
    assert [r[1].hour for r in await runs_of(engine, "every6h")] == [3, 9, 15, 21, 3, 9]


@pytest.mark.parametrize("catchup", [True, False])
async def test_catch_up_after_a_seven_day_pause(engine: Engine, catchup: bool) -> None:
    dag_id = f"paused_{catchup}".lower()
    await dag_api.register(
        engine, scheduled_spec(dag_id, utc(2026, 5, 1), schedule="@daily", catchup=catchup)
    )
    clock = FakeClock(utc(2026, 5, 2, 0, 5))
    schedule = await timer(engine, clock)
    await schedule.step()
    assert [r[1] for r in await runs_of(engine, dag_id)] == [utc(2026, 5, 1)]
    await control.set_paused(engine, dag_id, True)
    clock.advance(7 * 86400)
    await schedule.step()
    assert len(await runs_of(engine, dag_id)) == 1  # paused: nothing is made
    await control.set_paused(engine, dag_id, False)
    await schedule.step()
    made = [r[1] for r in await runs_of(engine, dag_id)]
    if catchup:
        assert made == [utc(2026, 5, d) for d in range(1, 9)]  # every missed day, oldest first
    else:
        assert made == [utc(2026, 5, 1), utc(2026, 5, 8)]  # only the latest


@pytest.mark.parametrize("catchup", [True, False])
async def test_a_leader_outage_of_several_intervals(engine: Engine, catchup: bool) -> None:
    dag_id = f"outage_{catchup}".lower()
    await dag_api.register(
        engine, scheduled_spec(dag_id, utc(2026, 6, 1), schedule="@hourly", catchup=catchup)
    )
    clock = FakeClock(utc(2026, 6, 1, 1, 0, 1))
    old_term = await timer(engine, clock, token=1)
    await old_term.step()
    clock.advance(5 * 3600)  # the leader is gone for five intervals
    new_term = await timer(engine, clock, token=2)
    await new_term.step(held=True)
    with pytest.raises(FencedOut):
        await old_term.step()
    made = [r[1] for r in await runs_of(engine, dag_id)]
    expected = [utc(2026, 6, 1, h) for h in range(6)] if catchup else [utc(2026, 6, 1, 0), utc(2026, 6, 1, 5)]
    assert made == expected


async def test_max_active_runs_holds_catch_up_back_until_a_run_ends(engine: Engine) -> None:
    spec = scheduled_spec("limited", utc(2026, 7, 1), schedule="@daily", catchup=True, max_active_runs=2)
    await dag_api.register(engine, spec)
    schedule = await timer(engine, FakeClock(utc(2026, 7, 6, 1)))
    await schedule.step()
    assert len(await runs_of(engine, "limited")) == 2
    await schedule.step()
    assert len(await runs_of(engine, "limited")) == 2
    async with engine.begin() as conn:
        await conn.execute(
            Statement("UPDATE dag_runs SET state = 'success' WHERE dag_id = 'limited' AND logical_date = :d"),
            {"d": utc(2026, 7, 1)},
        )
    schedule.wake(["limited"])  # the scheduling loop does so when a run ends
    await schedule.step()
    assert [r[1].day for r in await runs_of(engine, "limited")] == [1, 2, 3]


async def test_a_changed_schedule_goes_on_where_the_old_one_stopped(engine: Engine) -> None:
    await dag_api.register(
        engine, scheduled_spec("changed", utc(2026, 8, 1), schedule="@daily", catchup=True)
    )
    clock = FakeClock(utc(2026, 8, 3, 1))
    schedule = await timer(engine, clock)
    await schedule.step()
    await dag_api.register(
        engine, scheduled_spec("changed", utc(2026, 8, 1), schedule="0 12 * * *", catchup=True)
    )
    clock.advance(36 * 3600)
    await schedule.step()
    # The daily runs covered up to 08-03 00:00: the new schedule's first interval starts at its first
    # schedule time after it, so no data interval is covered twice; [08-03 00:00, 12:00) is covered
    # by no run, as docs/scheduling.md says.
    made = [r[1] for r in await runs_of(engine, "changed")]
    assert made == [utc(2026, 8, 1), utc(2026, 8, 2), utc(2026, 8, 3, 12)]


async def test_a_changed_schedule_does_not_remake_runs_that_retention_deleted(engine: Engine) -> None:
    await dag_api.register(engine, scheduled_spec("purged", utc(2026, 8, 1), schedule="@daily", catchup=True))
    clock = FakeClock(utc(2026, 8, 10, 1))
    schedule = await timer(engine, clock)
    await schedule.step()
    async with engine.begin() as conn:  # as retention does with old finished runs
        await conn.execute(Statement("DELETE FROM dag_runs WHERE dag_id = 'purged'"))
    await dag_api.register(
        engine, scheduled_spec("purged", utc(2026, 8, 1), schedule="0 6 * * *", catchup=True)
    )
    clock.advance(86400 + 6 * 3600)
    await schedule.step()
    # Not from the start date again: after where the old schedule had got to (08-10).
    assert [r[1] for r in await runs_of(engine, "purged")] == [utc(2026, 8, 10, 6)]


async def test_concurrent_steps_make_each_run_once(engine: Engine) -> None:
    await dag_api.register(engine, scheduled_spec("raced", utc(2026, 9, 1), schedule="@hourly", catchup=True))
    clock = FakeClock(utc(2026, 9, 2))
    first, second = (
        await timer(engine, clock),
        ScheduleTimer(engine, Fence(engine, 1), VersionCache(), clock=clock),
    )
    await asyncio.gather(first.step(), second.step(), first.step())
    made = [r[1] for r in await runs_of(engine, "raced")]
    assert made == [utc(2026, 9, 1, h) for h in range(24)]


async def test_a_second_run_for_a_logical_date_is_refused_by_name(engine: Engine) -> None:
    await dag_api.register(engine, scheduled_spec("unique", utc(2026, 10, 1), schedule="@daily"))
    await raise_fence(engine, 1, "test")
    fence = Fence(engine, 1)
    async with engine.connect() as conn:
        version = (
            await conn.execute(Statement("SELECT latest_version_id FROM dags WHERE dag_id = 'unique'"))
        ).scalar_one()
    day = DataInterval(utc(2026, 10, 1), utc(2026, 10, 2))
    async with fence.transaction() as conn:
        await schedules.create_interval_runs(
            conn, [NewRun("unique", version, day)], run_type=RunType.SCHEDULED
        )
    with pytest.raises(RunExists):
        async with fence.transaction() as conn:
            other = NewRun("unique", version, DataInterval(utc(2026, 10, 2), utc(2026, 10, 3)))
            await schedules.create_interval_runs(
                conn, [other, NewRun("unique", version, day)], run_type=RunType.BACKFILL
            )
    assert [r[1] for r in await runs_of(engine, "unique")] == [utc(2026, 10, 1)]  # the batch left nothing


async def test_the_timer_sleeps_until_the_next_interval_ends(engine: Engine) -> None:
    await dag_api.register(engine, scheduled_spec("sleepy", utc(2026, 11, 1), schedule="@daily"))
    clock = FakeClock(utc(2026, 11, 1, 20))
    schedule = await timer(engine, clock)
    result = await schedule.step()
    assert (result.runs, result.more) == (0, False)
    async with engine.connect() as conn:
        assert await schedules.next_due(conn) == utc(2026, 11, 2)
