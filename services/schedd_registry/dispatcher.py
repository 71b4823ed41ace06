"""Handing queued task instances to connected workers.

The dispatcher wakes when tasks are queued (NOTIFY from the scheduler) or a
worker grants credits, and claims for each worker with credits at most that
many task instances of its queues (``FOR UPDATE SKIP LOCKED``, priority order).
It never sends a worker more assignments than it has credits for. A claim
that fills a worker's credits may have left work behind, so the dispatcher
goes round again without waiting.

Lost notifications are harmless: the next credit or notification finds the
work, and each (re)connect of the listener triggers a round.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from sqlalchemy.ext.asyncio import AsyncEngine

from schedd.v1 import worker_pb2
from schedd_exec.assignments import AssignmentBuilder
from schedd_faults import FaultPoints
from schedd_registry.sessions import WorkerSession

log = logging.getLogger(__name__)


class Dispatcher:
    def __init__(
        self,
        engine: AsyncEngine,
        builder: AssignmentBuilder,
        *,
        claim_batch: int,
        on_assigned: Callable[[int], None] | None = None,
        silent_after: float = 15.0,
        faults: FaultPoints | None = None,
    ) -> None:
        self._engine = engine
        self._builder = builder
        self._claim_batch = claim_batch
        self._on_assigned = on_assigned
        self._silent_after = silent_after
        self._faults = faults or FaultPoints()
        self._sessions: dict[str, WorkerSession] = {}
        self._wake = asyncio.Event()
        self.claimed_total = 0
        self._turn = 0

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

    def wake(self, _payload: str = "") -> None:
        self._wake.set()

    async def wake_async(self) -> None:
        self._wake.set()

    async def run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            try:
                more = await self._round()
            except Exception:
                log.exception("dispatch round failed")
                more = False
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
            if time.monotonic() - session.last_heard > self._silent_after:
                continue  # not heard for a while (frozen, cut off): it could not start the work anyway
            groups.setdefault(tuple(sorted(session.queues)), []).append(session)
        more = False
        for queues, members in groups.items():
            slots = _interleave({s.worker_id: min(s.credits, self._claim_batch) for s in members})
            claimed = await self._builder.claim(slots=slots, queues=queues)
            if not claimed:
                continue
            self._faults.hit("registry.claimed")
            self.claimed_total += len(claimed)
            if self._on_assigned is not None:
                self._on_assigned(len(claimed))
            per_worker: dict[str, list[worker_pb2.Assignment]] = {}
            for worker_id, assignment in claimed:
                per_worker.setdefault(worker_id, []).append(assignment)
            for session in members:
                batch = per_worker.get(session.worker_id)
                if batch:
                    session.credits -= len(batch)
                    session.send(
                        worker_pb2.RegistryMessage(assignments=worker_pb2.AssignmentBatch(assignments=batch))
                    )
                    session.sent_assignments([a.attempt for a in batch])
            if len(claimed) == len(slots):
                more = True
        return more


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
