"""The leader's deadline-alert timer: it records the runs that missed their deadline and sleeps until
the next deadline.

Each look reads the unfinished runs without a recorded miss (with the database's ``now()``), works
out each one's deadline from its DAG version's ``DeadlineAlert``, records the due ones in a fenced
transaction together with their outbox events (``schedd_store.deadline_misses``), and sleeps until
the earliest deadline still to come (:func:`schedd_core.deadline_alerts.plan`), or until poked: the
scheduler pokes it when a run is created (a ``schedd_runs`` notification naming a run). With no
deadline to wait for it looks again after ``idle_recheck`` seconds (a missed notification). A
failure of its own (the database unreachable, or anything else) is logged and retried with backoff;
only a lost fence or lease ends it, with the term.

Fault points (tests): ``deadlines.detected`` after a look found misses and before the fenced
transaction, ``deadlines.recorded`` after it committed. A leader killed at either point leaves the
miss to the next leader, which records it (first point) or finds it recorded (second point): one
record, one outbox event.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

from schedd_core.backoff import Backoff
from schedd_core.deadline_alerts import AlertPlan, RunDeadline, deadline_rule, plan
from schedd_core.errors import FencedOut, LeaseExpired
from schedd_faults import FaultPoints
from schedd_store import deadline_misses
from schedd_store.database import Engine
from schedd_store.engine import is_transient
from schedd_store.fence import Fence
from schedd_store.versions import UnreadableVersion, VersionCache

log = logging.getLogger(__name__)

#: The shortest time from a look to the next one caused by pokes (a burst of new runs makes one look):
#: a run whose deadline falls sooner than this after it was created may be noticed this much later.
MIN_POKE_INTERVAL = 0.5


class DeadlineAlerts:
    def __init__(
        self,
        engine: Engine,
        fence: Fence,
        versions: VersionCache,
        *,
        faults: FaultPoints | None = None,
        idle_recheck: float = 60.0,
    ) -> None:
        self._engine = engine
        self._fence = fence
        self._versions = versions
        self._faults = faults or FaultPoints()
        self._idle_recheck = idle_recheck
        self._poke = asyncio.Event()
        self.recorded = 0

    def poke(self) -> None:
        self._poke.set()

    async def run(self) -> None:
        """Record misses until cancelled; a database that cannot be reached is retried."""
        backoff = Backoff(0.1, 5.0)
        while True:
            started = time.monotonic()
            try:
                delay = await self.look()
                backoff.reset()
            except (FencedOut, LeaseExpired):
                raise
            except Exception as exc:
                # Not the term's end: a database that cannot be reached, or a fault of this timer's
                # own, is retried with backoff while the scheduling loop goes on.
                level = logging.WARNING if is_transient(exc) else logging.ERROR
                log.log(level, "deadline alerts failed (%s); again in %.1fs", exc, backoff.delay)
                delay = backoff.take()
            await self._wait(started, time.monotonic() + delay)

    async def _wait(self, last_look: float, next_look: float) -> None:
        """Until ``next_look`` (monotonic), or a poke; a poke makes the next look no sooner than
        ``MIN_POKE_INTERVAL`` after the last one (a burst of new runs costs one look), and never later
        than ``next_look``, so a known deadline is never delayed by pokes."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(max(0.0, next_look - time.monotonic())):
                await self._poke.wait()
            await asyncio.sleep(max(0.0, min(last_look + MIN_POKE_INTERVAL, next_look) - time.monotonic()))
        self._poke.clear()

    async def look(self) -> float:
        """Record the misses due now; return seconds until the next look."""
        decided, notify = await self._plan()
        if decided.missed:
            self._faults.hit("deadlines.detected")  # a test kills the leader before it records
            async with self._fence.transaction() as conn:
                recorded = await deadline_misses.record(conn, decided.missed, notify)
            self._faults.hit("deadlines.recorded")  # ... or after it committed
            self.recorded += len(recorded)
            for run_pk in recorded:
                log.info("run %d missed its deadline", run_pk)
        return decided.delay

    async def _plan(self) -> tuple[AlertPlan, set[int]]:
        async with self._engine.connect() as conn:
            now, runs = await deadline_misses.unfinished_runs(conn)
            await self._versions.load(conn, {r.dag_version_id for r in runs})
        deadlines: list[RunDeadline] = []
        notify: set[int] = set()
        for run in runs:
            try:
                spec = self._versions.spec(run.dag_version_id)
            except UnreadableVersion:
                continue  # the scheduling pass isolates (and fails) that run
            rule = deadline_rule(spec)
            if rule is None:
                continue
            deadlines.append(RunDeadline(run.run_pk, rule.deadline(run.logical_date, run.queued_at)))
            if spec.deadline.callbacks:
                notify.add(run.run_pk)
        return plan(now, deadlines, idle_recheck=self._idle_recheck), notify
