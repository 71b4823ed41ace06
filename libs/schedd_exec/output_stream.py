"""Passing on what a Python task writes to its output file while it runs.

A warm Python child writes its task's output to a file (``schedd_exec.python_pool``). An
:class:`OutputStream` reads what was added to that file every ``POLL_SECONDS`` while the task runs,
and the rest once it ended, and hands each new piece to a sink: what a task prints reaches its log
(and its line times) within a poll interval, not when the task ends. A task that ends within the
first interval costs one ``fstat`` of its empty file, as reading it at the end did.

Guaranteed: each byte the task wrote is passed on once and in order, up to ``limit`` bytes (the
rest is neither read nor passed on). Not guaranteed: how a piece is cut (a line may be split
between two pieces); output written after :meth:`OutputStream.finish` (by a process the task left
behind) is not passed on.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable

#: How often a running task's output is read.
POLL_SECONDS = 0.1
#: At most this many bytes are read at once.
READ_PIECE = 64 * 1024


class OutputStream:
    """Reads the output file ``fd`` (written from offset 0) into ``sink`` until finished."""

    def __init__(self, fd: int, sink: Callable[[bytes], None], limit: int) -> None:
        self._fd = fd
        self._sink = sink
        self._left = limit
        self._position = 0
        self._loop = asyncio.get_running_loop()
        self._timer: asyncio.TimerHandle | None = self._loop.call_later(POLL_SECONDS, self._tick)

    def _tick(self) -> None:
        self._read()
        self._timer = self._loop.call_later(POLL_SECONDS, self._tick)

    def _read(self) -> None:
        # Read only what is there: os.pread allocates as much as it is asked for.
        size = os.fstat(self._fd).st_size
        while self._left > 0 and self._position < size:
            data = os.pread(self._fd, min(READ_PIECE, self._left, size - self._position), self._position)
            if not data:
                return
            self._position += len(data)
            self._left -= len(data)
            self._sink(data)

    def stop(self) -> None:
        """Read no more."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def finish(self) -> None:
        """Pass on the rest of what the task wrote, and read no more."""
        if self._timer is not None:
            self.stop()
            self._read()
