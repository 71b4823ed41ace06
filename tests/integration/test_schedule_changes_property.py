"""Property, against the real store and the leader's schedule timer: whatever the sequence of waits,
schedule changes (data-interval and trigger timetables, one of them through a DST transition) and
backfills (before or past the scheduler's position), no two runs of the DAG share a logical date, no
scheduled run covers any part of a span a run made before it covers, and the scheduled runs are
exactly what docs/scheduling.md says: each schedule starts at its first run whose data interval
starts at or after the covered span's end P (the latest end of the DAG's runs' data intervals, or
the start of the run the old schedule would have made next, whichever is later) and whose logical
date is after every earlier run's, and from there every run whose time has come exists."""

from __future__ import annotations

import asyncio
import itertools
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest
from google.protobuf.duration_pb2 import Duration
from hypothesis import HealthCheck, given, settings, strategies as st

from schedd.v1 import resources_pb2 as pb
from schedd_api import backfills as backfill_api, dags as dag_api
from schedd_core.clock import FakeClock
from schedd_core.errors import InvalidArgument
from schedd_core.timetable_spec import timetable_of
from schedd_core.timetables import DataInterval
from schedd_rpc import convert
from schedd_scheduler.backfills import BackfillDriver
from schedd_scheduler.schedules import ScheduleTimer
from schedd_store.database import Engine
from schedd_store.engine import make_engine
from schedd_store.fence import Fence, raise_fence
from schedd_store.named_sql import Statement
from schedd_store.versions import VersionCache

pytestmark = pytest.mark.integration

START = datetime(2026, 3, 25, tzinfo=UTC)  # Europe/Berlin springs forward on 03-29


def _duration(hours: int) -> Duration:
    out = Duration()
    out.FromTimedelta(timedelta(hours=hours))
    return out


TRIGGER = pb.CRON_SEMANTICS_TRIGGER
SCHEDULES: list[dict[str, object]] = [
    {"schedule": "@daily"},
    {"schedule": "0 */6 * * *"},
    {"schedule_interval": _duration(8)},
    {"schedule": "30 2 * * *", "timezone": "Europe/Berlin"},
    {"schedule": "0 * * * *", "cron_semantics": TRIGGER},
    {
        "schedule": "0 */4 * * *",
        "cron_semantics": TRIGGER,
        "trigger_options": pb.TriggerOptions(interval=_duration(4)),
    },
    {"trigger": pb.TriggerSchedule(every=_duration(5))},
]

Op = tuple[
    str, int, int
]  # ("wait", hours, _) | ("change", schedule, _) | ("backfill", offset hours, length hours)
ops_strategy = st.lists(
    st.one_of(
        st.tuples(st.just("wait"), st.integers(1, 30), st.just(0)),
        st.tuples(st.just("change"), st.integers(0, len(SCHEDULES) - 1), st.just(0)),
        st.tuples(st.just("backfill"), st.integers(-72, 48), st.integers(0, 48)),
    ),
    min_size=1,
    max_size=8,
)


@dataclass
class Segment:
    """The runs one schedule must have made: from ``first`` on, every run due before ``until``."""

    spec: pb.DagSpec
    first: DataInterval | None
    until: datetime | None = None


def spec_of(dag_id: str, schedule: int) -> pb.DagSpec:
    return pb.DagSpec(
        dag_id=dag_id,
        start_date=convert.ts(START),
        catchup=True,
        tasks=[pb.TaskSpec(task_id="a", shell=pb.ShellCommand(command="true"))],
        **SCHEDULES[schedule],  # type: ignore[arg-type]
    )


def covers(earlier: DataInterval, later: DataInterval) -> bool:
    """Whether the spans overlap: [start, end), or the point start when empty."""
    if earlier.start == earlier.end and later.start == later.end:
        return earlier.start == later.start
    if earlier.start == earlier.end:
        return later.start <= earlier.start < later.end
    if later.start == later.end:
        return earlier.start <= later.start < earlier.end
    return earlier.start < later.end and later.start < earlier.end


async def runs(engine: Engine, dag_id: str) -> dict[int, tuple[str, DataInterval]]:
    async with engine.connect() as conn:
        rows = (
            await conn.execute(
                Statement(
                    "SELECT id, run_type, logical_date, data_interval_start, data_interval_end FROM dag_runs "
                    "WHERE dag_id = :d"
                ),
                {"d": dag_id},
            )
        ).all()
    return {
        r.id: (r.run_type, DataInterval(r.data_interval_start, r.data_interval_end, logical=r.logical_date))
        for r in rows
    }


