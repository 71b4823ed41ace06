"""The fence: scheduler writes land only while their term's token is the fence's value.

These tests drive two connections by hand to force the interleavings that matter.
"""

from __future__ import annotations

import asyncio

import pytest

from schedd_core.errors import FencedOut
from schedd_store.database import Engine
from schedd_store.fence import Fence, raise_fence, read_fence
from schedd_store.named_sql import Statement

pytestmark = pytest.mark.integration

MARK = Statement("INSERT INTO outbox (topic, payload) VALUES ('test', CAST(:payload AS jsonb))")
MARKS = Statement("SELECT payload->>'token' AS token FROM outbox WHERE topic = 'test' ORDER BY id")


async def _wait_until_blocked_on_lock(engine: Engine, application_name: str) -> None:
    """Poll (bounded) until a backend of ``application_name`` waits for a lock."""
    query = Statement(
        "SELECT count(*) FROM pg_stat_activity WHERE application_name = :app AND wait_event_type = 'Lock'"
    )
    async with asyncio.timeout(10):
        while True:
            async with engine.connect() as conn:
                if (await conn.execute(query, {"app": application_name})).scalar_one():
                    return
            await asyncio.sleep(0.01)


async def test_raise_only_grows(engine: Engine) -> None:
    await raise_fence(engine, 5, "a")
    with pytest.raises(FencedOut) as err:
        await raise_fence(engine, 3, "b")
    assert err.value.current == 5
    with pytest.raises(FencedOut):
        await raise_fence(engine, 5, "c")
    assert await read_fence(engine) == (5, "a")


async def test_stale_token_writes_nothing(engine: Engine) -> None:
    await raise_fence(engine, 5, "old")
    await raise_fence(engine, 9, "new")
    rejected: list[FencedOut] = []
    fence = Fence(engine, 5, on_rejected=rejected.append)
    with pytest.raises(FencedOut):
        async with fence.transaction() as conn:
            await conn.execute(MARK, {"payload": '{"token": 5}'})
    async with engine.connect() as conn:
        assert (await conn.execute(MARKS)).all() == []
    assert len(rejected) == 1


async def test_raise_waits_for_the_old_terms_transaction_in_flight(engine: Engine, migrated_url: str) -> None:
    """Old leader passes the check, new leader raises the fence: the raise must wait until the old
    transaction ends, so no old-term write can commit after the new term began."""
    from schedd_store.engine import make_engine

    await raise_fence(engine, 5, "old")
    raiser = make_engine(migrated_url, pool_size=1, application_name="fence-raiser")
    try:
        old = Fence(engine, 5)
        async with old.transaction() as conn:
            raise_task = asyncio.create_task(raise_fence(raiser, 9, "new"))
            await _wait_until_blocked_on_lock(engine, "fence-raiser")
            assert not raise_task.done()
            await conn.execute(MARK, {"payload": '{"token": 5}'})
        await asyncio.wait_for(raise_task, 10)
        # Every later transaction of the old term fails and writes nothing.
        with pytest.raises(FencedOut):
            async with old.transaction() as conn:
                await conn.execute(MARK, {"payload": '{"token": 5}'})
        async with Fence(engine, 9).transaction() as conn:
            await conn.execute(MARK, {"payload": '{"token": 9}'})
        async with engine.connect() as conn:
            assert [r.token for r in (await conn.execute(MARKS)).all()] == ["5", "9"]
    finally:
        await raiser.dispose()


async def test_an_unlocked_check_would_be_racy(engine: Engine, migrated_url: str) -> None:
    """The control experiment: with a plain read instead of FOR SHARE, the raise does not wait, and
    the old term's write commits after the new term's. This is the race the lock closes."""
    from schedd_store.engine import make_engine

    await raise_fence(engine, 5, "old")
    raiser = make_engine(migrated_url, pool_size=1, application_name="fence-raiser")
    try:
        async with engine.begin() as conn:
            token = (
                await conn.execute(Statement("SELECT token FROM scheduler_fence WHERE id = 1"))
            ).scalar_one()
            assert token == 5
            await asyncio.wait_for(raise_fence(raiser, 9, "new"), 10)  # does not wait
            async with Fence(engine, 9).transaction() as new_conn:
                await new_conn.execute(MARK, {"payload": '{"token": 9}'})
            await conn.execute(MARK, {"payload": '{"token": 5}'})  # stale, and it lands
        async with engine.connect() as conn:
            assert [r.token for r in (await conn.execute(MARKS)).all()] == ["9", "5"]
    finally:
        await raiser.dispose()
