"""Time-driven wake-ups of the leader: retries and sensor pokes that come due, runs that reach their
timeout.

The timer reads the deadlines (from PostgreSQL, with its ``now()``: the retries and pokes due, the
next one to come, the ages of the running runs), wakes the runs whose deadlines are due by adding
them to the pending set, and sleeps until the next deadline, or until poked: the scheduling loop
pokes it after a pass that set a retry time, started a run with a timeout, or read a task instance
waiting for a moment (a sensor between pokes, a retry with its time set). Which runs to wake and
how long to sleep is :class:`schedd_core.deadlines.WakePlanner`'s: a deadline still due at a later
look is handed over again after a bounded, growing delay, and an overdue one never hides the next.
It never scans on a fixed tick; with nothing to wait for, it looks again after ``idle_recheck``
seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from schedd_core.backoff import Backoff
from schedd_core.deadlines import Deadline, Wake, WakePlanner, task_deadline, timeout_deadline
from schedd_scheduler.pending import PendingRuns
from schedd_store import statements as sql
from schedd_store.database import Connection, Engine
from schedd_store.engine import is_transient
from schedd_store.versions import UnreadableVersion, VersionCache

log = logging.getLogger(__name__)


class DeadlineTimer:
    def __init__(
        self, engine: Engine, pending: PendingRuns, versions: VersionCache, *, idle_recheck: float = 30.0
    ) -> None:
        self._engine = engine
        self._pending = pending
        self._versions = versions
        self._planner = WakePlanner(idle_recheck=idle_recheck)
        self._poke = asyncio.Event()

    def poke(self) -> None:
        self._poke.set()

    async def run(self) -> None:
        """Fire deadlines until cancelled; a database that cannot be reached is retried."""
        backoff = Backoff(0.1, 5.0)
        while True:
            try:
                delay = await self._fire_and_measure()
                backoff.reset()
            except Exception as exc:
                if not is_transient(exc):
                    raise
                log.warning("deadline timer failed (%s); again in %.1fs", exc, backoff.delay)
                delay = backoff.take()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._poke.wait(), delay)
            self._poke.clear()

    async def _fire_and_measure(self) -> float:
        """Wake the runs whose deadlines are due; return seconds until the next look."""
        async with self._engine.connect() as conn:
            wake = await self._look(conn)
        if wake.runs:
            self._pending.add(wake.runs)
        return wake.delay

    async def _look(self, conn: Connection) -> Wake:
        """Read the deadlines (one transaction: one ``now()`` for all) and plan the wake-up."""
        head = (await conn.execute(sql.NEXT_RETRY)).one()
        now = head.now
        deadlines: list[Deadline] = []
        if head.at is not None:
            deadlines.append(task_deadline(head.id, head.run_pk, head.at, now, paused=head.paused))
        for r in (await conn.execute(sql.DUE_RETRY_RUNS)).all():
            deadlines.append(task_deadline(r.id, r.run_pk, r.at, now, paused=r.paused))
        running = (await conn.execute(sql.RUNNING_RUN_AGES)).all()
        await self._versions.load(conn, {r.dag_version_id for r in running})
        for run in running:
            try:
                timeout = self._versions.graph(run.dag_version_id).run_timeout
            except UnreadableVersion:
                continue  # the scheduling pass isolates (and fails) that run
            if timeout:
                deadlines.append(timeout_deadline(int(run.id), float(run.age), timeout, paused=run.paused))
        return self._planner.plan(now, deadlines)
