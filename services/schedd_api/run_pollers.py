"""One database poller per watched run, shared by every stream watching it.

A :class:`RunPoller` reads its run when woken (a notification naming it, a new subscriber), at
least every ``RECHECK_SECONDS`` and at most every ``MIN_READ_INTERVAL`` (changes in between are
read together); each time the run differs from the last read, the new value is
handed to every subscriber (each keeps only the newest: a slow stream skips the states it missed,
never the final one). The poller ends after reading the run's final state, or when its read fails
(the error is handed to the subscribers, which raise it); its owner stops it when the last
subscriber leaves. Not guaranteed: that a subscriber sees every intermediate state.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

from schedd.v1 import resources_pb2 as pb

#: Longest a watched run goes unread.
RECHECK_SECONDS = 0.5
#: Shortest time between two reads of a watched run: a run whose tasks change hundreds of times a
#: second (a fast chain) is read at most this often, not once per change.
MIN_READ_INTERVAL = 0.05
FINAL = (pb.RUN_STATE_SUCCESS, pb.RUN_STATE_FAILED)

ReadRun = Callable[[], Awaitable[pb.DagRun]]


class Subscriber:
    """One stream's view of a poller: the newest run it has not taken yet."""

    def __init__(self) -> None:
        self._ready = asyncio.Event()
        self._run: pb.DagRun | None = None
        self._error: BaseException | None = None

    def offer(self, run: pb.DagRun) -> None:
        self._run = run
        self._ready.set()

    def fail(self, error: BaseException) -> None:
        self._error = error
        self._ready.set()

    async def take(self) -> pb.DagRun:
        """The newest run offered since the last take (waiting for one); the poller's error."""
        await self._ready.wait()
        self._ready.clear()
        if self._error is not None:
            raise self._error
        assert self._run is not None
        return self._run


class RunPoller:
    """Reads one run for its subscribers (see the module docstring); ``counted`` is called after
    each read (for the metric of reads)."""

    def __init__(self, read: ReadRun, counted: Callable[[], None]) -> None:
        self._read = read
        self._counted = counted
        self._wake = asyncio.Event()
        self._subscribers: set[Subscriber] = set()
        self._latest: pb.DagRun | None = None
        self._latest_encoded = b""
        self.failed = False
        self._task = asyncio.get_running_loop().create_task(self._poll())

    def subscribe(self) -> Subscriber:
        """A new subscriber, offered the newest run at once if there is one; the run is read again."""
        subscriber = Subscriber()
        self._subscribers.add(subscriber)
        if self._latest is not None:
            subscriber.offer(self._latest)
        self._wake.set()
        return subscriber

    def unsubscribe(self, subscriber: Subscriber) -> bool:
        """Forget ``subscriber``; whether it was the last one (the owner then calls :meth:`stop`)."""
        self._subscribers.discard(subscriber)
        return not self._subscribers

    def wake(self) -> None:
        """Read the run again now (a notification named it, or some may have been missed)."""
        self._wake.set()

    def stop(self) -> None:
        self._task.cancel()

    def when_done(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` once the poll loop has ended (the final state read, a failed read, or
        :meth:`stop`)."""
        self._task.add_done_callback(lambda _: callback())

    async def _poll(self) -> None:
        clock = asyncio.get_running_loop()
        last_read = clock.time() - MIN_READ_INTERVAL
        try:
            while True:
                self._wake.clear()
                # A lone change is read at once; changes that come faster are read together.
                await asyncio.sleep(max(0.0, last_read + MIN_READ_INTERVAL - clock.time()))
                last_read = clock.time()
                run = await self._read()
                self._counted()
                encoded = run.SerializeToString(deterministic=True)
                if encoded != self._latest_encoded:
                    self._latest, self._latest_encoded = run, encoded
                    for subscriber in self._subscribers:
                        subscriber.offer(run)
                if run.state in FINAL:
                    return
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), RECHECK_SECONDS)
        except Exception as exc:
            self.failed = True
            for subscriber in self._subscribers:
                subscriber.fail(exc)
