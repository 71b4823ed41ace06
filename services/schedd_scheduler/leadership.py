"""One scheduler replica's life: campaign, raise the fence, lead until the term ends, repeat.

A term ends when the lease can no longer be trusted (fail-stop: the leader work
is cancelled at once, and a pass that is computing when it happens cannot commit,
see ``schedd_store.fence``), when a write is fenced out (a newer term exists), or on
SIGTERM (the current pass finishes, then the leader resigns so a standby takes
over at once). Between terms the replica is a warm standby: its database pool,
its PostgreSQL listener and its cache of DAG versions stay open.

The lease is kept alive on a thread of its own (``schedd_coord.lease``), so a
pass that keeps the event loop busy cannot starve it; raising the fence waits for
the previous term's transactions in bounded steps and gives up with the lease.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Coroutine
from datetime import UTC, datetime
from typing import Any

from schedd_coord.client import EtcdClient
from schedd_coord.election import Election
from schedd_coord.errors import CoordinationError
from schedd_coord.lease import KeptLease
from schedd_coord.members import departed_workers
from schedd_core.backoff import Backoff
from schedd_core.errors import FencedOut, LeaseExpired
from schedd_faults import FaultPoints
from schedd_scheduler.asset_triggers import AssetTrigger
from schedd_scheduler.backfills import BackfillDriver
from schedd_scheduler.config import SchedulerConfig
from schedd_scheduler.deadline_alerts import DeadlineAlerts
from schedd_scheduler.housekeeping import Housekeeper, OccupancyCompactor
from schedd_scheduler.loop import SchedulingLoop
from schedd_scheduler.lost_attempts import LostAttemptSweeper
from schedd_scheduler.metrics import SchedulerMetrics
from schedd_scheduler.pending import PendingRuns
from schedd_scheduler.schedules import ScheduleTimer
from schedd_scheduler.timers import DeadlineTimer
from schedd_scheduler.watchers import asset_watchers
from schedd_store.channels import decode_ids
from schedd_store.database import Engine
from schedd_store.fence import Fence, raise_fence
from schedd_store.planner_statistics import StatisticsKeeper
from schedd_store.versions import VersionCache

log = logging.getLogger(__name__)

#: Seconds a leader helper has to end after its term's cancellation before it is cancelled again.
CANCEL_AGAIN_AFTER = 0.1


class Replica:
    def __init__(
        self,
        config: SchedulerConfig,
        engine: Engine,
        etcd: EtcdClient,
        pending: PendingRuns,
        metrics: SchedulerMetrics,
        faults: FaultPoints | None = None,
    ) -> None:
        self._config = config
        self._faults = faults or FaultPoints()
        self._engine = engine
        self._etcd = etcd
        self._pending = pending
        self._metrics = metrics
        self._versions = VersionCache()
        self._election = Election(etcd, identity=config.identity, address=config.metrics_listen)
        self._started = datetime.now(UTC).isoformat()
        self.token = 0
        self._sweeper: LostAttemptSweeper | None = None
        self._schedules: ScheduleTimer | None = None
        self._assets: AssetTrigger | None = None
        self._backfills: BackfillDriver | None = None
        self._alerts: DeadlineAlerts | None = None

    async def run(self, stop: asyncio.Event) -> None:
        """Campaign and lead, term after term, until ``stop`` is set. etcd or PostgreSQL trouble
        is retried with backoff; it never ends the replica."""
        backoff = Backoff(0.1, 5.0)
        while not stop.is_set():
            try:
                await self._one_term(stop)
                backoff.reset()
                continue
            except CoordinationError as exc:
                log.warning("etcd trouble: %s; campaigning again in %.1fs", exc, backoff.delay)
            except (OSError, TimeoutError) as exc:
                log.warning("database trouble: %s; campaigning again in %.1fs", exc, backoff.delay)
            except Exception as exc:
                log.exception("term failed: %s; campaigning again in %.1fs", exc, backoff.delay)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), backoff.take())

    async def _one_term(self, stop: asyncio.Event) -> None:
        lease = KeptLease(self._config.etcd_endpoints, self._config.lease, auth=self._config.etcd_auth)
        await lease.start()
        try:
            await self._election.announce(lease.lease_id, since=self._started)
            campaign = asyncio.create_task(self._election.campaign(lease.lease_id))
            outcome = await _first(campaign, lease.lost, stop)
            if outcome is not campaign:
                campaign.cancel()
                with contextlib.suppress(asyncio.CancelledError, CoordinationError):
                    await campaign
                return
            token = campaign.result()
            if not lease.valid:
                return
            raising = asyncio.create_task(
                raise_fence(self._engine, token, self._config.identity, lease=lease)
            )
            if await _first(raising, lease.lost, stop) is not raising:
                raising.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await raising
                with contextlib.suppress(CoordinationError):
                    await self._election.resign(token)
                return
            try:
                raising.result()
            except (FencedOut, LeaseExpired) as exc:
                log.warning("cannot raise the fence: %s", exc)
                self._metrics.fence_rejections.inc()
                with contextlib.suppress(CoordinationError):
                    await self._election.resign(token)
                return
            await self._lead(token, lease, stop)
        finally:
            self._metrics.is_leader.set(0)
            await lease.stop(revoke=True)

    async def _lead(self, token: int, lease: KeptLease, stop: asyncio.Event) -> None:
        self.token = token
        self._metrics.is_leader.set(1)
        self._metrics.elections.inc()
        log.info("leading with token %d", token)
        loop, work = self._start_term(token, lease)
        timing = asyncio.create_task(self._record_failover(loop))
        try:
            outcome = await _first(work, lease.lost, stop)
        finally:
            timing.cancel()
            self._sweeper = self._schedules = self._backfills = self._assets = self._alerts = None
        await self._end_term(token, outcome, loop, work, lease, stop)

    def _start_term(self, token: int, lease: KeptLease) -> tuple[SchedulingLoop, asyncio.Task[None]]:
        """Build the term's fence and its workers (the scheduling loop, the lost-attempt sweeper, the
        timers, the housekeeper) and start them as one task."""
        fence = Fence(
            self._engine,
            token,
            lease=lease,
            on_rejected=lambda _e: self._metrics.fence_rejections.inc(),
            faults=self._faults,
        )
        loop = SchedulingLoop(
            self._engine,
            fence,
            self._pending,
            self._versions,
            batch_size=self._config.batch_size,
            pass_budget=self._config.pass_budget,
            max_map_length=self._config.max_map_length,
            metrics=self._metrics,
            faults=self._faults,
        )
        self._sweeper = LostAttemptSweeper(
            self._engine,
            self._etcd,
            fence,
            self._pending,
            fallback_limit=self._config.zombie_threshold,
            max_lost=self._config.max_lost_attempts,
        )
        timer = DeadlineTimer(self._engine, self._pending, self._versions)
        loop.on_deadlines_changed = timer.poke
        schedules = self._schedules = ScheduleTimer(
            self._engine, fence, self._versions, faults=self._faults, metrics=self._metrics
        )
        backfills = self._backfills = BackfillDriver(
            self._engine, fence, self._versions, faults=self._faults, metrics=self._metrics
        )

        assets = self._assets = AssetTrigger(fence, self._versions, faults=self._faults)

        def runs_finished(dag_ids: set[str], backfill_ids: set[int]) -> None:
            schedules.wake(dag_ids)
            backfills.wake(backfill_ids)

        loop.on_runs_finished = runs_finished
        alerts = self._alerts = DeadlineAlerts(self._engine, fence, self._versions, faults=self._faults)
        housekeeper = Housekeeper(fence, self._config.retention, interval=self._config.housekeeping_interval)
        statistics = StatisticsKeeper(self._engine)
        loop.on_created = statistics.created
        work = asyncio.create_task(
            self._leader_work(
                loop,
                self._sweeper,
                [
                    timer.run(),
                    schedules.run(),
                    backfills.run(),
                    assets.run(),
                    *asset_watchers(self._config.asset_watchers, fence, self._faults),
                    alerts.run(),
                    housekeeper.run(),
                    OccupancyCompactor(self._engine).run(),
                    statistics.run(),
                ],
            ),
            name="leader-work",
        )
        return loop, work

    async def _end_term(
        self,
        token: int,
        outcome: object,
        loop: SchedulingLoop,
        work: asyncio.Task[None],
        lease: KeptLease,
        stop: asyncio.Event,
    ) -> None:
        """End the term as ``outcome`` says: at once when the lease is lost (fail-stop), after the
        current pass (bounded) when asked to stop, else after the work ended (fenced out, lease
        expired); resign in etcd except after a lost lease."""
        if outcome is lease.lost:
            log.warning("term %d: lease no longer trusted; stopping at once (fail-stop)", token)
            work.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await work
            return
        if outcome is stop:
            loop.stop()
            try:
                await asyncio.wait_for(work, self._config.stop_grace)
            except TimeoutError:
                log.warning("the current pass did not finish in %.1fs", self._config.stop_grace)
            except Exception as exc:
                log.warning("the last pass failed: %s", exc)
            with contextlib.suppress(CoordinationError):
                await self._election.resign(token)
            log.info("term %d: resigned", token)
            return
        try:
            work.result()
        except FencedOut as exc:
            log.warning("term %d: fenced out (%s); stepping down", token, exc)
        except LeaseExpired as exc:
            log.warning("term %d: %s (fail-stop)", token, exc)
        with contextlib.suppress(CoordinationError):
            await self._election.resign(token)

    async def _leader_work(
        self, loop: SchedulingLoop, sweeper: LostAttemptSweeper, others: list[Coroutine[Any, Any, None]]
    ) -> None:
        """Run the scheduling loop with the lost-attempt sweeper, the worker watch and ``others`` (the
        deadline timer, the schedule timer, the backfill driver, housekeeping, the counters' compaction,
        the planner's statistics) beside it. The helpers start once the term's first pass has
        committed (or the loop ended), so that pass has the event loop and the connection pool to
        itself. Returns when the loop stops; the first error of any ends the term."""
        main = asyncio.create_task(loop.run(), name="scheduling-loop")
        first = asyncio.ensure_future(loop.first_pass_done.wait())
        helpers: list[asyncio.Task[Any]] = []
        try:
            await asyncio.wait({main, first}, return_when=asyncio.FIRST_COMPLETED)
            if not main.done():
                helpers = [
                    asyncio.create_task(sweeper.run(), name="lost-attempts"),
                    asyncio.create_task(self._watch_workers(sweeper), name="worker-watch"),
                    *(asyncio.create_task(work) for work in others),
                ]
            done, _ = await asyncio.wait({main, *helpers}, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                task.result()  # raises the error that ended it
        finally:
            first.cancel()
            if not helpers:
                for work in others:
                    work.close()  # never started
            await cancel_until_done([main, *helpers])

    async def _watch_workers(self, sweeper: LostAttemptSweeper) -> None:
        backoff = Backoff(0.1, 5.0)
        while True:
            try:
                async for gone in departed_workers(self._etcd):
                    log.info("workers %s lost their liveness keys", ", ".join(gone))
                    sweeper.wake()
                    backoff.reset()
            except CoordinationError as exc:
                log.warning("worker watch failed: %s; again in %.1fs", exc, backoff.delay)
            await asyncio.sleep(backoff.take())

    def on_lost(self, _payload: str = "") -> None:
        """A registry marked attempts lost: fail them over now (when leading)."""
        if self._sweeper is not None:
            self._sweeper.wake()

    def on_runs_notified(self, payload: str) -> None:
        """A ``schedd_runs`` notification: one naming a whole run (a new run) pokes the deadline-alert
        timer (when leading), which may have a nearer deadline to wait for."""
        if self._alerts is not None and any(item and "/" not in item for item in payload.split(",")):
            self._alerts.poke()

    def on_dag_changed(self, dag_id: str) -> None:
        """A DAG was registered, unpaused or its run cancelled: look at its schedule now (when leading)."""
        if self._schedules is not None:
            self._schedules.wake([dag_id] if dag_id else [])
        self.on_assets_queued()

    def on_assets_queued(self, _payload: str = "") -> None:
        """Asset events were queued for a DAG: make the runs they trigger now (when leading)."""
        if self._assets is not None:
            self._assets.wake()

    def on_backfill_changed(self, payload: str) -> None:
        """A backfill was created or resumed: advance it now (when leading)."""
        try:
            ids = decode_ids(payload)  # any role may notify: a forged id is re-read, a malformed one ignored
        except ValueError:
            log.warning("ignoring a malformed backfill notification: %r", payload[:80])
            return
        if self._backfills is not None and ids:
            self._backfills.wake(ids)

    async def on_listener_reconnected(self) -> None:
        """Notifications may have been missed: look at every schedule due and every running backfill."""
        self._pending.request_full_scan()
        if self._schedules is not None:
            self._schedules.wake()
        self.on_assets_queued()
        if self._backfills is not None:
            self._backfills.wake(everything=True)

    async def _record_failover(self, loop: SchedulingLoop) -> None:
        await loop.first_pass_done.wait()
        seen = self._election.vacancy_seen_at
        if seen is not None:
            seconds = time.monotonic() - seen
            self._metrics.failover_seconds.set(seconds)
            log.info("first pass as leader %.3fs after the previous leader's key vanished", seconds)


async def _first(task: asyncio.Task[object], *events: asyncio.Event) -> object:
    """Wait until ``task`` finishes or any of ``events`` is set; return whichever came first
    (the task wins a tie). The task is left running when an event wins."""
    waiters = {asyncio.ensure_future(e.wait()): e for e in events}
    done, _ = await asyncio.wait({task, *waiters}, return_when=asyncio.FIRST_COMPLETED)
    for waiter in waiters:
        waiter.cancel()
    if task in done:
        return task
    return next(event for waiter, event in waiters.items() if waiter in done)


async def cancel_until_done(tasks: list[asyncio.Task[Any]]) -> None:
    """Cancel ``tasks`` and wait until every one has ended, cancelling again those still running
    after a moment: ``asyncio.wait_for`` can swallow a cancellation that arrives as the awaited event
    is set (Python 3.11), and a helper that then goes on waiting would keep a deposed term alive."""
    pending = {task for task in tasks if not task.done()}
    while pending:
        for task in pending:
            task.cancel()
        _, pending = await asyncio.wait(pending, timeout=CANCEL_AGAIN_AFTER)
