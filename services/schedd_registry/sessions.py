"""A connected worker as the registry sees it: its queues, its unspent credits, its outbound messages."""

from __future__ import annotations

import asyncio
import time
from collections import deque
from dataclasses import dataclass, field

from schedd.v1 import worker_pb2


@dataclass(eq=False)
class WorkerSession:
    worker_id: str
    queues: tuple[str, ...]
    capacity: int
    #: The worker process's incarnation, as its hello said (its row is marked gone only for it).
    incarnation: str = ""
    credits: int = 0
    #: Set once the worker drains: it gets no new assignments.
    draining: bool = False
    outbox: asyncio.Queue[worker_pb2.RegistryMessage] = field(default_factory=asyncio.Queue)
    closed: bool = False
    #: Monotonic time the worker's last heartbeat (or its hello) was stored. A worker not heard for
    #: longer than ``AttemptWindows.silent_after`` could not start new work, so it gets none.
    last_heard: float = field(default_factory=time.monotonic)
    #: Whether the worker's last stored heartbeat said it holds no attempt and accounted for every
    #: assignment sent: it heartbeats every idle interval (``schedd_worker.heartbeats``) until an
    #: assignment reaches it, and then at once.
    idle: bool = False

    #: Assignments sent on this stream that no heartbeat has accounted for yet, in sending order, and
    #: how many were sent (and accounted for) before the first of them.
    unconfirmed: deque[worker_pb2.AttemptRef] = field(default_factory=deque)
    confirmed_count: int = 0
    #: Attempts sent on this stream whose task instances had a successor hand-off when claimed.
    hands_off: set[str] = field(default_factory=set)

    #: Why the registry ends this stream ("" while it does not): the stream's loop fails with
    #: UNAVAILABLE (``end``), and the worker connects again.
    end_reason: str = ""

    def end(self, reason: str) -> None:
        """End this stream: what is queued for it is dropped (the worker sends its unacknowledged
        results again on its next stream, and its hello accounts for its attempts)."""
        if not self.end_reason:
            self.end_reason = reason
            self.outbox.put_nowait(worker_pb2.RegistryMessage())

    def keep_for_hand_off(self, attempt_id: str) -> bool:
        """Whether to keep a credit for the hand-off of ``attempt_id``, which just ended: it had one
        when claimed, and the worker has a credit to keep (its result carries one for the slot the
        attempt freed) and is not draining. A kept credit is spent on the successor or given back
        (``Dispatcher.hand_off_done``)."""
        if attempt_id not in self.hands_off:
            return False
        self.hands_off.discard(attempt_id)
        if self.credits <= 0 or self.draining:
            return False
        self.credits -= 1
        return True

    def heard(self, now: float, *, holds_attempts: bool) -> None:
        """A heartbeat of the worker was stored at monotonic time ``now``."""
        self.last_heard = now
        self.idle = not holds_attempts and not self.unconfirmed

    def send(self, message: worker_pb2.RegistryMessage) -> None:
        if not self.closed:
            self.outbox.put_nowait(message)

    def sent_assignments(self, attempts: list[worker_pb2.AttemptRef]) -> None:
        self.unconfirmed.extend(attempts)

    def received_but_not_listed(self, received: int, listed: set[str]) -> list[worker_pb2.AttemptRef]:
        """A heartbeat says the worker received ``received`` assignments on this stream and runs (or
        holds a result for) ``listed``: the newly received ones it does not list are lost (it never
        started them, or they finished and were reported already; marking those lost changes
        nothing). Each assignment is accounted for once."""
        lost: list[worker_pb2.AttemptRef] = []
        while self.unconfirmed and self.confirmed_count < received:
            attempt = self.unconfirmed.popleft()
            self.confirmed_count += 1
            if attempt.attempt_id not in listed:
                lost.append(attempt)
        return lost
