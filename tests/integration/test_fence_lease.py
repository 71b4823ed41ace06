"""The fence and the lease together: a pass that outlives its lease commits nothing; raising the fence
waits for a frozen old term only in bounded steps, and the scheduler's session limits end a frozen
transaction that holds the fence lock."""

from __future__ import annotations

import asyncio

import pytest

from schedd_coord.lease import LeaseTiming
from schedd_core.errors import LeaseExpired
from schedd_scheduler.config import SchedulerConfig
from schedd_scheduler.loop import SchedulingLoop
from schedd_scheduler.pending import PendingRuns
from schedd_store import runs
from schedd_store.database import Engine
from schedd_store.engine import make_engine
from schedd_store.fence import Fence, raise_fence
from schedd_store.named_sql import Statement
from schedd_store.versions import VersionCache
from tests.polling import wait_until_async

from .helpers import registered_run, spec

pytestmark = pytest.mark.integration

MARK = Statement("INSERT INTO outbox (topic, payload) VALUES ('test', '{}'::jsonb)")
MARKS = Statement("SELECT count(*) FROM outbox WHERE topic = 'test'")


class ManualLease:
    """A lease whose remaining validity the test sets; it counts how often it was asked."""

    def __init__(self, remaining: float) -> None:
        self.left = remaining
        self.asked = 0

    def remaining(self) -> float:
        self.asked += 1
        return self.left


async def test_a_transaction_whose_lease_ran_out_commits_nothing(engine: Engine) -> None:
    await raise_fence(engine, 3, "leader")
    lease = ManualLease(10)
    fence = Fence(engine, 3, lease=lease)
    with pytest.raises(LeaseExpired):
        async with fence.transaction() as conn:
            await conn.execute(MARK)
            lease.left = 0.01  # the lease runs out while the pass computes
    async with engine.connect() as conn:
        assert (await conn.execute(MARKS)).scalar_one() == 0
    async with fence.transaction() as conn:  # with the lease trusted, the same write commits
        lease.left = 10
        await conn.execute(MARK)
    async with engine.connect() as conn:
        assert (await conn.execute(MARKS)).scalar_one() == 1


async def test_a_pass_that_outlives_its_lease_plans_nothing(engine: Engine) -> None:
    run = await registered_run(engine, spec("late", {"a": [], "b": ["a"]}))
    await raise_fence(engine, 4, "leader")
    lease = ManualLease(0.0)
    loop = SchedulingLoop(engine, Fence(engine, 4, lease=lease), PendingRuns(), VersionCache(), batch_size=10)
    with pytest.raises(LeaseExpired):
        await loop.evaluate([run.pk])
    record = await runs.get_run(engine, "late", "r1")
    assert record.task_instances == [] and record.state == "queued"


async def test_raising_the_fence_gives_up_with_its_lease(engine: Engine) -> None:
    """A frozen old term holds the fence lock: the new term waits in bounded steps and gives up when
    its own lease runs out, instead of hanging."""
    await raise_fence(engine, 5, "old")
    lease = ManualLease(0.5)
    async with Fence(engine, 5).transaction() as old:
        await old.execute(MARK)  # the old term holds the shared lock and does not finish

        async def shrink() -> None:
            # Each step asks the lease twice: a third question means one step waited out the lock.
            await wait_until_async("the new term to wait a step on the lock", lambda: lease.asked >= 3, 10)
            lease.left = 0.0

        shrinking = asyncio.create_task(shrink())
        with pytest.raises(LeaseExpired):
            await asyncio.wait_for(raise_fence(engine, 9, "new", lease=lease), 10)
        await shrinking
    async with engine.connect() as conn:
        assert (
            await conn.execute(Statement("SELECT token FROM scheduler_fence WHERE id = 1"))
        ).scalar_one() == 5


async def test_the_scheduler_sessions_end_a_frozen_transaction_that_holds_the_fence_lock(
    migrated_url: str,
) -> None:
    """The settings the scheduler applies to its engine: a transaction left idle while holding the
    fence lock (its process frozen) is ended by PostgreSQL, so the next term can raise the fence."""
    config = SchedulerConfig(
        database_url=migrated_url,
        etcd_endpoints="unused:1",
        identity="t",
        lease=LeaseTiming(ttl=2, renew_deadline=1.4, retry_period=0.3),
    )
    scheduler_engine = make_engine(migrated_url, server_settings=config.session_settings())
    other = make_engine(migrated_url)
    try:
        await raise_fence(other, 5, "old")
        raised = False
        with pytest.raises(Exception):  # noqa: B017  # the commit: the session was terminated by the server
            async with scheduler_engine.begin() as conn:
                await conn.execute(Statement("SELECT token FROM scheduler_fence WHERE id = 1 FOR SHARE"))
                # Frozen here: no further statement, no commit. Without the session limits this would
                # wait forever; how long it takes is the benchmark's (failover group, a frozen leader).
                await asyncio.wait_for(raise_fence(other, 9, "new"), 5)
                raised = True
        assert raised
    finally:
        await scheduler_engine.dispose()
        await other.dispose()
