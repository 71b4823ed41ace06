"""Failing over attempts lost with their worker, while leading.

An attempt is lost when its worker said so (it handed the attempt back, or reconnected
without it), or when its worker has not been heard for longer than its registry allowed
it to keep running unheard: its *silence limit* while its etcd liveness key exists, its
shorter *fence window* once the key is gone (the worker crashed, or is cut off from
etcd). Both windows are stored with the worker's row by the registry that granted them,
and the worker stops its attempts before they end (``schedd_worker.permit``), so a
failed-over attempt is never still running when its retry starts. The sweeper then
queues it again with a new attempt id, fenced like every scheduler write; the worker
that had it, if alive, gets its late reports rejected as stale.

Which workers hold a key is read from etcd (a linearizable read) right before every
sweep, never from a cached view, so a worker is never judged by the shorter window while
its lease is alive. When etcd cannot be read, every worker counts as leased (the longer
window). The sweeper sleeps until the first attempt can be lost, or until woken by a key
being deleted or by a ``schedd_lost`` notification; it does not scan on a fixed tick.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from schedd_coord.client import EtcdClient
from schedd_coord.errors import CoordinationError
from schedd_coord.members import leased_workers
from schedd_core.backoff import Backoff
from schedd_core.states import TaskState
from schedd_scheduler.pending import PendingRuns
from schedd_store import lost
from schedd_store.database import Engine
from schedd_store.engine import is_transient
from schedd_store.fence import Fence

log = logging.getLogger(__name__)


class LostAttemptSweeper:
    def __init__(
        self,
        engine: Engine,
        etcd: EtcdClient,
        fence: Fence,
        pending: PendingRuns,
        *,
        fallback_limit: float,
        max_lost: int,
    ) -> None:
        self._engine = engine
        self._etcd = etcd
        self._fence = fence
        self._pending = pending
        self._fallback_limit = fallback_limit
        self._max_lost = max_lost
        self._wake = asyncio.Event()
        self.failed_over = 0

    def wake(self, _payload: str = "") -> None:
        self._wake.set()

    async def run(self) -> None:
        """Sweep until cancelled; a database that cannot be reached is retried (the term goes on)."""
        backoff = Backoff(0.1, 5.0)
        while True:
            try:
                leased = await self._leased()
                async with self._engine.connect() as conn:
                    due = await lost.seconds_until_attempt_lost(
                        conn, leased_workers=leased, fallback_limit=self._fallback_limit
                    )
                limit = self._fallback_limit
                delay = limit if due is None else min(max(due, 0.0) + 0.01, limit)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), delay)
                self._wake.clear()
                await self.sweep()
                backoff.reset()
            except Exception as exc:
                if not is_transient(exc):
                    raise
                log.warning("lost-attempt sweep failed (%s); again in %.1fs", exc, backoff.delay)
                await asyncio.sleep(backoff.take())

    async def sweep(self) -> int:
        leased = await self._leased()
        async with self._fence.transaction() as conn:
            moved = await lost.fail_over_lost_attempts(
                conn,
                self._fence.token,
                leased_workers=leased,
                fallback_limit=self._fallback_limit,
                max_lost=self._max_lost,
            )
        if moved:
            self.failed_over += len(moved)
            reasons = sorted({m.reason for m in moved})
            log.warning("failed over %d lost attempts (%s)", len(moved), "; ".join(reasons[:5]))
            self._pending.add({m.run_pk for m in moved if m.state == TaskState.FAILED})
        return len(moved)

    async def _leased(self) -> list[str] | None:
        try:
            return await leased_workers(self._etcd)
        except CoordinationError as exc:
            log.warning("cannot read the workers' liveness keys (%s); every worker counts as leased", exc)
            return None
