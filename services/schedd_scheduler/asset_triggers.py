"""The leader's asset trigger: it makes the runs of DAGs scheduled on assets when events meet them.

Woken by ``schedd_assets`` (an event was queued for a DAG; a hint), by a DAG being registered or
unpaused, and at the start of a term; with nothing to do it looks again after ``idle_recheck``
seconds. Each step is one fenced transaction over at most ``dags_per_step`` DAGs with queued
events, locked: for each DAG whose ``asset_schedule`` the assets of its queued events meet
(:func:`schedd_core.assets.condition_met`), one run of type ``asset_triggered`` is made that
consumes every queued event of the DAG's scheduling assets, and those events leave the queue, in
the same transaction. Events of an asset the DAG's current version is no longer scheduled on leave
the queue unconsumed. A DAG whose condition is not met keeps its events queued.

Guaranteed: each event is consumed by each DAG at most once (the primary key of
``asset_event_consumptions``) and, while the DAG stays scheduled on its asset and is unpaused, at
least once; a term that ends mid-step commits nothing. Not guaranteed: one run per event (events
that arrive together are consumed by one run, as in Airflow).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable, Sequence

from schedd_core.assets import condition_met, condition_uris
from schedd_core.backoff import Backoff
from schedd_core.clock import Clock, SystemClock
from schedd_core.errors import FencedOut, LeaseExpired
from schedd_faults import FaultPoints
from schedd_store import asset_triggers as store
from schedd_store.asset_triggers import AssetRun, QueuedDag, QueuedEvent
from schedd_store.engine import is_transient
from schedd_store.fence import Fence
from schedd_store.versions import UnreadableVersion, VersionCache

log = logging.getLogger(__name__)


class AssetTrigger:
    def __init__(
        self,
        fence: Fence,
        versions: VersionCache,
        *,
        clock: Clock | None = None,
        faults: FaultPoints | None = None,
        dags_per_step: int = 200,
        idle_recheck: float = 60.0,
    ) -> None:
        self._fence = fence
        self._versions = versions
        self._clock = clock or SystemClock()
        self._faults = faults or FaultPoints()
        self._dags_per_step = dags_per_step
        self._idle_recheck = idle_recheck
        self._poke = asyncio.Event()
        #: Runs made by this trigger (for metrics and tests).
        self.runs_made = 0

    def wake(self, _dag_ids: Iterable[str] = ()) -> None:
        """Look at the queued events now."""
        self._poke.set()

    async def run(self) -> None:
        """Make asset-triggered runs until cancelled; the database being unreachable is retried."""
        backoff = Backoff(0.1, 5.0)
        while True:
            self._poke.clear()
            delay = self._idle_recheck
            try:
                if await self.step():
                    continue
                backoff.reset()
            except (FencedOut, LeaseExpired):
                raise
            except Exception as exc:
                if not is_transient(exc):
                    raise
                log.warning("asset step failed (%s); again in %.1fs", exc, backoff.delay)
                delay = backoff.take()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(delay):
                    await self._poke.wait()

    async def step(self, only: Sequence[str] | None = None) -> bool:
        """One fenced step; True when more DAGs may be waiting (the step was full and made runs)."""
        now = self._clock.now()
        async with self._fence.transaction() as conn:
            dags = await store.lock_queued_dags(conn, only=only, limit=self._dags_per_step)
            await self._versions.load(conn, {d.version_id for d in dags})
            events = await store.queued_events(conn, [d.dag_id for d in dags])
            runs, stale = self.plan(dags, events)
            made = await store.make_runs(conn, runs, now=now)
            await store.consume(conn, runs, made)
            await store.dequeue(conn, stale)
            self._faults.hit("assets.runs_made")  # a test stops a leader between making and committing
        self.runs_made += len(made)
        return len(dags) >= self._dags_per_step and bool(made)

    def plan(
        self, dags: Sequence[QueuedDag], events: Sequence[QueuedEvent]
    ) -> tuple[list[AssetRun], list[tuple[str, int]]]:
        """The runs to make, and the (dag, event) pairs to drop (their asset no longer schedules the DAG)."""
        runs: list[AssetRun] = []
        stale: list[tuple[str, int]] = []
        for dag in dags:
            mine = [e for e in events if e.dag_id == dag.dag_id]
            try:
                spec = self._versions.spec(dag.version_id)
            except UnreadableVersion as exc:
                log.error("dag %s: its version cannot be read (%s); its asset events wait", dag.dag_id, exc)
                continue
            if not spec.HasField("asset_schedule"):
                stale += [(e.dag_id, e.event_id) for e in mine]
                continue
            uris = set(condition_uris(spec.asset_schedule))
            stale += [(e.dag_id, e.event_id) for e in mine if e.uri not in uris]
            current = [e for e in mine if e.uri in uris]
            if current and condition_met(spec.asset_schedule, {e.uri for e in current}):
                runs.append(AssetRun(dag.dag_id, dag.version_id, tuple(e.event_id for e in current)))
        return runs, stale
