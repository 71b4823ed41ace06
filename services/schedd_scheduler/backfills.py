"""The leader's backfill driver: it makes each running backfill's runs as the backfill's strategy says.

A backfill moves when something happens to it, never on a tick: when it is created or resumed
(the api notifies ``schedd_backfills``), when one of its runs ends (the scheduling loop says so),
and at the start of a term and after the database listener reconnected (every running backfill,
since a notification may have been missed). Each backfill advances in a fenced transaction of its
own (``schedd_store.backfill_runs``), so a term that ends mid-backfill commits nothing of that
step, and the next leader makes exactly the runs this one would have made.

One backfill never stalls the others: a backfill whose step fails for a reason other than the
database being unreachable is retried, and failed with the reason after ``MAX_STRIKES`` failures.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable

from schedd_core.backoff import Backoff
from schedd_core.errors import FencedOut, LeaseExpired
from schedd_faults import FaultPoints
from schedd_scheduler.metrics import SchedulerMetrics
from schedd_store import backfill_runs
from schedd_store.backfill_runs import AdvanceOutcome
from schedd_store.database import Engine
from schedd_store.engine import is_transient
from schedd_store.fence import Fence
from schedd_store.versions import VersionCache

log = logging.getLogger(__name__)

#: Failed steps of one backfill after which it is failed with the reason.
MAX_STRIKES = 3


class BackfillDriver:
    def __init__(
        self,
        engine: Engine,
        fence: Fence,
        versions: VersionCache,
        *,
        faults: FaultPoints | None = None,
        metrics: SchedulerMetrics | None = None,
    ) -> None:
        self._engine = engine
        self._fence = fence
        self._versions = versions
        self._faults = faults or FaultPoints()
        self._metrics = metrics
        self._woken: set[int] = set()
        self._everything = True
        self._poke = asyncio.Event()
        self._poke.set()
        self._strikes: dict[int, int] = {}

    def wake(self, backfill_ids: Iterable[int] = (), *, everything: bool = False) -> None:
        """Advance these backfills (or, with ``everything``, every running one) now."""
        self._woken.update(backfill_ids)
        self._everything |= everything
        self._poke.set()

    async def run(self) -> None:
        """Advance backfills as they are woken, until cancelled."""
        backoff = Backoff(0.1, 5.0)
        while True:
            await self._poke.wait()
            self._poke.clear()
            try:
                if self._everything:
                    async with self._engine.connect() as conn:
                        self._woken.update(await backfill_runs.running_backfills(conn))
                    self._everything = False
                while self._woken:
                    backfill_id = min(self._woken)
                    self._woken.discard(backfill_id)
                    try:
                        outcome = await self.advance(backfill_id)
                    except BaseException:
                        self._woken.add(backfill_id)
                        raise
                    if outcome.unfinished:
                        self._woken |= outcome.unfinished
                backoff.reset()
            except (FencedOut, LeaseExpired):
                raise
            except Exception as exc:
                if not is_transient(exc):
                    raise
                log.warning("backfill step failed (%s); again in %.1fs", exc, backoff.delay)
                await asyncio.sleep(backoff.take())
                self._poke.set()

    async def advance(self, backfill_id: int) -> AdvanceOutcome:
        """One fenced step of one backfill. A failure that is not the database's is retried, and
        fails the backfill after MAX_STRIKES."""
        try:
            async with self._fence.transaction() as conn:
                outcome = await backfill_runs.advance(conn, [backfill_id], self._versions)
                self._faults.hit("backfills.advanced")  # a test freezes a leader before it commits
        except (FencedOut, LeaseExpired):
            raise
        except Exception as exc:
            if is_transient(exc):
                raise
            return await self._strike(backfill_id, exc)
        self._strikes.pop(backfill_id, None)
        if self._metrics is not None:
            self._metrics.backfill_runs.inc(outcome.runs_made + outcome.runs_rerun)
        for ended, state in outcome.ended.items():
            log.info("backfill %d %s", ended, state.value)
        return outcome

    async def _strike(self, backfill_id: int, error: Exception) -> AdvanceOutcome:
        strikes = self._strikes[backfill_id] = self._strikes.get(backfill_id, 0) + 1
        if strikes < MAX_STRIKES:
            log.warning("backfill %d: step failed (%d of %d): %s", backfill_id, strikes, MAX_STRIKES, error)
            return AdvanceOutcome(unfinished={backfill_id})
        reason = f"the scheduler could not advance this backfill: {type(error).__name__}: {error}"
        log.error("backfill %d failed: %s", backfill_id, reason)
        async with self._fence.transaction() as conn:
            await backfill_runs.fail(conn, backfill_id, reason[:4000])
        self._strikes.pop(backfill_id, None)
        return AdvanceOutcome()
