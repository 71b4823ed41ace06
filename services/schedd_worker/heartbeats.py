"""When a worker heartbeats: every heartbeat interval while it holds attempts, every idle interval
while it holds none, and at once when asked.

A heartbeat's acknowledgement keeps the worker's permit to start attempts (``schedd_core.permits``:
an ack within the ack window) and tells the registry which attempts the worker holds. A worker that
holds none needs neither often, so an idle stack sleeps: its permit may lapse, and an assignment
that then arrives asks for a heartbeat at once and waits for its ack
(``schedd_worker.held_assignments``).

Guaranteed: while the worker holds an attempt, a heartbeat is sent at least every heartbeat interval
after the previous one (plus the event loop's delay), also when it became busy in the middle of an
idle interval; the first heartbeat due after it stopped holding attempts still goes one heartbeat
interval after the last, so its registry learns within one interval that it is idle and waits for
its idle heartbeats instead of taking it for silent (``AttemptWindows.silent_after``); an idle
worker heartbeats at least every idle interval. Not guaranteed: anything while the event loop is
blocked (the permit and the reaper cover that).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

from schedd_core.permits import AttemptWindows


class HeartbeatCadence:
    """Decides when the next heartbeat goes; :meth:`run` sends them."""

    def __init__(self, busy: Callable[[], bool], windows: Callable[[], AttemptWindows]) -> None:
        """``busy()``: whether the worker holds an attempt (running, held, or with a result not yet
        acknowledged); ``windows()``: the timing its registry granted."""
        self._busy = busy
        self._windows = windows
        self._wake = asyncio.Event()
        self._asked = False
        self._sleeping_idle = False

    def now(self) -> None:
        """Send the next heartbeat at once."""
        self._asked = True
        self._wake.set()

    def became_busy(self) -> None:
        """The worker took an attempt: a heartbeat waiting out an idle interval is due one heartbeat
        interval after the last instead. Costs nothing while the worker was busy already."""
        if self._sleeping_idle:
            self._wake.set()

    async def run(self, beat: Callable[[], None]) -> None:
        """Call ``beat()`` (send a heartbeat) now and whenever the next one is due, until cancelled."""
        loop = asyncio.get_running_loop()
        while True:
            self._asked = False
            sent_busy = self._busy()
            beat()
            sent = loop.time()
            while not self._asked:
                busy = self._busy()
                windows = self._windows()
                # the first beat after the worker turned idle is due as a busy one: it says so
                short = busy or sent_busy
                interval = windows.heartbeat_interval if short else windows.idle_heartbeat_interval
                remaining = sent + interval - loop.time()
                if remaining <= 0:
                    break
                self._sleeping_idle = not short
                self._wake.clear()
                try:
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(remaining):
                            await self._wake.wait()
                finally:
                    self._sleeping_idle = False
