"""Backfills against the real store: the leader's steps per strategy as runs end, what each reprocess
behaviour does with runs that exist, runs in flight left alone, one active backfill per DAG, dry
runs that store nothing, pause and resume, cancel, and a term that ends mid-step."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest
from google.protobuf.timestamp_pb2 import Timestamp

from schedd.v1 import resources_pb2 as pb
from schedd_api import backfills as backfill_api, dags as dag_api
from schedd_core.clock import FakeClock
from schedd_core.errors import AlreadyExists, FailedPrecondition, FencedOut
from schedd_rpc import convert
from schedd_scheduler.backfills import BackfillDriver
from schedd_scheduler.loop import SchedulingLoop
from schedd_scheduler.pending import PendingRuns
from schedd_store import backfills
from schedd_store.database import Engine
from schedd_store.fence import Fence, raise_fence
from schedd_store.named_sql import Statement
from schedd_store.versions import VersionCache
from tests.polling import wait_until_async

pytestmark = pytest.mark.integration

START = datetime(2025, 1, 1, tzinfo=UTC)


def day(n: int) -> datetime:
    return START + timedelta(days=n)


async def register(engine: Engine, dag_id: str) -> None:
    stamp = Timestamp()
    stamp.FromDatetime(START)
    await dag_api.register(
        engine,
        pb.DagSpec(
            dag_id=dag_id,
            schedule="@daily",
            start_date=stamp,
            tasks=[pb.TaskSpec(task_id="a", shell=pb.ShellCommand(command="true"))],
        ),
    )


async def create(engine: Engine, dag_id: str, days: int, *, dry_run: bool = False, **options: object) -> int:
    request = pb.Backfill(start_date=convert.ts(START), end_date=convert.ts(day(days - 1)), **options)  # type: ignore[arg-type]
    record = await backfill_api.create(
        engine, FakeClock(day(400)), dag_id, request, dry_run=dry_run, request_key=None
    )
    return record.id


async def driver(engine: Engine, token: int = 1) -> BackfillDriver:
    await raise_fence(engine, token, f"test-{token}")
    return BackfillDriver(engine, Fence(engine, token), VersionCache())


async def backfill_runs(engine: Engine, dag_id: str) -> dict[int, str]:
    """Day number -> state of the DAG's runs (made by the backfill or not)."""
    async with engine.connect() as conn:
        rows = (
            await conn.execute(
                Statement("SELECT logical_date, state FROM dag_runs WHERE dag_id = :d ORDER BY logical_date"),
                {"d": dag_id},
            )
        ).all()
    return {(r.logical_date - START).days: r.state for r in rows}


async def end_runs(engine: Engine, dag_id: str, days: list[int], state: str = "success") -> None:
    async with engine.begin() as conn:
        await conn.execute(
            Statement("UPDATE dag_runs SET state = :s WHERE dag_id = :d AND logical_date = ANY(:dates)"),
            {"s": state, "d": dag_id, "dates": [day(n) for n in days]},
        )


async def test_sequential_makes_one_run_at_a_time_and_stops_at_a_failure(engine: Engine) -> None:
    await register(engine, "seq")
    backfill_id = await create(engine, "seq", 4, strategy=pb.BACKFILL_STRATEGY_SEQUENTIAL)
    leader = await driver(engine)
    await leader.advance(backfill_id)
    assert await backfill_runs(engine, "seq") == {0: "queued"}
    await end_runs(engine, "seq", [0])
    await leader.advance(backfill_id)
    assert await backfill_runs(engine, "seq") == {0: "success", 1: "queued"}
    await end_runs(engine, "seq", [1], "failed")
    await leader.advance(backfill_id)
    record = await backfills.get_backfill(engine, backfill_id)
    assert (record.state, record.error) == ("failed", f"the run of {day(1).isoformat()} failed")
    assert (record.progress.succeeded, record.progress.failed, record.progress.pending) == (1, 1, 2)
    assert await backfill_runs(engine, "seq") == {0: "success", 1: "failed"}


