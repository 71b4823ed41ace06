"""A lease kept alive on a thread of its own, with a fail-stop deadline on the monotonic clock.

The holder of a :class:`KeptLease` may act on it only while ``valid`` is true.
Validity ends at ``last_renewal_sent + renew_deadline`` (monotonic), where
``last_renewal_sent`` is when the newest *acknowledged* keep-alive was sent
(:class:`LeaseDeadline`, pure and tested with a fake clock). etcd cannot expire the
lease before ``ttl`` has passed since it received that keep-alive, which was after we
sent it. So the holder stops before anyone else can be given what the lease protects
as long as its monotonic clock runs at least ``renew_deadline / ttl`` as fast as etcd's
(0.7 with the defaults: a local clock up to 30 % slow is tolerated) and what it does
after its last check of ``valid`` takes less than ``ttl - renew_deadline`` of etcd time.

The keep-alives and the watchdog run on a thread of their own, with their own connection
to etcd (:mod:`schedd_coord.keepalives`), so a holder whose event loop is busy (a large
scheduling pass, a slow callback) still renews in time, and ``remaining()`` is always
current. ``lost`` is an event of the caller's loop; it is set from the lease thread.

What is not guaranteed: anything under a clock that runs much slower than etcd's; and
that a holder paused (SIGSTOP, a long GC) between checking ``valid`` and acting does
not act late. The second is what fencing tokens in PostgreSQL are for.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from dataclasses import dataclass

from schedd_coord.client import EtcdClient
from schedd_coord.credentials import EtcdAuth
from schedd_coord.errors import CoordinationError
from schedd_coord.keepalives import KeepAliveFailed, KeepAlives
from schedd_core.clock import Clock, SystemClock

log = logging.getLogger(__name__)

#: Seconds ``stop`` waits for the lease thread to finish (a revoke has a deadline of its own).
STOP_TIMEOUT = 5.0


@dataclass(frozen=True)
class LeaseTiming:
    """Timing of a lease. ``ttl > renew_deadline > retry_period``, all positive.

    - ``ttl``: seconds etcd keeps the lease without keep-alives (whole seconds).
    - ``renew_deadline``: the holder steps down when no keep-alive succeeded for this long;
      ``ttl - renew_deadline`` is the safety margin for clock drift and delays.
    - ``retry_period``: seconds between keep-alives; a failed keep-alive is tried again after
      half of it. While etcd answers keep-alives more slowly than ``renew_deadline -
      retry_period``, the holder's lease is not valid (it steps down; nothing unsafe). A
      longer period does not slow a fail-over: etcd expires the lease ``ttl`` after the last
      keep-alive it received, which is sooner the longer the period. What it costs is wake-ups
      while idle: each keep-alive wakes the holder's lease thread and etcd.
    """

    ttl: int = 2
    renew_deadline: float = 1.4
    retry_period: float = 0.5

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

    @property
    def margin(self) -> float:
        """Seconds between the holder's own deadline and the earliest expiry in etcd."""
        return self.ttl - self.renew_deadline

    @property
    def tolerated_clock_rate(self) -> float:
        """The slowest local clock rate, relative to etcd's, under which fail-stop still holds."""
        return self.renew_deadline / self.ttl


class LeaseDeadline:
    """When the holder of a lease must stop, from the keep-alives etcd acknowledged.

    Pure bookkeeping on an injected clock: ``acknowledged(sent_at)`` records that the
    keep-alive sent at monotonic time ``sent_at`` was answered with a positive TTL.
    Acknowledgements may arrive out of order; only the newest send time counts.
    """

    def __init__(self, timing: LeaseTiming, clock: Clock) -> None:
        self._timing = timing
        self._clock = clock
        self._last_ok = float("-inf")
        self._gone = False

    def acknowledged(self, sent_at: float) -> None:
        self._last_ok = max(self._last_ok, sent_at)

    def gone(self) -> None:
        """etcd said the lease no longer exists: stop at once, whatever was acknowledged before."""
        self._gone = True

    @property
    def until(self) -> float:
        """The monotonic time at which validity ends (-inf once gone)."""
        return float("-inf") if self._gone else self._last_ok + self._timing.renew_deadline

    def remaining(self) -> float:
        return self.until - self._clock.monotonic()

    @property
    def valid(self) -> bool:
        return self.remaining() > 0