async def position(engine: Engine, dag_id: str) -> tuple[datetime, datetime | None]:
    """P and the latest logical date, before a change, as docs/scheduling.md defines them."""
    async with engine.connect() as conn:
        row = (
            await conn.execute(
                Statement(
                    "SELECT GREATEST((SELECT max(data_interval_end) FROM dag_runs WHERE dag_id = :d), "
                    "  (SELECT next_interval_start FROM dags WHERE dag_id = :d), "
                    "  (SELECT planned_until FROM dags WHERE dag_id = :d)) AS p, "
                    "(SELECT max(logical_date) FROM dag_runs WHERE dag_id = :d) AS l"
                ),
                {"d": dag_id},
            )
        ).one()
    return row.p, row.l


async def backfill(
    engine: Engine, fence: Fence, clock: FakeClock, dag_id: str, start: datetime, end: datetime
) -> None:
    request = pb.Backfill(start_date=convert.ts(start), end_date=convert.ts(end), max_active_runs=1000)
    try:
        record = await backfill_api.create(engine, clock, dag_id, request, dry_run=False, request_key=None)
    except InvalidArgument:
        return  # no run of the schedule in the range
    driver = BackfillDriver(engine, fence, VersionCache())
    await driver.advance(record.id)
    async with engine.begin() as conn:
        await conn.execute(
            Statement("UPDATE dag_runs SET state = 'success' WHERE dag_id = :d"), {"d": dag_id}
        )
    await driver.advance(record.id)


async def scenario(url: str, dag_id: str, ops: list[Op]) -> None:
    engine = make_engine(url, pool_size=2)
    try:
        token = next(_tokens)  # every example is a new term over the same database
        await raise_fence(engine, token, "property")
        fence = Fence(engine, token)
        clock = FakeClock(START + timedelta(hours=1))
        timer = ScheduleTimer(engine, fence, VersionCache(), clock=clock)
        current = 0
        await dag_api.register(engine, spec_of(dag_id, current), paused_if_created=False)
        segments = [
            Segment(spec_of(dag_id, current), timetable_of(spec_of(dag_id, current)).first_interval())
        ]
        await timer.step()
        for op, a, b in ops:
            if op == "wait":
                clock.advance(a * 3600)
            elif op == "change" and a != current:
                covered_until, latest = await position(engine, dag_id)
                current = a
                segments[-1].until = clock.now()
                spec = spec_of(dag_id, current)
                segments.append(Segment(spec, timetable_of(spec).first_from(covered_until, latest)))
                await dag_api.register(engine, spec, paused_if_created=False)
            elif op == "backfill":
                start = clock.now() + timedelta(hours=a)
                await backfill(engine, fence, clock, dag_id, start, start + timedelta(hours=b))
            before = await runs(engine, dag_id)
            await timer.step()
            after = await runs(engine, dag_id)
            for run_id, (run_type, made) in after.items():
                if run_id not in before and run_type == "scheduled":
                    assert not any(covers(old, made) for _, old in before.values()), (made, before)
        segments[-1].until = clock.now()
        check_segments(segments, [interval for _, interval in (await runs(engine, dag_id)).values()])
    finally:
        await engine.dispose()


def check_segments(segments: list[Segment], made: list[DataInterval]) -> None:
    """Every run each schedule owed exists; logical dates are unique."""
    logical_dates = [m.logical_date for m in made]
    assert len(logical_dates) == len(set(logical_dates))
    for segment in segments:
        timetable = timetable_of(segment.spec)
        run = segment.first
        while run is not None and segment.until is not None and run.run_after <= segment.until:
            assert run.logical_date in logical_dates, (segment.spec, run)
            run = timetable.interval_after(run)


_names = itertools.count()
_tokens = itertools.count(1)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=ops_strategy)
def test_schedule_changes_and_backfills_cover_each_span_once_and_leave_out_only_the_documented_gap(
    migrated_url: str, ops: list[Op]
) -> None:
    asyncio.run(scenario(migrated_url, f"prop_{next(_names)}", ops))