async def test_parallel_keeps_max_active_runs_in_flight(engine: Engine) -> None:
    await register(engine, "par")
    backfill_id = await create(engine, "par", 5, strategy=pb.BACKFILL_STRATEGY_PARALLEL, max_active_runs=2)
    leader = await driver(engine)
    await leader.advance(backfill_id)
    assert await backfill_runs(engine, "par") == {0: "queued", 1: "queued"}
    await end_runs(engine, "par", [1], "failed")
    await leader.advance(backfill_id)
    assert await backfill_runs(engine, "par") == {0: "queued", 1: "failed", 2: "queued"}
    await end_runs(engine, "par", [0, 2])
    await leader.advance(backfill_id)
    await end_runs(engine, "par", [3, 4])
    await leader.advance(backfill_id)
    record = await backfills.get_backfill(engine, backfill_id)
    assert (record.state, record.progress.succeeded, record.progress.failed) == ("failed", 4, 1)


async def test_chunked_starts_the_next_chunk_once_the_previous_succeeded(engine: Engine) -> None:
    await register(engine, "chunk")
    backfill_id = await create(
        engine, "chunk", 5, strategy=pb.BACKFILL_STRATEGY_CHUNKED, chunk_size=2, backward=True
    )
    leader = await driver(engine)
    await leader.advance(backfill_id)
    assert await backfill_runs(engine, "chunk") == {4: "queued", 3: "queued"}
    await end_runs(engine, "chunk", [4])
    await leader.advance(backfill_id)
    assert set(await backfill_runs(engine, "chunk")) == {3, 4}  # chunk 0 has a run in flight
    await end_runs(engine, "chunk", [3])
    await leader.advance(backfill_id)
    assert set(await backfill_runs(engine, "chunk")) == {1, 2, 3, 4}


@pytest.mark.parametrize(
    ("reprocess", "expected"),
    [
        (pb.REPROCESS_BEHAVIOR_SKIP_EXISTING, {0: "success", 1: "failed", 2: "queued"}),
        (pb.REPROCESS_BEHAVIOR_RERUN_FAILED, {0: "success", 1: "running", 2: "queued"}),
        (pb.REPROCESS_BEHAVIOR_RERUN_ALL, {0: "running", 1: "running", 2: "queued"}),
    ],
    ids=["skip_existing", "rerun_failed", "rerun_all"],
)
async def test_reprocess_behaviour_with_runs_that_exist(
    engine: Engine, reprocess: int, expected: dict[int, str]
) -> None:
    dag_id = f"re{reprocess}"
    await register(engine, dag_id)
    # Runs of days 0 (succeeded) and 1 (failed) exist already, made by an earlier backfill.
    first = await create(engine, dag_id, 2)
    leader = await driver(engine)
    await leader.advance(first)
    loop = SchedulingLoop(engine, Fence(engine, 1), PendingRuns(), VersionCache(), batch_size=500)
    async with engine.connect() as conn:
        pks = [
            r[0]
            for r in (
                await conn.execute(Statement("SELECT id FROM dag_runs WHERE dag_id = :d"), {"d": dag_id})
            )
        ]
    await loop.evaluate(pks)  # materialise their task instances
    await end_runs(engine, dag_id, [0])
    await end_runs(engine, dag_id, [1], "failed")
    await leader.advance(first)
    second = await create(engine, dag_id, 3, reprocess=reprocess)
    await leader.advance(second)
    assert await backfill_runs(engine, dag_id) == expected
    record = await backfills.get_backfill(engine, second)
    rerun = sum(1 for n in (0, 1) if expected[n] == "running")
    assert (record.progress.skipped, record.progress.running) == (2 - rerun, 1 + rerun)
    async with engine.connect() as conn:
        cleared = (
            await conn.execute(
                Statement(
                    "SELECT count(*) FROM task_instances ti JOIN dag_runs r ON r.id = ti.run_pk "
                    "WHERE r.dag_id = :d AND ti.state = 'none' AND ti.backfill AND r.backfill_id = :b"
                ),
                {"d": dag_id, "b": second},
            )
        ).scalar_one()
    assert cleared == rerun  # rerun runs start over, as the backfill's


async def test_a_run_in_flight_is_left_alone(engine: Engine) -> None:
    await register(engine, "flight")
    first = await create(engine, "flight", 1)
    leader = await driver(engine)
    await leader.advance(first)
    await backfills.cancel_backfill(engine, first)  # its run is cancelled: make another in flight
    async with engine.begin() as conn:
        await conn.execute(Statement("UPDATE dag_runs SET state = 'running' WHERE dag_id = 'flight'"))
    second = await create(engine, "flight", 2, reprocess=pb.REPROCESS_BEHAVIOR_RERUN_ALL)
    await leader.advance(second)
    async with engine.connect() as conn:
        notes = (
            await conn.execute(
                Statement(
                    "SELECT status, note FROM backfill_intervals WHERE backfill_id = :b ORDER BY position"
                ),
                {"b": second},
            )
        ).all()
    assert notes[0].status == "skipped" and "in flight" in notes[0].note
    assert notes[1].status == "created"


