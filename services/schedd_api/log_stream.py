"""Following a task's output: ``RunService.WatchTaskLogs`` streams an attempt's logs as they are written.

The stream waits for a task instance that has not started yet, or does not exist yet (a run not
planned, a mapped task not expanded), until its run ends: then NOT_FOUND says it never ran. A name
that can never mean a task instance of the run (an unknown task, a mapped task's plain id once
expanded) is NOT_FOUND at once. The stream follows one attempt (the one asked for, or the latest when
the stream starts its first read), and ends with a message whose ``complete`` is true after that
attempt has ended and its output was read once more a poll interval later (what is stored later
than that is not sent). A try after the latest is waited for while the task instance may still run
it (up for retry, queued), so a client follows a task through its retries one try after another.
Output is read again every ``POLL_SECONDS`` while the
attempt runs; each read is bounded by ``max_bytes``, and a backlog is sent in as many messages as it
takes. The client's deadline or cancellation ends the stream at any point.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Awaitable, Callable

from schedd_store.instance_lookup import NotStartedYet
from schedd_store.logs import LogSlice

#: How often a running attempt's output is read again.
POLL_SECONDS = 0.25

#: Reads logs: (try number, offset) -> the slice from there.
ReadLogs = Callable[[int, int], Awaitable[LogSlice]]
#: Whether the task's run has ended.
RunEnded = Callable[[], Awaitable[bool]]


async def follow_logs(
    read: ReadLogs, run_ended: RunEnded, *, try_number: int, offset: int
) -> AsyncIterator[LogSlice]:
    """The attempt's output from ``offset`` as it is written, ending with a ``complete`` slice."""
    first = await _first_read(read, run_ended, try_number, offset)
    number = first.try_number
    current = first
    ended_seen = False
    while True:
        if current.data:
            # Only the last message says complete: more may follow this one.
            yield dataclasses.replace(current, complete=False)
        if current.complete and not current.data:
            if ended_seen:
                yield current
                return
            # Output can be stored just after the attempt ended (a worker stores its output and its
            # result side by side): read once more, a poll interval later, before ending.
            ended_seen = True
            await asyncio.sleep(POLL_SECONDS)
        elif not current.data:
            await asyncio.sleep(POLL_SECONDS)
        current = await read(number, current.next_offset)


async def _first_read(read: ReadLogs, run_ended: RunEnded, try_number: int, offset: int) -> LogSlice:
    """The first slice, once the task instance has an attempt to read; NotFound once its run ends
    without one, or at once when the name means no task instance for good."""
    while True:
        try:
            return await read(try_number, offset)
        except NotStartedYet:
            if await run_ended():
                raise
        await asyncio.sleep(POLL_SECONDS)
