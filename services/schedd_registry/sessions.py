"""A connected worker as the registry sees it: its queues, its unspent credits, its outbound messages."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

from schedd.v1 import worker_pb2


@dataclass(eq=False)
class WorkerSession:
    worker_id: str
    queues: tuple[str, ...]
    capacity: int
    credits: int = 0
    #: Set once the worker drains: it gets no new assignments.
    draining: bool = False
    outbox: asyncio.Queue[worker_pb2.RegistryMessage] = field(default_factory=asyncio.Queue)
    closed: bool = False
    #: Monotonic time of the worker's last message; a worker silent for long gets no new work.
    last_seen: float = field(default_factory=time.monotonic)

    def send(self, message: worker_pb2.RegistryMessage) -> None:
        if not self.closed:
            self.outbox.put_nowait(message)