async def test_one_active_backfill_per_dag_and_dry_runs_store_nothing(engine: Engine) -> None:
    await register(engine, "single")
    dry = await backfill_api.create(
        engine,
        FakeClock(),
        "single",
        pb.Backfill(start_date=convert.ts(START), end_date=convert.ts(day(2))),
        dry_run=True,
        request_key=None,
    )
    assert [i[0] for i in dry.intervals] == [day(0), day(1), day(2)]
    assert await backfills.list_backfills(engine, dag_id="single", before=2**62, limit=10) == []
    first = await create(engine, "single", 3)
    with pytest.raises(AlreadyExists, match="running or paused backfill"):
        await create(engine, "single", 3)
    await backfills.pause_backfill(engine, first)
    with pytest.raises(FailedPrecondition, match="not running"):
        await backfills.pause_backfill(engine, first)
    leader = await driver(engine)
    await leader.advance(first)
    assert await backfill_runs(engine, "single") == {}  # paused: no run is made
    await backfills.resume_backfill(engine, first)
    await leader.advance(first)
    assert len(await backfill_runs(engine, "single")) == 3
    cancelled = await backfills.cancel_backfill(engine, first)
    assert cancelled.state == "cancelled"
    assert set((await backfill_runs(engine, "single")).values()) == {"failed"}
    await create(engine, "single", 3)  # a new one may start now


async def test_a_dag_without_a_schedule_has_nothing_to_backfill(engine: Engine) -> None:
    await dag_api.register(
        engine,
        pb.DagSpec(dag_id="manual", tasks=[pb.TaskSpec(task_id="a", shell=pb.ShellCommand(command="true"))]),
    )
    with pytest.raises(FailedPrecondition, match="no schedule"):
        await create(engine, "manual", 3)


async def test_a_deposed_leader_makes_no_backfill_run(engine: Engine) -> None:
    await register(engine, "deposed")
    backfill_id = await create(engine, "deposed", 3)
    old = await driver(engine, token=1)
    await raise_fence(engine, 2, "newer")
    with pytest.raises(FencedOut):
        await old.advance(backfill_id)
    assert await backfill_runs(engine, "deposed") == {}
    new = BackfillDriver(engine, Fence(engine, 2), VersionCache())
    await new.advance(backfill_id)
    await new.advance(backfill_id)
    assert await backfill_runs(engine, "deposed") == {0: "queued", 1: "queued", 2: "queued"}


async def test_a_run_that_ends_while_the_backfill_is_cancelled_is_left_as_it_ended(
    engine: Engine,
) -> None:
    """The leader finishes one of the backfill's runs (its transaction holds the run) at the moment
    the backfill is cancelled: the cancel waits for it, leaves that run as it ended and cancels the
    rest, instead of failing on a run that is "already success"."""
    await register(engine, "race")
    backfill_id = await create(engine, "race", 3, strategy=pb.BACKFILL_STRATEGY_PARALLEL, max_active_runs=3)
    await (await driver(engine)).advance(backfill_id)
    assert await backfill_runs(engine, "race") == {0: "queued", 1: "queued", 2: "queued"}
    async with engine.begin() as leader:  # committed once the cancel is seen waiting for its lock
        await leader.execute(
            Statement("UPDATE dag_runs SET state = 'success' WHERE dag_id = 'race' AND logical_date = :d"),
            {"d": day(0)},
        )
        cancelling = asyncio.create_task(backfills.cancel_backfill(engine, backfill_id))
        await wait_until_async(
            "the cancel waiting for the run the leader holds", lambda: _waiting_for_a_lock(engine), timeout=30
        )
    record = await asyncio.wait_for(cancelling, timeout=30)
    assert record.state == "cancelled"
    assert await backfill_runs(engine, "race") == {0: "success", 1: "failed", 2: "failed"}


async def _waiting_for_a_lock(engine: Engine) -> bool:
    async with engine.connect() as conn:
        waiting = await conn.execute(
            Statement(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND wait_event_type = 'Lock'"
            )
        )
    return bool(waiting.scalar())
