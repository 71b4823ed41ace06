"""Trigger timetables through the real store and the leader's schedule timer, with an injected clock:
runs at ticks with the tick as logical date, catch-up off with and without run_immediately after a
pause, a @continuous DAG whose next run waits for the previous one to end, backfills over trigger
timetables, the deployment default fixed at registration, and what a schedule change covers: the
new schedule starts after the span the DAG's runs cover, even when a backfill ran past the
scheduler's position."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from google.protobuf.duration_pb2 import Duration
from google.protobuf.timestamp_pb2 import Timestamp

from schedd.v1 import resources_pb2 as pb
from schedd_api import backfills as backfill_api, dags as dag_api
from schedd_core.clock import FakeClock
from schedd_rpc import convert
from schedd_scheduler.backfills import BackfillDriver
from schedd_scheduler.schedules import ScheduleTimer
from schedd_store import control, dags as dag_store, schedules
from schedd_store.database import Engine
from schedd_store.fence import Fence, raise_fence
from schedd_store.named_sql import Statement
from schedd_store.versions import VersionCache

pytestmark = pytest.mark.integration

TRIGGER = pb.CRON_SEMANTICS_TRIGGER


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, second, tzinfo=UTC)


def dur(value: timedelta) -> Duration:
    out = Duration()
    out.FromTimedelta(value)
    return out


async def register(
    engine: Engine, dag_id: str, start: datetime, *, cron_data_intervals: bool = True, **options: Any
) -> None:
    stamp = Timestamp()
    stamp.FromDatetime(start)
    spec = pb.DagSpec(
        dag_id=dag_id,
        start_date=stamp,
        tasks=[pb.TaskSpec(task_id="a", shell=pb.ShellCommand(command="true"))],
        **options,
    )
    await dag_api.register(engine, spec, paused_if_created=False, cron_data_intervals=cron_data_intervals)


async def timer(engine: Engine, clock: FakeClock) -> ScheduleTimer:
    await raise_fence(engine, 1, "test-1")
    return ScheduleTimer(engine, Fence(engine, 1), VersionCache(), clock=clock)


async def runs_of(engine: Engine, dag_id: str) -> list[tuple[str, datetime, datetime, datetime]]:
    """(run_id, logical date, data interval start, end) of the DAG's scheduled and backfill runs."""
    async with engine.connect() as conn:
        rows = (
            await conn.execute(
                Statement(
                    "SELECT run_id, logical_date, data_interval_start, data_interval_end FROM dag_runs "
                    "WHERE dag_id = :d AND run_type IN ('scheduled', 'backfill') ORDER BY logical_date"
                ),
                {"d": dag_id},
            )
        ).all()
    return [(r[0], r[1], r[2], r[3]) for r in rows]


async def end_all_runs(engine: Engine, dag_id: str) -> None:
    async with engine.begin() as conn:
        await conn.execute(
            Statement("UPDATE dag_runs SET state = 'success' WHERE dag_id = :d"), {"d": dag_id}
        )


async def test_a_cron_trigger_makes_a_run_at_each_tick_and_sleeps_until_the_next(engine: Engine) -> None:
    await register(
        engine,
        "ticks",
        utc(2026, 5, 1),
        schedule="0 */6 * * *",
        cron_semantics=TRIGGER,
        catchup=True,
        trigger_options=pb.TriggerOptions(interval=dur(timedelta(hours=1))),
    )
    schedule = await timer(engine, FakeClock(utc(2026, 5, 1, 13)))
    await schedule.step()
    made = await runs_of(engine, "ticks")
    assert made == [
        (
            f"scheduled__2026-05-01T{h:02d}.00.00Z",
            utc(2026, 5, 1, h),
            utc(2026, 5, 1, h) - timedelta(hours=1),
            utc(2026, 5, 1, h),
        )
        for h in (0, 6, 12)
    ]
    async with engine.connect() as conn:
        assert await schedules.next_due(conn) == utc(2026, 5, 1, 18)  # the timer wakes at the next tick


