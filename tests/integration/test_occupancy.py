"""The occupancy counters against the rows they count: after every kind of change (a pass queueing,
claims, results that succeed, fail or retry, a cancel, a clear, a mark, a deleted run), with and
without compaction in between, the counters equal the aggregate over the task instances."""

from __future__ import annotations

import random
from datetime import UTC, datetime

import pytest

from schedd_core.claims import ClaimedAttempt
from schedd_core.states import TaskState
from schedd_store import control, dags, dispatch, occupancy, runs
from schedd_store.database import Engine
from schedd_store.dispatch import AttemptResult
from schedd_store.named_sql import Statement

from .helpers import leading_loop, spec

pytestmark = pytest.mark.integration


async def assert_counters_match(engine: Engine) -> None:
    async with engine.connect() as conn:
        assert await occupancy.counted(conn) == await occupancy.recount(conn)


async def report(engine: Engine, claimed: list[ClaimedAttempt], rng: random.Random) -> None:
    await dispatch.apply_results(
        engine,
        [
            AttemptResult(
                worker_id="w",
                ti_id=c.ti_id,
                attempt_id=c.attempt_id,
                try_number=c.try_number,
                succeeded=(ok := rng.random() < 0.7),
                exit_code=0 if ok else 1,
                error="",
                ended_at=datetime.now(UTC),
            )
            for c in claimed
        ],
    )


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_the_counters_equal_the_rows_after_every_kind_of_change(engine: Engine, seed: int) -> None:
    rng = random.Random(seed)
    async with engine.begin() as conn:
        await conn.execute(Statement("INSERT INTO pools (name, slots) VALUES ('small', 3)"))
    wide = spec("wide", {f"t{i}": [] for i in range(12)} | {"join": [f"t{i}" for i in range(12)]})
    for task in wide.tasks:
        task.retries = 1
        if task.task_id in ("t0", "t1", "t2", "t3"):
            task.pool, task.pool_slots = "small", 1
    await dags.register_dag(engine, wide)
    made = []
    for n in range(3):
        made.append(
            await runs.create_run(
                engine,
                dag_id="wide",
                run_id=f"r{n}",
                run_type="manual",
                logical_date=datetime.now(UTC),
                conf={},
            )
        )
    async with engine.begin() as conn:  # one run counts as a backfill's
        await conn.execute(
            Statement("UPDATE task_instances SET backfill = true WHERE run_pk = :pk"), {"pk": made[2].pk}
        )
    loop = await leading_loop(engine)
    pks = [r.pk for r in made]
    for step in range(12):
        await loop.evaluate(pks)
        await assert_counters_match(engine)
        claimed = await dispatch.claim(engine, worker_id="w", queues=["default"], limit=rng.randint(1, 8))
        await assert_counters_match(engine)
        await report(engine, claimed[: rng.randint(0, len(claimed))], rng)
        await assert_counters_match(engine)
        if rng.random() < 0.5:
            await occupancy.compact(engine)
            await assert_counters_match(engine)
        if step == 4:
            await control.cancel_run(engine, "wide", "r1")
        if step == 6:
            await control.clear(engine, "wide", "r0", [], downstream=False, upstream=False, only_failed=False)
        if step == 8:
            await control.set_state(engine, "wide", "r0", "t5", TaskState.SUCCESS)
        await assert_counters_match(engine)
    async with engine.begin() as conn:
        await conn.execute(Statement("DELETE FROM dag_runs WHERE run_id = 'r2'"))
    await assert_counters_match(engine)
    await occupancy.compact(engine)
    await assert_counters_match(engine)


async def test_a_claim_writes_no_delta(engine: Engine) -> None:
    await dags.register_dag(engine, spec("one", {"a": []}))
    run = await runs.create_run(
        engine, dag_id="one", run_id="r", run_type="manual", logical_date=datetime.now(UTC), conf={}
    )
    await (await leading_loop(engine)).evaluate([run.pk])
    await occupancy.compact(engine)
    (claimed,) = await dispatch.claim(engine, worker_id="w", queues=["default"], limit=1)
    async with engine.connect() as conn:
        assert (await conn.execute(Statement("SELECT count(*) FROM occupancy_deltas"))).scalar_one() == 0
    assert claimed.task_id == "a"
