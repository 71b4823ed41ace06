"""Time-driven wake-ups of the leader: retries that come due and runs that pass their timeout.

The timer sleeps until the earliest such moment (read from PostgreSQL), or until
poked because a pass scheduled a retry, then adds the affected runs to the
pending set. It never scans on a fixed tick; with nothing to wait for, it looks
again after ``idle_recheck`` seconds (runs that started since, with a timeout).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from sqlalchemy.ext.asyncio import AsyncEngine

from schedd_scheduler.pending import PendingRuns
from schedd_store import statements as sql
from schedd_store.engine import is_transient
from schedd_store.versions import UnreadableVersion, VersionCache

log = logging.getLogger(__name__)


class DeadlineTimer:
    def __init__(
        self, engine: AsyncEngine, pending: PendingRuns, versions: VersionCache, *, idle_recheck: float = 30.0
    ) -> None:
        self._engine = engine
        self._pending = pending
        self._versions = versions
        self._idle_recheck = idle_recheck
        self._poke = asyncio.Event()

    def poke(self) -> None:
        self._poke.set()

    async def run(self) -> None:
        """Fire deadlines until cancelled; a database that cannot be reached is retried."""
        backoff = 0.1
        while True:
            try:
                delay = await self._fire_and_measure()
                backoff = 0.1
            except Exception as exc:
                if not is_transient(exc):
                    raise
                log.warning("deadline timer failed (%s); again in %.1fs", exc, backoff)
                delay, backoff = backoff, min(backoff * 2, 5.0)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._poke.wait(), delay)
            self._poke.clear()

    async def _fire_and_measure(self) -> float:
        """Wake the runs that are due now; return seconds until the next deadline."""
        delays = [self._idle_recheck]
        async with self._engine.connect() as conn:
            due = [int(r[0]) for r in (await conn.execute(sql.DUE_RETRY_RUNS)).all()]
            next_retry = (await conn.execute(sql.NEXT_RETRY)).scalar()
            if next_retry is not None and float(next_retry) > 0:
                delays.append(float(next_retry))
            running = (await conn.execute(sql.RUNNING_RUN_AGES)).all()
            await self._versions.load(conn, {r.dag_version_id for r in running})
        for run in running:
            try:
                timeout = self._versions.graph(run.dag_version_id).run_timeout
            except UnreadableVersion:
                continue  # the scheduling pass isolates (and fails) that run
            if timeout:
                remaining = timeout - float(run.age)
                if remaining <= 0:
                    due.append(int(run.id))
                else:
                    delays.append(remaining)
        if due:
            self._pending.add(set(due))
        return max(min(delays), 0.01) + 0.005
