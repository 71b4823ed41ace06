"""Failing over attempts lost with their worker, while leading.

An attempt is lost when its worker's etcd lease ends (the worker crashed or was
cut off), when no heartbeat arrived for ``threshold`` seconds (a hung worker,
or a registry that died after claiming), or when the registry marked it lost (a
worker handed it back, or reconnected without it). The sweeper then queues it
again with a new attempt id, fenced like every scheduler write. The worker that
had it, if alive, gets its late reports rejected as stale.

The sweeper sleeps until the oldest heartbeat can be overdue, or until woken by
a lease ending or a ``schedd_lost`` notification; it does not scan on a fixed tick.
A slow but alive task keeps heartbeating and is never declared lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from sqlalchemy.ext.asyncio import AsyncEngine

from schedd_core.states import TaskState
from schedd_scheduler.pending import PendingRuns
from schedd_store import scheduling
from schedd_store.fence import Fence

log = logging.getLogger(__name__)


class LostAttemptSweeper:
    def __init__(
        self, engine: AsyncEngine, fence: Fence, pending: PendingRuns, *, threshold: float, max_lost: int
    ) -> None:
        self._engine = engine
        self._fence = fence
        self._pending = pending
        self._threshold = threshold
        self._max_lost = max_lost
        self._wake = asyncio.Event()
        self._dead_workers: set[str] = set()
        self.failed_over = 0

    def worker_gone(self, worker_id: str) -> None:
        self._dead_workers.add(worker_id)
        self._wake.set()

    def wake(self, _payload: str = "") -> None:
        self._wake.set()

    async def run(self) -> None:
        while True:
            async with self._engine.connect() as conn:
                due = await scheduling.seconds_until_heartbeat_due(conn, self._threshold)
            delay = self._threshold if due is None else min(max(due, 0.0) + 0.01, self._threshold)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), delay)
            self._wake.clear()
            await self.sweep()

    async def sweep(self) -> int:
        dead, self._dead_workers = self._dead_workers, set()
        reason = f"worker lease ended ({', '.join(sorted(dead))})" if dead else "no heartbeat"
        async with self._fence.transaction() as conn:
            moved = await scheduling.fail_over_lost_attempts(
                conn,
                self._fence.token,
                threshold=self._threshold,
                dead_workers=sorted(dead),
                max_lost=self._max_lost,
                reason=reason,
            )
        if moved:
            self.failed_over += len(moved)
            log.warning("failed over %d lost attempts (%s)", len(moved), reason)
            self._pending.add({m.run_pk for m in moved if m.state == TaskState.FAILED})
        return len(moved)
