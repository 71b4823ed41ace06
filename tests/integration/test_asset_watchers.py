"""The watchers through the real store and a real Redis: a table row or a stream entry becomes one
event, in a fenced transaction (the table's cursor moves in it); a deposed leader delivers nothing,
and what it read is delivered once by the next leader."""

from __future__ import annotations

import secrets

import asyncpg
import pytest
import redis.asyncio as aioredis

from schedd_core.database_url import asyncpg_dsn
from schedd_core.errors import FencedOut
from schedd_scheduler.redis_watcher import RedisStreamWatcher
from schedd_scheduler.watcher_config import WatcherSpec
from schedd_scheduler.watchers import PostgresTableWatcher
from schedd_store.database import Engine
from schedd_store.fence import Fence, raise_fence
from schedd_store.named_sql import Statement

pytestmark = pytest.mark.integration

ASSET = "postgres://local/changes"
REDIS_URL = "redis://127.0.0.1:6379/0"


async def watcher_keys(engine: Engine) -> list[str]:
    async with engine.connect() as conn:
        rows = (await conn.execute(Statement("SELECT idempotency_key FROM asset_events ORDER BY id"))).all()
    return [r[0] for r in rows]


async def test_each_row_becomes_one_event_and_a_deposed_leader_delivers_nothing(
    engine: Engine, migrated_url: str
) -> None:
    async with engine.begin() as conn:
        await conn.execute(Statement("CREATE TABLE changes (id bigserial PRIMARY KEY, what text NOT NULL)"))
        await conn.execute(Statement("INSERT INTO changes (what) VALUES ('a'), ('b')"))
    spec = WatcherSpec("changes", "postgres_table", ASSET, url=migrated_url, table="changes")
    watched = await asyncpg.connect(asyncpg_dsn(migrated_url))
    try:
        await raise_fence(engine, 1, "old")
        old = PostgresTableWatcher(spec, Fence(engine, 1))
        await raise_fence(engine, 2, "new")
        with pytest.raises(FencedOut):
            await old.step(watched)
        assert await watcher_keys(engine) == []
        new = PostgresTableWatcher(spec, Fence(engine, 2))
        assert await new.step(watched) == 2
        assert await new.step(watched) == 0
        async with engine.begin() as conn:
            await conn.execute(Statement("INSERT INTO changes (what) VALUES ('c')"))
        assert await new.step(watched) == 1
    finally:
        await watched.close()
    assert await watcher_keys(engine) == ["pg:changes:1", "pg:changes:2", "pg:changes:3"]
    async with engine.connect() as conn:
        extra = (await conn.execute(Statement("SELECT extra FROM asset_events ORDER BY id LIMIT 1"))).scalar()
    assert extra == {"id": 1, "what": "a"}


async def test_a_stream_entry_read_by_a_deposed_leader_is_delivered_once_by_the_next(
    engine: Engine,
) -> None:
    stream = f"schedd-it-{secrets.token_hex(6)}"
    spec = WatcherSpec("facts", "redis_stream", "redis://local/facts", url=REDIS_URL, stream=stream)
    client = aioredis.Redis.from_url(REDIS_URL)
    try:
        await raise_fence(engine, 1, "old")
        old = RedisStreamWatcher(spec, Fence(engine, 1))
        await old.ensure_group(client)
        added = await client.xadd(stream, {"fact": "1"})
        entry = added.decode() if isinstance(added, bytes) else added
        await raise_fence(engine, 2, "new")
        with pytest.raises(FencedOut):
            await old.read(client, ">")
        assert (await client.xpending(stream, "schedd"))["pending"] == 1  # read, not acknowledged
        new = RedisStreamWatcher(spec, Fence(engine, 2))
        assert await new.read(client, "0") == 1  # the pending entry first
        assert await new.read(client, "0") == 0
        assert await new.read(client, ">") == 0
        assert (await client.xpending(stream, "schedd"))["pending"] == 0
        assert await new.read(client, "0") == 0
    finally:
        await client.delete(stream)
        await client.aclose()
    assert await watcher_keys(engine) == [f"redis:facts:{entry}"]
