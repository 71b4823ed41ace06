"""Following runs: ``RunService.WatchRun`` streams a run each time it changes, until it ends.

A watched run is read again as soon as a notification names it (a result, a manual change, a new
run: ``schedd_runs``) and at least every ``RECHECK_SECONDS`` otherwise, since the leader's own
transitions (a task queued, the run finished) send no notification on that channel. A message is
sent only when the run differs from the last one sent; the stream ends after the run's final
state has been sent, or when the client goes away. Reads are bounded: one GetRun per wake-up.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable

from schedd.v1 import resources_pb2 as pb
from schedd_store import channels

log = logging.getLogger(__name__)

#: Longest a watched run goes unread.
RECHECK_SECONDS = 0.5
FINAL = (pb.RUN_STATE_SUCCESS, pb.RUN_STATE_FAILED)


class RunWatchers:
    """The wake-up events of the runs being watched, set by notifications (see the module docstring)."""

    def __init__(self) -> None:
        self._events: dict[int, set[asyncio.Event]] = defaultdict(set)

    def notified(self, payload: str) -> None:
        try:
            changed = {run_pk for run_pk, _ in channels.decode_changes(payload)}
        except ValueError:
            log.warning("ignoring a malformed %s payload: %r", channels.RUNS, payload[:80])
            return
        for run_pk in changed & self._events.keys():
            for event in self._events[run_pk]:
                event.set()

    async def reconnected(self) -> None:
        """Notifications may have been missed: wake every watcher."""
        for events in self._events.values():
            for event in events:
                event.set()

    async def follow(self, run_pk: int, read: Callable[[], Awaitable[pb.DagRun]]) -> AsyncIterator[pb.DagRun]:
        """The run as ``read`` returns it, each time it changed, ending with its final state."""
        event = asyncio.Event()
        self._events[run_pk].add(event)
        try:
            last: bytes | None = None
            while True:
                event.clear()
                run = await read()
                encoded = run.SerializeToString(deterministic=True)
                if encoded != last:
                    yield run
                    last = encoded
                if run.state in FINAL:
                    return
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(event.wait(), RECHECK_SECONDS)
        finally:
            self._events[run_pk].discard(event)
            if not self._events[run_pk]:
                del self._events[run_pk]
