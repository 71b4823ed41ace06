"""Assignments that reached a worker whose registry had not acknowledged it lately, held until it
does.

A worker starts an attempt only while its permit says its registry heard it lately
(``Permit.may_start``). An idle worker heartbeats seldom (``schedd_worker.heartbeats``), so its
permit has usually lapsed when work arrives: the assignment is held, a heartbeat goes at once, and
its acknowledgement releases what is held (in arrival order). What is not released within the ack
window is handed back (reported abandoned, to be run again), as is what is held when the stream
ends or the worker drains. Held assignments are listed in the worker's
heartbeats like running ones, so the registry does not count them lost.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from schedd.v1 import worker_pb2

#: Why an assignment held for the whole ack window is handed back.
UNHEARD = "the worker was not heard by its registry lately"


class HeldAssignments:
    """Assignments held, in arrival order, each handed back (``hand_back(assignment, reason)``) once
    held for the ack window unless released or taken first. Times are the event loop's, like every
    timer of the agent's."""

    def __init__(self, hand_back: Callable[[worker_pb2.Assignment, str], None]) -> None:
        self._hand_back = hand_back
        self._held: dict[str, tuple[worker_pb2.Assignment, float]] = {}
        self._timer: asyncio.TimerHandle | None = None

    def __len__(self) -> int:
        return len(self._held)

    def hold(self, assignment: worker_pb2.Assignment, window: float) -> None:
        """Hold ``assignment``; hand it back after ``window`` seconds if still held."""
        loop = asyncio.get_running_loop()
        self._held[assignment.attempt.attempt_id] = (assignment, loop.time())
        if self._timer is None:
            self._timer = loop.call_later(window, self._expire, window)

    def refs(self) -> list[worker_pb2.AttemptRef]:
        """The held attempts, for a heartbeat."""
        return [assignment.attempt for assignment, _ in self._held.values()]

    def take(self, attempt_id: str) -> worker_pb2.Assignment | None:
        """Stop holding ``attempt_id`` (cancelled): the assignment, or None if it is not held."""
        held = self._held.pop(attempt_id, None)
        return None if held is None else held[0]

    def release(self) -> list[worker_pb2.Assignment]:
        """Everything held, in arrival order; nothing is held afterwards."""
        released = [assignment for assignment, _ in self._held.values()]
        self._held.clear()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        return released

    def hand_back_all(self, reason: str) -> None:
        for assignment in self.release():
            self._hand_back(assignment, reason)

    def _expire(self, window: float) -> None:
        self._timer = None
        loop = asyncio.get_running_loop()
        now = loop.time()
        for attempt_id, (assignment, at) in list(self._held.items()):
            if now - at >= window:
                del self._held[attempt_id]
                self._hand_back(assignment, UNHEARD)
        if self._held:
            oldest = min(at for _, at in self._held.values())
            self._timer = loop.call_later(oldest + window - now, self._expire, window)
