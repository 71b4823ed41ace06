"""A lease kept alive, with a fail-stop deadline measured on the monotonic clock.

The holder of a :class:`KeptLease` may act on it only while ``valid`` is true.
Validity ends at ``last_renewal_sent + ttl - safety_margin`` (monotonic), where
``last_renewal_sent`` is when the newest *acknowledged* keep-alive was sent.
etcd cannot expire the lease before ``ttl`` has passed since it received that
keep-alive, which was after we sent it, so as long as the local clock does not
run slower than etcd's by more than ``safety_margin`` over one TTL, we stop
before anyone else can be given what the lease protects.

What is not guaranteed: anything under a clock that runs much slower than
etcd's, or a process paused (SIGSTOP, GC) between checking ``valid`` and
acting. The second is what fencing tokens in PostgreSQL are for.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass

from schedd_coord.client import EtcdClient
from schedd_coord.errors import CoordinationError
from schedd_core.clock import Clock, SystemClock

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LeaseTiming:
    """Timing of a lease. ``ttl > renew_deadline > retry_period``, all positive.

    - ``ttl``: seconds etcd keeps the lease without keep-alives (whole seconds).
    - ``renew_deadline``: the holder steps down when no keep-alive succeeded for this long;
      ``ttl - renew_deadline`` is the safety margin for clock drift and delays.
    - ``retry_period``: seconds between keep-alives.
    """

    ttl: int = 2
    renew_deadline: float = 1.4
    retry_period: float = 0.4

    def __post_init__(self) -> None:
        if not (self.ttl > self.renew_deadline > self.retry_period > 0):
            raise ValueError(
                f"lease timing must satisfy ttl > renew_deadline > retry_period > 0; got ttl={self.ttl}, "
                f"renew_deadline={self.renew_deadline}, retry_period={self.retry_period}"
            )
        if self.renew_deadline < 2 * self.retry_period:
            raise ValueError(
                f"renew_deadline ({self.renew_deadline}) must allow at least two keep-alives "
                f"(retry_period={self.retry_period})"
            )


class KeptLease:
    """Grants a lease and keeps it alive until stopped or lost.

    ``lost`` is set when validity ends: the deadline passed without a successful
    keep-alive, or etcd reported the lease gone. It is never cleared; take a new lease.
    """

    def __init__(self, client: EtcdClient, timing: LeaseTiming, clock: Clock | None = None) -> None:
        self._client = client
        self._timing = timing
        self._clock = clock or SystemClock()
        self.lease_id = 0
        self.lost = asyncio.Event()
        self._last_ok = 0.0
        self._tasks: list[asyncio.Task[None]] = []

    @property
    def valid(self) -> bool:
        return not self.lost.is_set() and self.remaining() > 0

    def remaining(self) -> float:
        """Seconds until this holder must stop acting on the lease."""
        return self._last_ok + self._timing.renew_deadline - self._clock.monotonic()

    async def start(self) -> int:
        sent = self._clock.monotonic()
        self.lease_id = await self._client.grant(self._timing.ttl)
        self._last_ok = sent
        self._tasks = [
            asyncio.create_task(self._keep_alive(), name="lease-keepalive"),
            asyncio.create_task(self._watchdog(), name="lease-watchdog"),
        ]
        return self.lease_id

    async def stop(self, *, revoke: bool) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self.lost.set()
        if revoke and self.lease_id:
            with contextlib.suppress(CoordinationError):
                await self._client.revoke(self.lease_id)

    async def _keep_alive(self) -> None:
        sent_at: list[float] = []

        async def ticks() -> AsyncIterator[None]:
            while True:
                sent_at.append(self._clock.monotonic())
                yield None
                await asyncio.sleep(self._timing.retry_period)

        while not self.lost.is_set():
            try:
                async for ttl in self._client.keepalive_stream(self.lease_id, ticks()):
                    when = sent_at.pop(0) if sent_at else self._clock.monotonic()
                    if ttl <= 0:
                        log.warning("lease %x is gone", self.lease_id)
                        self.lost.set()
                        return
                    self._last_ok = max(self._last_ok, when)
            except CoordinationError as exc:
                log.warning("lease keep-alive failed: %s", exc)
            sent_at.clear()
            # The stream broke; try again soon while the deadline has not passed.
            await asyncio.sleep(self._timing.retry_period / 2)

    async def _watchdog(self) -> None:
        while True:
            remaining = self.remaining()
            if remaining <= 0:
                log.warning(
                    "lease %x: no keep-alive for %.2fs; stopping", self.lease_id, self._timing.renew_deadline
                )
                self.lost.set()
                return
            await asyncio.sleep(remaining)
