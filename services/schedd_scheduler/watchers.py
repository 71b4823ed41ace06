"""Asset watchers: outside changes turned into asset events by the leader, each exactly once.

A watcher runs while its replica leads and writes only through the term's fence, like every
scheduling write. Each message (a Redis stream entry, a row of a watched table) becomes one event
whose idempotency key names the watcher and the message (``redis:<watcher>:<entry id>``,
``pg:<watcher>:<row id>``), recorded in one fenced transaction:

- **Redis streams**: the watcher reads with a consumer group under a consumer named after the
  watcher, records the entries' events, commits, and only then acknowledges them (XACK). Entries
  read but not acknowledged (the leader crashed, or was deposed, before or after its commit) stay
  pending for that consumer; the next leader reads them first, and an entry whose event was
  committed records nothing new (its key) and is acknowledged. So a crash between commit and
  acknowledgement makes no second event.
- **PostgreSQL tables**: the watcher reads rows with ids above its cursor, records their events and
  moves the cursor in the same fenced transaction (the cursor row is locked meanwhile). A NOTIFY on
  its channel wakes it; without one it reads every ``poll_seconds``. Not guaranteed: a row whose id
  commits after a larger id was delivered (concurrent writers of the watched table) is skipped;
  give the table one writer, or ids that commit in order.

An entry whose extra (its fields, or its row, as JSON) is over the size limit is delivered with an
empty extra. A broker or database that cannot be reached is retried with a backoff; a fenced-out
write ends the term like any other.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Coroutine, Sequence
from typing import Any

import asyncpg

from schedd_core.backoff import Backoff
from schedd_core.database_url import asyncpg_dsn
from schedd_faults import FaultPoints
from schedd_scheduler.watch_batches import BATCH, bounded_extra
from schedd_scheduler.watcher_config import WatcherSpec
from schedd_store import assets
from schedd_store.assets import NewEvent
from schedd_store.fence import Fence

log = logging.getLogger(__name__)


def asset_watchers(
    specs: Sequence[WatcherSpec], fence: Fence, faults: FaultPoints | None = None
) -> list[Coroutine[Any, Any, None]]:
    """The run() of a watcher per spec, for the term of ``fence``."""
    runs: list[Coroutine[Any, Any, None]] = []
    for spec in specs:
        if spec.kind == "redis_stream":
            # Imported only when configured: redis-py loads the OpenTelemetry SDK, which an
            # untraced scheduler never loads otherwise (tests/unit/test_tracing_setup.py).
            from schedd_scheduler.redis_watcher import RedisStreamWatcher

            runs.append(RedisStreamWatcher(spec, fence, faults).run())
        else:
            runs.append(PostgresTableWatcher(spec, fence, faults).run())
    return runs


class PostgresTableWatcher:
    def __init__(self, spec: WatcherSpec, fence: Fence, faults: FaultPoints | None = None) -> None:
        self.spec = spec
        self._fence = fence
        self._faults = faults or FaultPoints()
        self._poke = asyncio.Event()
        table = ".".join(f'"{part}"' for part in spec.table.split("."))
        self._query = f"SELECT id, to_jsonb(t) AS row FROM {table} t WHERE id > $1 ORDER BY id LIMIT {BATCH}"

    async def run(self) -> None:
        backoff = Backoff(0.1, 5.0)
        while True:
            try:
                watched = await asyncpg.connect(asyncpg_dsn(self.spec.url))
            except (OSError, asyncpg.PostgresError) as exc:
                log.warning("watcher %s: %s; again in %.1fs", self.spec.name, exc, backoff.delay)
                await asyncio.sleep(backoff.take())
                continue
            try:
                if self.spec.channel:
                    await watched.add_listener(self.spec.channel, lambda *_: self._poke.set())
                backoff.reset()
                while True:
                    self._poke.clear()
                    if await self.step(watched) >= BATCH:
                        continue
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._poke.wait(), self.spec.poll_seconds)
            except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
                log.warning("watcher %s: %s; again in %.1fs", self.spec.name, exc, backoff.delay)
            finally:
                with contextlib.suppress(Exception):
                    await watched.close()
            await asyncio.sleep(backoff.take())

    async def step(self, watched: Any) -> int:
        """Deliver the rows after the cursor (at most BATCH) and move it, in one fenced transaction."""
        async with self._fence.transaction() as conn:
            position = await assets.watcher_cursor(conn, self.spec.name)
            rows = await watched.fetch(self._query, position)
            if not rows:
                return 0
            events = [
                NewEvent(
                    self.spec.asset, bounded_extra(json.loads(r["row"])), key=f"pg:{self.spec.name}:{r['id']}"
                )
                for r in rows
            ]
            await assets.record_events(conn, events, source="watcher", watcher=self.spec.name)
            await assets.set_watcher_cursor(conn, self.spec.name, int(rows[-1]["id"]))
        return len(rows)
