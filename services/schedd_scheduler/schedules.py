"""The leader's schedule timer: it makes the scheduled runs of DAGs when their run times come.

The timer sleeps until the earliest ``dags.next_due_at`` of an unpaused DAG (one indexed read),
or until woken: the api notifies ``schedd_dags`` when a DAG is registered, its schedule changes
or it is unpaused, and the scheduling loop wakes it for a DAG whose run ended (a DAG held back by
``max_active_runs`` may make its next run now), and after the database listener reconnected
(notifications may have been lost). It never scans the DAGs on a tick, so its work grows with the
DAGs that are due, not with the DAGs registered; with nothing due it reads the earliest due time
again after ``idle_recheck`` seconds. A ``@continuous`` DAG has no due time while its run is in
flight: that run ending wakes the timer, which makes the next one in its next step.

Each step is one fenced transaction over at most ``dags_per_step`` due DAGs, locked: for each,
:func:`schedd_core.schedule_plan.plan_schedule` (catch-up, max_active_runs, at most
``runs_per_dag`` runs a look, the trigger timetables' run_immediately) says which runs to make and
what to keep; the runs are created (``scheduled__<logical date>``, with their logical dates and
data intervals), and the next run and due time stored, in the same transaction. A term ends
mid-step: nothing of it lands, and the next leader makes the same runs from the same stored state.
A logical date that has a run already (made by a backfill) is left alone, and the unique
constraint on (dag, logical date) rejects a second run even if two writers raced
(:class:`schedd_store.schedules.RunExists`).

The first step of a term also looks at DAGs held back by ``max_active_runs`` (the run ending that
would have woken them may have ended under the previous term).

One DAG never stops the others: a DAG whose stored spec or schedule cannot be planned is taken
off the timer (logged; registering or unpausing it puts it back), and a step that fails for any
other reason is retried in halves until the DAG at fault is alone, as the scheduling loop does.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from schedd_core.backoff import Backoff
from schedd_core.clock import Clock, SystemClock
from schedd_core.errors import FencedOut, LeaseExpired, ScheddError
from schedd_core.schedule_plan import ScheduleState as PlanningState, plan_schedule
from schedd_core.states import RunType
from schedd_core.timetable_spec import timetable_of
from schedd_faults import FaultPoints
from schedd_scheduler.metrics import SchedulerMetrics
from schedd_store import schedules
from schedd_store.database import Engine
from schedd_store.engine import is_transient
from schedd_store.fence import Fence
from schedd_store.schedules import DueDag, NewRun, ScheduleState
from schedd_store.versions import UnreadableVersion, VersionCache

log = logging.getLogger(__name__)

#: Failures of a step over one DAG alone after which the DAG is taken off the timer.
MAX_STRIKES = 3


@dataclass(frozen=True)
class StepResult:
    dags: int
    runs: int
    #: More DAGs are due now than one step took: step again at once.
    more: bool


class ScheduleTimer:
    def __init__(
        self,
        engine: Engine,
        fence: Fence,
        versions: VersionCache,
        *,
        clock: Clock | None = None,
        faults: FaultPoints | None = None,
        metrics: SchedulerMetrics | None = None,
        dags_per_step: int = 200,
        runs_per_dag: int = 100,
        idle_recheck: float = 300.0,
    ) -> None:
        self._engine = engine
        self._fence = fence
        self._versions = versions
        self._clock = clock or SystemClock()
        self._faults = faults or FaultPoints()
        self._metrics = metrics
        self._dags_per_step = dags_per_step
        self._runs_per_dag = runs_per_dag
        self._idle_recheck = idle_recheck
        self._woken: set[str] = set()
        self._poke = asyncio.Event()
        self._strikes: dict[str, int] = {}
        #: The DAGs the step in progress locked (to isolate the one at fault when it fails).
        self._locked: list[str] = []

    def wake(self, dag_ids: Iterable[str] = ()) -> None:
        """Look at the schedules now: those due, and those of ``dag_ids`` (a run of theirs ended)."""
        self._woken.update(dag_ids)
        self._poke.set()

    async def run(self) -> None:
        """Make scheduled runs until cancelled. The database being unreachable is retried."""
        held = True  # the term's first step also looks at DAGs held back by max_active_runs
        backoff = Backoff(0.1, 5.0)
        while True:
            self._poke.clear()
            try:
                result = await self.step(held=held)
                held = False
                backoff.reset()
                if result.more:
                    continue
                delay = await self._delay()
            except (FencedOut, LeaseExpired):
                raise
            except Exception as exc:
                if not is_transient(exc):
                    raise
                log.warning("schedule step failed (%s); again in %.1fs", exc, backoff.delay)
                delay = backoff.take()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._poke.wait(), delay)

    async def _delay(self) -> float:
        async with self._engine.connect() as conn:
            due = await schedules.next_due(conn)
        if due is None:
            return self._idle_recheck
        return min(max((due - self._clock.now()).total_seconds(), 0.0) + 0.001, self._idle_recheck)

    async def step(self, *, held: bool = False, only: Sequence[str] | None = None) -> StepResult:
        """One fenced step over the DAGs due now (or, with ``only``, those of them named)."""
        woken, self._woken = self._woken, set()
        try:
            return await self._step(woken, held=held, only=only)
        except (FencedOut, LeaseExpired):
            raise
        except Exception as exc:
            self._woken |= woken
            if is_transient(exc):
                raise
            return await self._isolate(exc)

    async def _step(self, woken: set[str], *, held: bool, only: Sequence[str] | None) -> StepResult:
        now = self._clock.now()
        self._locked = []
        async with self._fence.transaction() as conn:
            due = await schedules.lock_due_dags(
                conn, now=now, woken=sorted(woken), held=held, only=only, limit=self._dags_per_step
            )
            self._locked = [d.dag_id for d in due]
            await self._versions.load(conn, {d.version_id for d in due})
            new_runs: list[NewRun] = []
            states: list[ScheduleState] = []
            for dag in due:
                runs, state = self._plan(dag, now)
                new_runs += runs
                states.append(state)
            taken = await schedules.taken_logical_dates(
                conn, [(r.dag_id, r.interval.logical_date) for r in new_runs]
            )
            fresh = [r for r in new_runs if (r.dag_id, r.interval.logical_date) not in taken]
            made = await schedules.create_interval_runs(conn, fresh, run_type=RunType.SCHEDULED)
            await schedules.keep_schedule_states(conn, states)
            self._faults.hit("schedules.created")  # a test freezes a leader between making and committing
        for dag in due:
            self._strikes.pop(dag.dag_id, None)
        if self._metrics is not None:
            self._metrics.runs_scheduled.inc(len(made))
            for run in fresh:
                self._metrics.schedule_delay_seconds.observe(
                    max(0.0, (now - run.interval.run_after).total_seconds())
                )
        more = len(due) >= self._dags_per_step or any(
            s.due_at is not None and s.due_at <= now for s in states
        )
        return StepResult(dags=len(due), runs=len(made), more=more)

    def _plan(self, dag: DueDag, now: datetime) -> tuple[list[NewRun], ScheduleState]:
        """The runs to make for one DAG and what to keep; a DAG that cannot be planned is taken off
        the timer (its next interval kept)."""
        try:
            spec = self._versions.spec(dag.version_id)
            timetable = timetable_of(spec)
        except (UnreadableVersion, ScheddError) as exc:
            log.error("dag %s: its schedule cannot be planned (%s); it is off the timer", dag.dag_id, exc)
            return [], ScheduleState(dag.dag_id, dag.next_interval, None)
        plan = plan_schedule(
            timetable,
            PlanningState(
                next_interval=dag.next_interval,
                catchup=spec.catchup,
                active_runs=dag.active_runs,
                max_active_runs=spec.max_active_runs,
                latest_logical_date=dag.latest_logical_date,
                covered_until=dag.covered_until,
            ),
            now,
            limit=self._runs_per_dag,
        )
        runs = [NewRun(dag.dag_id, dag.version_id, interval) for interval in plan.create]
        return runs, ScheduleState(dag.dag_id, plan.next_interval, plan.due_at)

    async def _isolate(self, error: Exception) -> StepResult:
        locked = self._locked
        if len(locked) > 1:
            log.warning("a schedule step over %d DAGs failed (%s); stepping in halves", len(locked), error)
            half = len(locked) // 2
            first = await self.step(held=True, only=locked[:half])
            second = await self.step(held=True, only=locked[half:])
            return StepResult(first.dags + second.dags, first.runs + second.runs, more=True)
        if not locked:
            raise error
        (dag_id,) = locked
        strikes = self._strikes[dag_id] = self._strikes.get(dag_id, 0) + 1
        if strikes < MAX_STRIKES:
            log.warning(
                "the schedule step of dag %s failed (%d of %d): %s", dag_id, strikes, MAX_STRIKES, error
            )
            return StepResult(0, 0, more=True)
        log.error("dag %s: its schedule step keeps failing (%s); it is off the timer", dag_id, error)
        async with self._fence.transaction() as conn:
            await schedules.stop_schedule(conn, dag_id)
        self._strikes.pop(dag_id, None)
        self._woken.discard(dag_id)
        return StepResult(0, 0, more=True)
