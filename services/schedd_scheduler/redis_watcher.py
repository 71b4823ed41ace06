"""The Redis stream watcher (``schedd_scheduler.watchers`` says what it guarantees): entries read
with a consumer group, their events committed through the fence, then acknowledged."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import redis.asyncio as aioredis
from redis.exceptions import RedisError, ResponseError

from schedd_core.backoff import Backoff
from schedd_faults import FaultPoints
from schedd_scheduler.watch_batches import BATCH, bounded_extra
from schedd_scheduler.watcher_config import WatcherSpec
from schedd_store import assets
from schedd_store.assets import NewEvent
from schedd_store.fence import Fence

log = logging.getLogger(__name__)


class RedisStreamWatcher:
    def __init__(self, spec: WatcherSpec, fence: Fence, faults: FaultPoints | None = None) -> None:
        self.spec = spec
        self._fence = fence
        self._faults = faults or FaultPoints()

    async def run(self) -> None:
        backoff = Backoff(0.1, 5.0)
        while True:
            client = aioredis.Redis.from_url(self.spec.url)
            try:
                await self.ensure_group(client)
                while await self.read(client, "0"):  # entries read before and never acknowledged
                    pass
                backoff.reset()
                while True:
                    await self.read(client, ">", block_ms=1000)
            except (RedisError, OSError) as exc:
                log.warning("watcher %s: %s; again in %.1fs", self.spec.name, exc, backoff.delay)
            finally:
                await client.aclose()
            await asyncio.sleep(backoff.take())

    async def ensure_group(self, client: aioredis.Redis) -> None:
        try:
            await client.xgroup_create(self.spec.stream, self.spec.group, id="0", mkstream=True)
        except ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise

    async def read(self, client: aioredis.Redis, start: str, *, block_ms: int | None = None) -> int:
        """Read up to BATCH entries (``0``: this consumer's pending ones; ``>``: new ones), deliver
        them in one fenced transaction, then acknowledge them; returns how many."""
        reply: Any = await client.xreadgroup(
            self.spec.group, self.spec.name, {self.spec.stream: start}, count=BATCH, block=block_ms
        )
        entries = [entry for _, batch in reply or [] for entry in batch]
        if not entries:
            return 0
        events = [
            NewEvent(
                self.spec.asset, bounded_extra(_decoded(fields)), key=f"redis:{self.spec.name}:{_text(i)}"
            )
            for i, fields in entries
        ]
        async with self._fence.transaction() as conn:
            await assets.record_events(conn, events, source="watcher", watcher=self.spec.name)
        self._faults.hit("watchers.committed")  # a test crashes here: committed, not acknowledged
        await client.xack(self.spec.stream, self.spec.group, *[i for i, _ in entries])
        return len(entries)


def _text(value: bytes | str) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else value


def _decoded(fields: dict[bytes, bytes] | None) -> dict[str, Any]:
    return {_text(k): _text(v) for k, v in (fields or {}).items()}
