"""The leader's housekeeping: retention every ``interval`` seconds, and the occupancy counters'
compaction every second, while it leads.

Each kind of record is purged batch after batch (``schedd_store.retention``) until a batch comes
back short, yielding between batches so scheduling passes interleave; a failure is logged and
retried at the next round (a fence or lease error ends the term like any leader work).
Compaction needs no fence: folding deltas twice is impossible (``occupancy_compact``).
"""

from __future__ import annotations

import asyncio
import logging

from schedd_core.errors import FencedOut, LeaseExpired
from schedd_store import occupancy
from schedd_store.database import Engine
from schedd_store.engine import is_transient
from schedd_store.fence import Fence
from schedd_store.retention import BATCH, Retention, purge_batch, purges

log = logging.getLogger(__name__)


class Housekeeper:
    def __init__(self, fence: Fence, retention: Retention, *, interval: float = 600.0) -> None:
        self._fence = fence
        self._retention = retention
        self._interval = interval
        self.deleted: dict[str, int] = {}

    async def run(self) -> None:
        while True:
            await self.sweep()
            await asyncio.sleep(self._interval)

    async def sweep(self) -> dict[str, int]:
        """Purge every kind once, to the end; returns what was deleted, by kind."""
        deleted: dict[str, int] = {}
        for name, statement, age in purges(self._retention):
            try:
                while True:
                    count = await purge_batch(self._fence, statement, age)
                    deleted[name] = deleted.get(name, 0) + count
                    if count < (1 if name == "runs" else BATCH):
                        break
                    await asyncio.sleep(0)
            except (FencedOut, LeaseExpired):
                raise
            except Exception as exc:
                log.warning("retention of %s failed, again in %.0fs: %s", name, self._interval, exc)
        for name, count in deleted.items():
            self.deleted[name] = self.deleted.get(name, 0) + count
        if any(deleted.values()):
            log.info("retention deleted %s", ", ".join(f"{n} {c}" for n, c in deleted.items() if c))
        return deleted


class OccupancyCompactor:
    """Folds the occupancy counters' deltas every ``interval`` seconds while there are any, and backs
    off to ``idle_interval`` while there are none (an idle cluster costs one query in ten seconds)."""

    def __init__(self, engine: Engine, *, interval: float = 1.0, idle_interval: float = 10.0) -> None:
        self._engine = engine
        self._interval = interval
        self._idle_interval = idle_interval

    async def run(self) -> None:
        delay = self._interval
        while True:
            try:
                folded = await occupancy.compact(self._engine)
                delay = self._interval if folded else min(delay * 2, self._idle_interval)
            except Exception as exc:
                if not is_transient(exc):
                    raise
                log.warning("compacting the occupancy counters failed (%s); again shortly", exc)
            await asyncio.sleep(delay)
