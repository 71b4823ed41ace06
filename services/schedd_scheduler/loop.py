"""The leader's scheduling loop: evaluate the runs that changed, in fenced, bounded passes.

Work grows with what changed: a finished task notifies its run (naming the task instance), and
only that run is evaluated, incrementally: the leader keeps the task instances of the runs it
evaluated (``run_cache``), reads again only those reported changed and those it wrote itself, and
plans only what they affect (``plan_run(focus=...)``). A run is read and planned in full when it is
new, when a user changed it, when a pass expanded a mapped task in it, and whenever the leader was
not told exactly what changed. A pass with mapped tasks ready to expand reads what they expand over
and plans those runs again before it writes (at most ``max_map_length`` instances per mapped task).

Each pass is one fenced transaction over at most ``batch_size``
runs: the oldest pending run, whatever its size, and the smallest others whose task
counts add up to at most ``pass_budget`` task instances; the runs that did not fit
wait in the pending set for the next pass. So a pass is bounded, every run is
reached, and a flood of large runs delays a small one by one pass at most.

A term's first pass is a full scan that only *enqueues* every unfinished run, so
the work after a failover is done in the same bounded passes: each pass commits
on its own, and a term that ends midway has still made progress.

If the fence has moved on (a newer term), :class:`FencedOut` ends the loop, and if
the lease ran out before a commit, :class:`LeaseExpired` does; nothing of that
pass lands.

One bad run never stalls the rest: a pass that fails for any other reason (a stored
spec that cannot be read, a statement that times out, a bug a run's data triggers)
is split in halves that are evaluated on their own, until the failing run is alone;
a run that fails alone ``MAX_STRIKES`` times is failed with the reason
(``dag_runs.error``) and the others go on. A broken connection, a database that is
restarting, a deadlock or a serialization failure is not the run's fault
(``schedd_store.engine.is_transient``): those runs are simply evaluated again.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping, Sequence

from schedd_core import pass_plan
from schedd_core.backoff import Backoff
from schedd_core.deadlines import waits_for_time
from schedd_core.errors import FencedOut, IllegalTransition, LeaseExpired
from schedd_core.handoffs import plan_handoffs
from schedd_core.limits import DEFAULT_MAX_MAP_LENGTH
from schedd_core.pass_writes import PassOutcome
from schedd_core.planner import MapLengths
from schedd_core.states import TASK_FINISHED, TaskState
from schedd_faults import FaultPoints
from schedd_scheduler.metrics import SchedulerMetrics
from schedd_scheduler.pass_spans import PassSpans
from schedd_scheduler.pending import Changes, PendingRuns
from schedd_scheduler.run_cache import RunCache
from schedd_store import planning_reads, scheduling
from schedd_store.database import Engine
from schedd_store.engine import is_transient
from schedd_store.fence import Fence, FencedConnection
from schedd_store.versions import VersionCache

log = logging.getLogger(__name__)

#: Failed passes of a run on its own after which the run is failed with the reason.
MAX_STRIKES = 3


def _waits_for_time(run: planning_reads.PlanningRun) -> bool:
    """Whether a task instance the pass read (every one, of a run read in full) waits for a moment:
    the deadline timer may not know that moment yet."""
    keys = run.tasks if run.changed is None else run.changed
    return any(waits_for_time(run.tasks[key]) for key in keys)


class SchedulingLoop:
    def __init__(
        self,
        engine: Engine,
        fence: Fence,
        pending: PendingRuns,
        versions: VersionCache,
        *,
        batch_size: int,
        pass_budget: int = 5000,
        max_map_length: int = DEFAULT_MAX_MAP_LENGTH,
        metrics: SchedulerMetrics | None = None,
        faults: FaultPoints | None = None,
    ) -> None:
        self._engine = engine
        self._fence = fence
        self._pending = pending
        self._versions = versions
        self._batch_size = batch_size
        self._pass_budget = pass_budget
        self._max_map_length = max_map_length
        self._faults = faults or FaultPoints()
        self._metrics = metrics
        self._spans = PassSpans(engine)
        self._stopping = asyncio.Event()
        #: Set once the first pass of the term (a full scan) has committed.
        self.first_pass_done = asyncio.Event()
        self._retry = Backoff(0.05, 2.0)
        self._strikes: dict[int, int] = {}
        self._cache = RunCache()
        self.passes = 0
        #: Called after a pass that set a retry time, started a run with a timeout or read a task
        #: instance waiting for a moment (a sensor's next poke, a retry's time).
        self.on_deadlines_changed: Callable[[], None] | None = None
        #: Called after a pass in which runs finished, with their DAGs and backfills.
        self.on_runs_finished: Callable[[set[str], set[int]], None] | None = None
        #: Called after a pass that created task instances, with how many.
        self.on_created: Callable[[int], None] | None = None

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
            full, taken = self._pending.take(self._batch_size)
            if full:
                # Notifications may have been missed: forget what is known, evaluate everything in full.
                self._cache.clear()
                self._pending.add(taken)
                try:
                    async with self._engine.connect() as conn:
                        self._pending.add(await planning_reads.unfinished_run_pks(conn))
                except Exception as exc:
                    if not is_transient(exc):
                        raise
                    log.warning("cannot list the unfinished runs (%s); again shortly", exc)
                    self._pending.request_full_scan()
                    await asyncio.sleep(self._retry.take())
                    continue
                _, taken = self._pending.take(self._batch_size)
            await self.evaluate(taken)
            self.first_pass_done.set()

    async def evaluate(self, runs: Mapping[int, Changes] | Sequence[int]) -> int:
        """One fenced pass over ``runs`` (run pks, each with the task instances reported changed, or
        a sequence of run pks to evaluate in full). Returns the number of task instances queued.

        Raises FencedOut or LeaseExpired (and writes nothing) when the term is over. An empty
        ``runs`` still checks the fence, so a term's first pass proves it may write. A pass
        that fails on the runs' data is split until the failing run is isolated (see above).
        """
        requests: dict[int, Changes] = dict(runs) if isinstance(runs, Mapping) else dict.fromkeys(runs)
        run_pks = list(requests)
        try:
            return await self._evaluate(requests)
        except (FencedOut, LeaseExpired):
            raise
        except Exception as exc:
            self._forget(run_pks)
            if is_transient(exc):
                # Not the runs' fault (a broken connection, a restart, a deadlock): nothing was
                # committed; the same runs are tried again after a short pause.
                log.warning("pass failed, retrying: %s", exc)
                self._pending.add(run_pks)
                await asyncio.sleep(self._retry.take())
                return 0
            return await self._isolate(run_pks, exc)

    async def _isolate(self, run_pks: list[int], error: Exception) -> int:
        if len(run_pks) > 1:
            log.warning("a pass over %d runs failed (%s); evaluating them in halves", len(run_pks), error)
            half = len(run_pks) // 2
            return await self.evaluate(run_pks[:half]) + await self.evaluate(run_pks[half:])
        if not run_pks:
            raise error
        (pk,) = run_pks
        strikes = self._strikes[pk] = self._strikes.get(pk, 0) + 1
        if strikes < MAX_STRIKES:
            log.warning("the pass over run %d failed (%d of %d): %s", pk, strikes, MAX_STRIKES, error)
            self._pending.add([pk])
            return 0
        reason = f"the scheduler could not plan this run: {type(error).__name__}: {error}"
        async with self._fence.transaction() as conn:
            failed = await scheduling.quarantine_run(conn, self._fence.token, pk, reason)
        self._strikes.pop(pk, None)
        if failed:
            log.error("run %d failed: %s", pk, reason)
        return 0

    def _forget(self, run_pks: Sequence[int]) -> None:
        for pk in run_pks:
            self._cache.drop(pk)

    async def _evaluate(self, requests: dict[int, Changes]) -> int:
        started = time.perf_counter()
        try:
            async with self._fence.transaction() as conn:
                outcome, evaluated, wake, deferred = await self._pass(conn, requests)
        except IllegalTransition as exc:
            # Another writer (a user's clear or mark, a claim) changed a task between our read and
            # write; evaluate those runs again from fresh state, in full.
            log.info("pass rolled back, re-evaluating: %s", exc)
            self._forget(list(requests))
            self._pending.add(list(requests))
            return 0
        self._retry.reset()
        for run in evaluated:
            self._strikes.pop(run.pk, None)
            if run.pk in outcome.finished_runs or run.pk in outcome.expanded_runs:
                self._cache.drop(run.pk)
            else:
                # A run read in full had its hand-offs reviewed in full: those written now are all.
                known = self._cache.handoffs(run.pk) if run.changed is not None else None
                handoffs = (known or {}) | outcome.handoffs.get(run.pk, {})
                self._cache.keep(run, outcome.written.get(run.pk, set()), handoffs)
        for pk, written in outcome.written.items():
            self._cache.mark_written(pk, written)
        self._pending.add(wake)
        self._pending.add(deferred)
        if outcome.deadlines_changed and self.on_deadlines_changed is not None:
            self.on_deadlines_changed()
        if outcome.finished_dags and self.on_runs_finished is not None:
            self.on_runs_finished(outcome.finished_dags, outcome.finished_backfills)
        if outcome.created and self.on_created is not None:
            self.on_created(outcome.created)
        self.passes += 1
        if self._metrics is not None:
            self._metrics.passes.inc()
            self._metrics.tasks_queued.inc(outcome.queued)
            self._metrics.pass_seconds.observe(time.perf_counter() - started)
        self._spans.passed(outcome.written, outcome.queued, time.perf_counter() - started)
        return outcome.queued

    async def _load(
        self, conn: FencedConnection, requests: dict[int, Changes]
    ) -> tuple[list[planning_reads.PlanningRun], list[int]]:
        """Lock and read the runs of ``requests``: incrementally those known with changes reported,
        in full the others and those whose control version moved. Returns them and the runs left
        for a later pass (the budget)."""
        changes: dict[int, set[int]] = {}
        for pk, reported in requests.items():
            known = self._cache.get(pk)
            if reported is not None and known is not None:
                changes[pk] = reported | known.dirty
        full = [pk for pk in requests if pk not in changes]
        runs: list[planning_reads.PlanningRun] = []
        if changes:
            fresh, gone = await planning_reads.load_changes(conn, changes)
            self._forget(gone)
            for run in fresh:
                known = self._cache.get(run.pk)
                if known is not None and known.control_version == run.control_version:
                    runs.append(self._cache.merge(run))
                else:
                    full.append(run.pk)
        deferred: list[int] = []
        if full:
            loaded, deferred = await planning_reads.load_runs(conn, full, budget=self._pass_budget)
            runs += loaded
        return runs, deferred

    async def _pass(
        self, conn: FencedConnection, requests: dict[int, Changes]
    ) -> tuple[PassOutcome, list[planning_reads.PlanningRun], list[int], list[int]]:
        """Plan and write one pass; returns what it did, the runs it read, the runs to evaluate next
        (queued runs of DAGs whose active runs ended, runs waiting on their past) and the runs that
        did not fit this pass's budget. The run-level rules are ``schedd_core.pass_plan``'s."""
        loaded, deferred = await self._load(conn, requests) if requests else ([], [])
        await self._versions.load(conn, {r.version_id for r in loaded})
        graph_of = self._versions.graph
        limited = pass_plan.limited_dags(loaded, graph_of)
        running = await planning_reads.running_runs(conn, limited) if limited else {}
        past, released = await self._past(conn, loaded)
        planned = pass_plan.plan_runs(
            loaded, graph_of, running=running, past=past, max_map_length=self._max_map_length
        )
        # Also runs whose plans change nothing (dropped below): a success may complete a hand-off.
        handoffs = plan_handoffs(planned, {r.pk: self._cache.handoffs(r.pk) for r in loaded})
        wanted = pass_plan.to_measure(planned)
        lengths: Mapping[int, MapLengths] = {}
        if wanted:
            lengths = await planning_reads.expansion_lengths(conn, wanted)
            self._faults.hit("scheduling.expanding")  # a test stops a leader between measuring and writing
        planned = pass_plan.finish_plans(
            planned, past=past, map_lengths=lengths, max_map_length=self._max_map_length
        )
        outcome = await scheduling.apply_plans(
            conn,
            self._fence.token,
            planned,
            graph_of=graph_of,
            load_graphs=self._versions.load,
            handoffs=handoffs,
            ti_ids={r.pk: r.ti_ids for r in loaded},
        )
        if any(_waits_for_time(run) for run in loaded):
            outcome.deadlines_changed = True  # e.g. a sensor just rescheduled: the timer must look again
        wake = await planning_reads.queued_runs_to_start(conn, outcome.freed_runs)
        return outcome, loaded, wake + released, deferred

    async def _past(
        self, conn: FencedConnection, runs: list[planning_reads.PlanningRun]
    ) -> tuple[dict[int, dict[str, TaskState]], list[int]]:
        """For the runs with depends_on_past tasks: the states those tasks have in the previous runs,
        and the next runs to evaluate, after runs in which such a task has finished."""
        dependent = {r.pk: self._versions.graph(r.version_id).past_dependent for r in runs}
        dependent = {pk: tasks for pk, tasks in dependent.items() if tasks}
        if not dependent:
            return {}, []
        past = await planning_reads.past_states(
            conn, sorted(dependent), sorted(set().union(*dependent.values()))
        )
        finished = [
            r.pk
            for r in runs
            if any(
                r.tasks.get(t) is not None and r.tasks[t].state in TASK_FINISHED
                for t in dependent.get(r.pk, ())
            )
        ]
        return past, await planning_reads.next_unfinished_runs(conn, finished)
