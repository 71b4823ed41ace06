"""The leader's housekeeping: retention, every ``interval`` seconds while it leads.

Each kind of record is purged batch after batch (``schedd_store.retention``) until a batch comes
back short, yielding between batches so scheduling passes interleave; a failure is logged and
retried at the next round (a fence or lease error ends the term like any leader work).
"""

from __future__ import annotations

import asyncio
import logging

from schedd_core.errors import FencedOut, LeaseExpired
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