@pytest.mark.parametrize(("within", "expected"), [(None, []), (timedelta(hours=20), [utc(2026, 5, 8)])])
async def test_catch_up_off_after_a_pause_runs_the_missed_tick_only_as_run_immediately_says(
    engine: Engine, within: timedelta | None, expected: list[datetime]
) -> None:
    dag_id = f"paused_{within is not None}".lower()
    options = pb.TriggerOptions(run_immediately_within=dur(within)) if within else None
    await register(
        engine, dag_id, utc(2026, 5, 1), schedule="@daily", cron_semantics=TRIGGER, trigger_options=options
    )
    clock = FakeClock(utc(2026, 4, 30, 23))
    schedule = await timer(engine, clock)
    await schedule.step()
    clock.advance(3601)
    await schedule.step()
    assert [r[1] for r in await runs_of(engine, dag_id)] == [utc(2026, 5, 1)]  # the tick it waited for
    await control.set_paused(engine, dag_id, True)
    clock.advance(7 * 86400 + 12 * 3600)  # 05-08 12:00: the latest tick, 05-08 00:00, is 12 hours old
    await control.set_paused(engine, dag_id, False)
    await schedule.step()
    assert [r[1] for r in await runs_of(engine, dag_id)] == [utc(2026, 5, 1), *expected]
    async with engine.connect() as conn:
        assert await schedules.next_due(conn) == utc(2026, 5, 9)


async def test_a_continuous_dag_makes_its_next_run_when_the_previous_one_ends(engine: Engine) -> None:
    await register(engine, "forever", utc(2026, 6, 1), schedule="@continuous", max_active_runs=1)
    clock = FakeClock(utc(2026, 6, 1, 0, 0, 10))
    schedule = await timer(engine, clock)
    await schedule.step()
    clock.advance(5)
    await schedule.step(held=True)  # its run is in flight: nothing more, whatever wakes the timer
    schedule.wake(["forever"])
    await schedule.step()
    assert [(r[2], r[3]) for r in await runs_of(engine, "forever")] == [
        (utc(2026, 6, 1), utc(2026, 6, 1, 0, 0, 10))
    ]
    async with engine.connect() as conn:
        assert await schedules.next_due(conn) is None  # no timer: the run's end wakes it
    await end_all_runs(engine, "forever")
    schedule.wake(["forever"])  # the scheduling loop does so when a run ends
    await schedule.step()
    made = await runs_of(engine, "forever")
    assert [(r[1], r[2], r[3]) for r in made] == [
        (utc(2026, 6, 1), utc(2026, 6, 1), utc(2026, 6, 1, 0, 0, 10)),
        (utc(2026, 6, 1, 0, 0, 10), utc(2026, 6, 1, 0, 0, 10), utc(2026, 6, 1, 0, 0, 15)),  # chained
    ]


async def test_a_new_term_makes_the_continuous_run_whose_predecessor_ended_under_the_old_one(
    engine: Engine,
) -> None:
    await register(engine, "handover", utc(2026, 6, 1), schedule="@continuous")
    clock = FakeClock(utc(2026, 6, 1, 0, 0, 10))
    await (await timer(engine, clock)).step()
    await end_all_runs(engine, "handover")  # the wake-up of the ending went to a deposed leader
    clock.advance(3)
    await raise_fence(engine, 2, "test-2")
    await ScheduleTimer(engine, Fence(engine, 2), VersionCache(), clock=clock).step(held=True)
    assert len(await runs_of(engine, "handover")) == 2


async def test_a_backfill_over_a_trigger_timetable_makes_runs_at_its_ticks(engine: Engine) -> None:
    await register(
        engine,
        "weekly",
        utc(2026, 1, 5),
        trigger=pb.TriggerSchedule(crons=["0 3 * * 1", "30 12 * * 3"]),
        trigger_options=pb.TriggerOptions(interval=dur(timedelta(hours=2))),
    )
    request = pb.Backfill(start_date=convert.ts(utc(2026, 1, 5)), end_date=convert.ts(utc(2026, 1, 12, 3)))
    dry = await backfill_api.create(
        engine, FakeClock(utc(2026, 3, 1)), "weekly", request, dry_run=True, request_key=None
    )
    assert [i[2] for i in dry.intervals] == [utc(2026, 1, 5, 3), utc(2026, 1, 7, 12, 30), utc(2026, 1, 12, 3)]
    record = await backfill_api.create(
        engine, FakeClock(utc(2026, 3, 1)), "weekly", request, dry_run=False, request_key=None
    )
    await raise_fence(engine, 1, "test-1")
    await BackfillDriver(engine, Fence(engine, 1), VersionCache()).advance(record.id)
    assert [r[:4] for r in await runs_of(engine, "weekly")] == [
        ("backfill__2026-01-05T03.00.00Z", utc(2026, 1, 5, 3), utc(2026, 1, 5, 1), utc(2026, 1, 5, 3)),
        (
            "backfill__2026-01-07T12.30.00Z",
            utc(2026, 1, 7, 12, 30),
            utc(2026, 1, 7, 10, 30),
            utc(2026, 1, 7, 12, 30),
        ),
        ("backfill__2026-01-12T03.00.00Z", utc(2026, 1, 12, 3), utc(2026, 1, 12, 1), utc(2026, 1, 12, 3)),
    ]