class KeptLease:
    """Grants a lease and keeps it alive, on a thread of its own, until stopped or lost.

    ``lost`` is set when validity ends: the deadline passed without a successful
    keep-alive, or etcd reported the lease gone. It is never cleared; take a new lease.
    The grant and the revoke go through an authenticated gRPC client on the holder's loop;
    the keep-alives through :class:`~schedd_coord.keepalives.KeepAlives` on a blocking
    thread that wakes once a ``retry_period`` and touches no event loop while the lease holds.
    """

    def __init__(
        self,
        endpoints: str,
        timing: LeaseTiming,
        clock: Clock | None = None,
        *,
        rpc_timeout: float = 2.0,
        auth: EtcdAuth | None = None,
    ) -> None:
        """``auth``: the etcd user of the grant and the revoke (``SCHEDD_ETCD_*`` when None)."""
        self._endpoints = endpoints
        self._auth = auth
        self._timing = timing
        self._clock = clock or SystemClock()
        self._rpc_timeout = rpc_timeout
        self.deadline = LeaseDeadline(timing, self._clock)
        self.lease_id = 0
        self.lost = asyncio.Event()
        self._owner: asyncio.AbstractEventLoop | None = None
        self._client: EtcdClient | None = None
        self._thread: threading.Thread | None = None
        self._stop_requested = threading.Event()

    @property
    def valid(self) -> bool:
        return not self.lost.is_set() and self.deadline.valid

    def remaining(self) -> float:
        """Seconds until this holder must stop acting on the lease."""
        return self.deadline.remaining()

    async def start(self) -> int:
        """Grant the lease and start keeping it alive; returns the lease id."""
        self._owner = asyncio.get_running_loop()
        keeper = KeepAlives(self._endpoints)  # before the grant: its TLS files read, or no lease
        self._client = EtcdClient(self._endpoints, timeout=self._rpc_timeout, auth=self._auth)
        sent = self._clock.monotonic()
        try:
            self.lease_id = await self._client.grant(self._timing.ttl)
        except BaseException:
            await self._client.close()
            self._client = None
            raise
        self.deadline.acknowledged(sent)
        self._thread = threading.Thread(target=self._keep_alive, args=(keeper,), name="lease", daemon=True)
        self._thread.start()
        return self.lease_id

    async def stop(self, *, revoke: bool) -> None:
        """Stop keeping the lease alive (and revoke it, if asked); ``lost`` is set afterwards."""
        self._stop_requested.set()
        if self._thread is not None:
            await asyncio.to_thread(self._thread.join, STOP_TIMEOUT)
        self.deadline.gone()
        self.lost.set()
        client, self._client = self._client, None
        if client is not None:
            try:
                if revoke:
                    with contextlib.suppress(CoordinationError):
                        await client.revoke(self.lease_id)
            finally:
                await client.close()

    # -- the lease thread --------------------------------------------------------------------------

    def _keep_alive(self, keeper: KeepAlives) -> None:
        """Send a keep-alive every ``retry_period`` (half of it after a failed one) until stopped, the
        lease is gone or the deadline passes; every wait, and each socket operation of a request,
        ends by the deadline, so ``lost`` is set when it passes even while etcd does not answer."""
        try:
            next_send = self._clock.monotonic() + self._timing.retry_period
            while self._wait_until(next_send):
                sent = self._clock.monotonic()
                timeout = min(self._rpc_timeout, max(self.remaining(), 0.01))
                try:
                    ttl = keeper.keep_alive(self.lease_id, timeout)
                except KeepAliveFailed as exc:
                    log.warning("lease keep-alive failed: %s", exc)
                    next_send = sent + self._timing.retry_period / 2
                    continue
                if ttl <= 0:
                    log.warning("lease %x is gone", self.lease_id)
                    return
                self.deadline.acknowledged(sent)
                next_send = sent + self._timing.retry_period
        finally:
            keeper.close()
            self.deadline.gone()
            self._mark_lost()

    def _wait_until(self, when: float) -> bool:
        """Sleep until monotonic ``when``; False when stopped meanwhile or the deadline passed first."""
        while True:
            now = self._clock.monotonic()
            if self._stop_requested.wait(max(0.0, min(when - now, self.remaining()))):
                return False
            if not self.deadline.valid:
                renew = self._timing.renew_deadline
                log.warning("lease %x: no keep-alive for %.2fs; stopping", self.lease_id, renew)
                return False
            if self._clock.monotonic() >= when:
                return True

    def _mark_lost(self) -> None:
        owner = self._owner
        if owner is not None:
            with contextlib.suppress(RuntimeError):  # the owner's loop is closed: nobody is waiting
                owner.call_soon_threadsafe(self.lost.set)
