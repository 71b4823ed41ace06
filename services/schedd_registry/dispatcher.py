"""Handing queued task instances to connected workers.

The dispatcher wakes when tasks are queued (NOTIFY from the scheduler) or a
worker grants credits, and claims for each worker with credits at most that
many task instances of its queues (``FOR UPDATE SKIP LOCKED``, priority order).
It never sends a worker more assignments than it has credits for. A claim
that fills a worker's credits may have left work behind, so the dispatcher
goes round again without waiting. A claim that found its queues empty is
trusted for a while (``schedd_registry.empty_queues``): credits granted
meanwhile claim nothing until a notification names one of those queues, and
a round skipped for that reason is followed by one once the finding expires.

Lost notifications are harmless: each (re)connect of the listener voids
every finding and triggers a round.

Every message stays within what the worker accepts: a worker's share of a claim goes
out in messages of at most ``BATCH_BYTES``, and an assignment larger than
``MAX_ASSIGNMENT_BYTES`` (its inputs, the results of its upstream tasks, are too big to
carry) is not sent but failed, with the reason, like any failed attempt.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence

from schedd.v1 import worker_pb2
from schedd_core.backoff import Backoff
from schedd_core.clock import Clock, SystemClock
from schedd_core.limits import MAX_ASSIGNMENT_BYTES
from schedd_core.permits import AttemptWindows
from schedd_exec.assignments import AssignmentBuilder, Built
from schedd_faults import FaultPoints
from schedd_registry.empty_queues import EmptyQueues
from schedd_registry.sessions import WorkerSession
from schedd_store import dispatch
from schedd_store.database import Engine
from schedd_store.dispatch import AttemptResult

log = logging.getLogger(__name__)

#: Most bytes of assignments in one message to a worker.
BATCH_BYTES = 2 * 1024 * 1024


class Dispatcher:
    def __init__(
        self,
        engine: Engine,
        builder: AssignmentBuilder,
        *,
        claim_batch: int,
        on_assigned: Callable[[Sequence[worker_pb2.Assignment]], None] | None = None,
        windows: AttemptWindows | None = None,
        faults: FaultPoints | None = None,
        clock: Clock | None = None,
    ) -> None:
        """``clock``: where the times the dispatcher reads come from (the system's when None)."""
        self._engine = engine
        self._clock = clock or SystemClock()
        self._builder = builder
        self._claim_batch = claim_batch
        self._on_assigned = on_assigned
        self._windows = windows or AttemptWindows()
        self._faults = faults or FaultPoints()
        self._sessions: dict[str, WorkerSession] = {}
        self._wake = asyncio.Event()
        self._empty = EmptyQueues(self._clock)
        self._recheck: asyncio.TimerHandle | None = None
        #: Workers a round passed over as silent: their next stored heartbeat wakes the dispatcher.
        self._passed_over: set[str] = set()
        self._turn = 0
        #: Called for each successor handed off (``hand_off_done``): metrics.
        self.on_handed_off: Callable[[], None] | None = None

    @property
    def builder(self) -> AssignmentBuilder:
        return self._builder

    def attach(self, session: WorkerSession) -> None:
        self._sessions[session.worker_id] = session

    def detach(self, session: WorkerSession) -> None:
        if self._sessions.get(session.worker_id) is session:
            del self._sessions[session.worker_id]

    def grant(self, session: WorkerSession, slots: int) -> None:
        session.credits = min(session.capacity, session.credits + slots)
        self._wake.set()

    def session(self, worker_id: str) -> WorkerSession | None:
        return self._sessions.get(worker_id)

    @property
    def sessions(self) -> list[WorkerSession]:
        return list(self._sessions.values())

    @property
    def faults(self) -> FaultPoints:
        """Where tests inject faults into this registry (``schedd_faults``)."""
        return self._faults

    def wake(self, queue: str = "") -> None:
        """Task instances were queued in ``queue`` (a ``schedd_queued`` notification; "" for any)."""
        self._empty.told(queue)
        self._wake.set()

    def heard(self, session: WorkerSession) -> None:
        """A heartbeat of ``session``'s worker was stored: if a round passed it over as silent, the
        work it could take is claimed now, not at the next unrelated wake-up."""
        if session.worker_id in self._passed_over:
            self._passed_over.discard(session.worker_id)
            self._wake.set()

    async def wake_async(self) -> None:
        """The listener (re)connected: notifications may have been missed."""
        self.wake()

    async def run(self) -> None:
        """Dispatch rounds until cancelled. A round that fails (the database restarting, say) is tried
        again with backoff: queued work is never left waiting for the next wake-up."""
        backoff = Backoff(0.05, 2.0)
        while True:
            await self._wake.wait()
            self._wake.clear()
            try:
                more = await self._round()
                backoff.reset()
            except Exception as exc:
                log.warning("dispatch round failed (%s); again in %.2fs", exc, backoff.delay)
                await asyncio.sleep(backoff.take())
                more = True
            if more:
                self._wake.set()

    async def _round(self) -> bool:
        """Claim for every worker with credits, one statement per set of queues. Returns whether work
        may remain."""
        sessions = list(self._sessions.values())
        # Start with a different worker each round, so work spreads over the workers.
        self._turn = (self._turn + 1) % max(len(sessions), 1)
        groups: dict[tuple[str, ...], list[WorkerSession]] = {}
        for session in sessions[self._turn :] + sessions[: self._turn]:
            if session.closed or session.draining or session.credits <= 0:
                continue
            if self._clock.monotonic() - session.last_heard > self._windows.silent_after(session.idle):
                self._passed_over.add(session.worker_id)
                continue  # not heard for a while (frozen, cut off): it could not start the work anyway
            groups.setdefault(tuple(sorted(session.queues)), []).append(session)
        more = False
        for queues, members in groups.items():
            empty_until = self._empty.empty_until(queues)
            if empty_until is not None:
                self._look_again_at(empty_until)
                continue
            slots = _interleave({s.worker_id: min(s.credits, self._claim_batch) for s in members})
            before = self._empty.before_claim()
            claimed = await self._builder.claim(slots=slots, queues=queues)
            if len(claimed) < len(slots):
                self._empty.found_empty(queues, before)
            if not claimed:
                continue
            self._faults.hit("registry.claimed")
            await self._deliver(claimed, members)
            if len(claimed) == len(slots):
                more = True
        return more

    def _look_again_at(self, when: float) -> None:
        """A round at monotonic time ``when`` (once: an earlier one pending stands)."""
        if self._recheck is None:

            def look_again() -> None:
                self._recheck = None
                self._wake.set()

            delay = max(0.0, when - self._clock.monotonic())
            self._recheck = asyncio.get_running_loop().call_later(delay, look_again)

    async def _deliver(self, claimed: Sequence[Built], members: Sequence[WorkerSession]) -> None:
        """Send each of ``members`` its share of ``claimed`` (each member's credits cover its share)
        and fail those too large to deliver."""
        if self._on_assigned is not None:  # before sending: it may set the assignments' traceparent
            self._on_assigned([b.assignment for b in claimed])
        per_worker: dict[str, list[Built]] = {}
        too_big: list[tuple[str, worker_pb2.Assignment]] = []
        for built in claimed:
            if built.assignment.ByteSize() > MAX_ASSIGNMENT_BYTES:
                too_big.append((built.worker_id, built.assignment))
            else:
                per_worker.setdefault(built.worker_id, []).append(built)
        for session in members:
            batch = per_worker.get(session.worker_id)
            if batch:
                session.credits -= len(batch)
                assignments = [b.assignment for b in batch]
                for part in split_by_size(assignments, BATCH_BYTES):
                    session.send(
                        worker_pb2.RegistryMessage(assignments=worker_pb2.AssignmentBatch(assignments=part))
                    )
                session.sent_assignments([a.attempt for a in assignments])
                session.hands_off.update(a.attempt.attempt_id for a in assignments if a.hands_off)
        if too_big:
            await self._fail_undeliverable(too_big)

    async def hand_off_done(self, session: WorkerSession, handed: Built | None) -> None:
        """The result for which ``session`` kept a credit (:meth:`WorkerSession.keep_for_hand_off`)
        was applied: send the successor it claimed, or give the credit back to the dispatcher."""
        session.credits += 1
        if handed is not None:
            await self._deliver([handed], [session])
            if self.on_handed_off is not None:
                self.on_handed_off()
        else:
            self._wake.set()

    async def _fail_undeliverable(self, assignments: list[tuple[str, worker_pb2.Assignment]]) -> None:
        """Fail attempts claimed for a worker (the first of each pair) that cannot be sent to it."""
        now = self._clock.now()
        results = [
            AttemptResult(
                worker_id=worker_id,
                ti_id=a.attempt.task_instance_id,
                attempt_id=a.attempt.attempt_id,
                try_number=a.attempt.try_number,
                succeeded=False,
                exit_code=-1,
                error=f"the assignment is {a.ByteSize()} bytes (its upstream results, conf and params); "
                f"at most {MAX_ASSIGNMENT_BYTES} can be delivered to a worker",
                ended_at=now,
            )
            for worker_id, a in assignments
        ]
        log.warning("failing %d attempts whose assignments are too large to deliver", len(results))
        await dispatch.apply_results(self._engine, results)


def split_by_size(
    assignments: list[worker_pb2.Assignment], max_bytes: int
) -> list[list[worker_pb2.Assignment]]:
    """Consecutive groups of ``assignments``, each at most ``max_bytes`` (or a single assignment)."""
    parts: list[list[worker_pb2.Assignment]] = [[]]
    size = 0
    for assignment in assignments:
        item = assignment.ByteSize()
        if parts[-1] and size + item > max_bytes:
            parts.append([])
            size = 0
        parts[-1].append(assignment)
        size += item
    return parts


def _interleave(credits: dict[str, int]) -> list[str]:
    """A worker id per slot, round-robin, so that the most important task instances (the first
    slots) and a short supply spread over the workers."""
    slots: list[str] = []
    left = dict(credits)
    while left:
        for worker_id in list(left):
            slots.append(worker_id)
            left[worker_id] -= 1
            if left[worker_id] <= 0:
                del left[worker_id]
    return slots