async def test_the_deployment_default_is_fixed_in_the_stored_spec_at_registration(
    engine: Engine,
) -> None:
    await register(engine, "airflow3", utc(2026, 7, 1), cron_data_intervals=False, schedule="@daily")
    # The other setting later changes nothing for the version stored.
    await register(engine, "airflow2", utc(2026, 7, 1), schedule="@daily")
    assert (await dag_store.get_dag(engine, "airflow3")).spec.cron_semantics == TRIGGER
    assert (await dag_store.get_dag(engine, "airflow2")).spec.cron_semantics == pb.CRON_SEMANTICS_UNSPECIFIED
    clock = FakeClock(utc(2026, 7, 1, 23))
    schedule = await timer(engine, clock)
    await schedule.step()  # the trigger's tick of 07-01 00:00 passed before it was registered: skipped
    clock.advance(3601)
    await schedule.step()
    assert [r[1] for r in await runs_of(engine, "airflow3")] == [utc(2026, 7, 2)]  # at the tick
    assert [r[1] for r in await runs_of(engine, "airflow2")] == [utc(2026, 7, 1)]  # the interval of 07-01


async def test_a_schedule_changed_to_a_trigger_starts_at_the_end_of_the_covered_span(
    engine: Engine,
) -> None:
    await register(engine, "switch", utc(2026, 8, 1), schedule="@daily", catchup=True)
    clock = FakeClock(utc(2026, 8, 3, 1))
    schedule = await timer(engine, clock)
    await schedule.step()  # [08-01, 08-02), [08-02, 08-03)
    await register(
        engine, "switch", utc(2026, 8, 1), schedule="0 */12 * * *", cron_semantics=TRIGGER, catchup=True
    )
    clock.advance(12 * 3600)
    await schedule.step()
    # The first tick at or after the covered span's end (08-03 00:00) with a new logical date.
    assert [r[1] for r in await runs_of(engine, "switch")] == [
        utc(2026, 8, 1),
        utc(2026, 8, 2),
        utc(2026, 8, 3),
        utc(2026, 8, 3, 12),
    ]


async def test_a_backfill_past_the_schedulers_position_is_not_covered_again_after_a_change(
    engine: Engine,
) -> None:
    await register(engine, "ahead", utc(2026, 9, 1), schedule="@daily", catchup=True)
    clock = FakeClock(utc(2026, 9, 2, 1))
    schedule = await timer(engine, clock)
    await schedule.step()  # [09-01, 09-02); the scheduler's next interval is [09-02, 09-03)
    request = pb.Backfill(start_date=convert.ts(utc(2026, 9, 2)), end_date=convert.ts(utc(2026, 9, 4)))
    record = await backfill_api.create(engine, clock, "ahead", request, dry_run=False, request_key=None)
    await BackfillDriver(engine, Fence(engine, 1), VersionCache()).advance(record.id)  # up to 09-05 00:00
    await register(engine, "ahead", utc(2026, 9, 1), schedule="0 */6 * * *", catchup=True)
    clock.advance(4 * 86400)
    await schedule.step()
    made = await runs_of(engine, "ahead")
    # The six-hourly intervals start where the backfill's last interval ended: none inside it.
    expected = [utc(2026, 9, d) for d in (1, 2, 3, 4)] + [utc(2026, 9, 5, h) for h in (0, 6, 12, 18)]
    assert [r[1] for r in made] == expected
    assert all(a[3] <= b[2] for a, b in itertools.pairwise(made))
