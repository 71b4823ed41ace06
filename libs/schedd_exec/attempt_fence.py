"""The executing side of attempt fencing: stop every attempt when the permit lapses.

The :class:`~schedd_core.permits.Permit` says until when a worker (or a scheduler's local
executor) may keep running its attempts (its registry acknowledged a recent heartbeat, or its
etcd liveness lease is valid, within the silence cap). :class:`AttemptFence` keeps the reaper's
deadline at that time plus the kill grace, refreshed at least every half heartbeat interval while
an attempt runs or a group is watched (so a frozen worker's reaper kills its attempts at most one
kill grace after the permit lapsed), and, when the permit lapses, stops every running attempt
(SIGTERM now, SIGKILL after the grace) and reports them abandoned: they run again elsewhere
without using up a retry.

Each refresh also forgets the groups of warm children released (``Reaper.release``) at least a
refresh interval earlier, so an idle worker's fence goes to sleep a refresh or two after its last
attempt. While nothing runs and nothing is watched there is nothing to stop or kill, so it sleeps until
poked (an ack, the lease) or until a group is about to be watched: the reaper asks for a current
deadline first (``Reaper.before_watch``), so no group is ever watched under a stale one
(``tests/unit/test_attempt_fence.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from schedd_core.clock import Clock
from schedd_core.permits import Permit
from schedd_exec.reaper import Reaper

log = logging.getLogger(__name__)


class AttemptFence:
    def __init__(
        self,
        permit: Permit,
        reaper: Reaper,
        clock: Clock,
        *,
        running: Callable[[], int],
        stop_all: Callable[[str], None],
    ) -> None:
        self._permit = permit
        self._reaper = reaper
        self._clock = clock
        self._running = running
        self._stop_all = stop_all
        self._changed = asyncio.Event()
        self._asleep = False
        reaper.before_watch = self._watching_starts

    def poke(self) -> None:
        """Something the permit depends on changed (an ack, the lease)."""
        self._changed.set()

    def _watching_starts(self) -> None:
        self._send_deadline()
        if self._asleep:  # refresh it periodically again (while refreshing already, costs nothing)
            self._changed.set()

    def _send_deadline(self) -> float:
        until = self._permit.until()
        self._reaper.deadline(until + self._permit.kill_grace)
        return until

    async def run(self) -> None:
        lapsed = False
        while True:
            until = self._send_deadline()
            left = until - self._clock.monotonic()
            if left <= 0 and not lapsed:
                lapsed = True
                if self._running():
                    log.warning(
                        "no heartbeat acknowledged and no liveness lease for too long: stopping %d attempts",
                        self._running(),
                    )
                    self._stop_all("the worker could no longer be sure it was heard")
            elif left > 0:
                lapsed = False
            refresh = self._permit.windows.heartbeat_interval / 2
            self._reaper.settle(refresh)  # warm children idle since the last refresh or longer
            timeout: float | None = refresh if left <= 0 else min(left, refresh)
            if not self._running() and not self._reaper.watching:
                timeout = None  # nothing to stop or kill: wait to be poked
            self._asleep = timeout is None
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), timeout)
            self._asleep = False
            self._changed.clear()
