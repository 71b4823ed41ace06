"""The leader's scheduling loop: evaluate the runs that changed, in fenced batches.

Work grows with what changed: a finished task notifies its run, and only that
run is evaluated. Each pass is one fenced transaction; if the fence has moved
on (a newer term), :class:`FencedOut` ends the loop and nothing of the pass lands.
"""

from __future__ import annotations

import asyncio
import logging
import time

from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine

from schedd_core.errors import IllegalTransition
from schedd_core.planner import plan_run
from schedd_scheduler.metrics import SchedulerMetrics
from schedd_scheduler.pending import PendingRuns
from schedd_store import scheduling
from schedd_store.fence import Fence
from schedd_store.versions import VersionCache

log = logging.getLogger(__name__)


class SchedulingLoop:
    def __init__(
        self,
        engine: AsyncEngine,
        fence: Fence,
        pending: PendingRuns,
        versions: VersionCache,
        *,
        batch_size: int,
        metrics: SchedulerMetrics | None = None,
    ) -> None:
        self._engine = engine
        self._fence = fence
        self._pending = pending
        self._versions = versions
        self._batch_size = batch_size
        self._metrics = metrics
        self._stopping = asyncio.Event()
        #: Set once the first pass of the term (a full scan) has committed.
        self.first_pass_done = asyncio.Event()
        self._retry_delay = 0.05
        self.passes = 0

    def stop(self) -> None:
        """Finish the current pass, then return from :meth:`run`."""
        self._stopping.set()

    async def run(self) -> None:
        self._pending.request_full_scan()
        while not self._stopping.is_set():
            waiter = asyncio.ensure_future(self._pending.wait())
            stopper = asyncio.ensure_future(self._stopping.wait())
            await asyncio.wait({waiter, stopper}, return_when=asyncio.FIRST_COMPLETED)
            waiter.cancel()
            stopper.cancel()
            if self._stopping.is_set():
                return
            full, ids = self._pending.take(self._batch_size)
            if full:
                async with self._engine.connect() as conn:
                    self._pending.add(await scheduling.unfinished_run_pks(conn))
                _, more = self._pending.take(self._batch_size)
                ids += more
            await self.evaluate(ids)
            self.first_pass_done.set()

    async def evaluate(self, run_pks: list[int]) -> int:
        """One fenced pass over ``run_pks``. Returns the number of task instances queued.

        Raises FencedOut (and writes nothing) when a newer term has raised the fence. An empty
        ``run_pks`` still checks the fence, so a term's first pass proves it may write.
        """
        started = time.perf_counter()
        try:
            async with self._fence.transaction() as conn:
                runs = await scheduling.load_runs(conn, run_pks) if run_pks else []
                await self._versions.load(conn, {r.version_id for r in runs})
                plans = []
                for run in runs:
                    graph = self._versions.graph(run.version_id)
                    plan = plan_run(graph, run.tasks)
                    if not plan.empty or run.state == "queued":
                        plans.append((run, graph, plan))
                queued = await scheduling.apply_plans(conn, self._fence.token, plans)
        except IllegalTransition as exc:
            # Another writer (a user's clear or mark) changed a task between our read and write;
            # evaluate those runs again from fresh state.
            log.info("pass rolled back, re-evaluating: %s", exc)
            self._pending.add(run_pks)
            return 0
        except (DBAPIError, OSError) as exc:
            if isinstance(exc, DBAPIError) and not exc.connection_invalidated:
                raise
            # A broken connection (PostgreSQL restarted, network blip): nothing was committed. The
            # pool replaces the connection; try the same runs again after a short pause.
            log.warning("pass failed on a broken connection, retrying: %s", exc)
            self._pending.add(run_pks)
            await asyncio.sleep(self._retry_delay)
            self._retry_delay = min(self._retry_delay * 2, 2.0)
            return 0
        self._retry_delay = 0.05
        self.passes += 1
        if self._metrics is not None:
            self._metrics.passes.inc()
            self._metrics.tasks_queued.inc(queued)
            self._metrics.pass_seconds.observe(time.perf_counter() - started)
        return queued
