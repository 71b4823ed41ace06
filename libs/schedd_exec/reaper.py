"""The reaper: a small process beside a worker that kills the process groups of its attempts.

Every attempt runs in a process group of its own (a shell task's session, or the warm Python
child that runs it). The worker tells its reaper, over a pipe, which groups are running and the
*deadline* until which the worker may keep them running (``schedd_core.permits``: until its
registry or its lease stops vouching for it, plus its kill grace). The reaper, a separate
process in a session of its own, SIGKILLs

- every watched group once the deadline passes, even if the worker is frozen (SIGSTOP, a VM
  pause) or too busy to act;
- a group the worker asked to be killed at a given time (an attempt being stopped: SIGTERM
  first, this SIGKILL after the grace), whatever happens to the worker meanwhile;
- every watched group at once when the pipe closes: the worker died (even by SIGKILL), so
  the grandchildren of its tasks never outlive it and overlap a retry.

A warm Python child's group outlives its tasks. When a task ends the worker *releases* the group
instead of forgetting it: it stays watched, and nothing is sent; the next task the same child runs
(the pool reuses its most recently idle child) is watched already, so a reused child costs the
reaper no message and no wake-up. A group released longer than a refresh interval of the attempt
fence is forgotten then (:meth:`Reaper.settle`). Meanwhile it is killed like any watched group: an
idle child, at a deadline that stops every attempt anyway, and the pool replaces it. A group that
is gone (its process reaped) is forgotten at once, so a released group's id is never watched after
it could be reused.

Because the group is killed, everything a task started in its group ends with it. Not covered:
a process that left its group (``setsid``, a double fork into a new session), and the reaper
dying together with its worker (both at once is two faults). Protocol lines on stdin:
``deadline <monotonic seconds>``, ``watch <pgid>``, ``forget <pgid>``, ``kill <pgid> <monotonic
seconds>``. ``time.monotonic`` is the system-wide CLOCK_MONOTONIC, the same in both processes.

:class:`Reaper` starts the process (``python -m schedd_exec.reaper_process``, which imports
nothing of the worker's, so it stays small) and drives it.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import Callable

from schedd_exec.environment import AllowList
from schedd_exec.reaper_process import FAR


class Reaper:
    """The worker's end: starts the reaper process and tells it what to watch. Not thread-safe."""

    def __init__(self, python: str = sys.executable) -> None:
        self._python = python
        self._proc: asyncio.subprocess.Process | None = None
        self._deadline = FAR
        self._watched: dict[int, float | None] = {}
        #: Watched groups that run nothing now, and since when (monotonic): see :meth:`release`.
        self._released: dict[int, float] = {}
        #: Called before a group is watched, so that the deadline sent ahead of it is current
        #: (``schedd_exec.attempt_fence`` sets it; it stops refreshing while nothing is watched).
        self.before_watch: Callable[[], None] | None = None

    async def start(self) -> None:
        self._proc = await asyncio.create_subprocess_exec(
            self._python,
            "-m",
            "schedd_exec.reaper_process",
            stdin=asyncio.subprocess.PIPE,
            start_new_session=True,
            # What a program needs to run and nothing more: the reaper is as readable to tasks of the
            # worker's user as they are to each other, so it holds none of the worker's variables.
            env={key: value for key, value in os.environ.items() if AllowList().allows(key)},
        )
        self._send(f"deadline {self._deadline}")
        for pgid, at in self._watched.items():
            self._send(f"watch {pgid}" if at is None else f"kill {pgid} {at}")

    async def close(self) -> None:
        """Close the pipe (the reaper kills what is still watched, then exits) and wait for it."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.stdin is not None:
            proc.stdin.close()
        try:
            await asyncio.wait_for(proc.wait(), 5.0)
        except TimeoutError:
            proc.kill()
            await proc.wait()

    async def wait(self) -> int:
        """Wait until the reaper process exits; its exit status."""
        assert self._proc is not None, "the reaper was not started"
        return await self._proc.wait()

    def deadline(self, at: float) -> None:
        """Watched groups may run until monotonic time ``at``."""
        if at != self._deadline:
            self._deadline = at
            self._send(f"deadline {at}")

    @property
    def watching(self) -> bool:
        """Whether any group is watched (released ones included) or due to be killed."""
        return bool(self._watched)

    def watch(self, pgid: int) -> None:
        """Watch the group an attempt starts in. A released group is watched still: nothing is sent
        (the attempt fence kept refreshing the deadline meanwhile, as it does while anything is
        watched)."""
        if self._released.pop(pgid, None) is not None:
            return
        if self.before_watch is not None:
            self.before_watch()
        self._watched[pgid] = None
        self._send(f"watch {pgid}")

    def release(self, pgid: int) -> None:
        """The group's attempt ended and the group lives on (a warm child): it stays watched until
        :meth:`settle` or :meth:`forget`, so that its next attempt needs no message."""
        if pgid in self._watched and self._watched[pgid] is None:
            self._released[pgid] = time.monotonic()
        else:
            self.forget(pgid)

    def settle(self, idle_for: float) -> None:
        """Forget the groups released at least ``idle_for`` seconds ago."""
        cutoff = time.monotonic() - idle_for
        for pgid in [pgid for pgid, since in self._released.items() if since <= cutoff]:
            self.forget(pgid)

    def forget(self, pgid: int) -> None:
        """Stop watching the group now (it is gone, or runs nothing from now on)."""
        self._released.pop(pgid, None)
        if self._watched.pop(pgid, 0) != 0:
            self._send(f"forget {pgid}")

    def kill_at(self, pgid: int, at: float) -> None:
        """SIGKILL the group at monotonic time ``at``, whatever the deadline says by then."""
        self._released.pop(pgid, None)
        self._watched[pgid] = at
        self._send(f"kill {pgid} {at}")

    def _send(self, line: str) -> None:
        proc = self._proc
        if proc is None or proc.stdin is None or proc.stdin.is_closing():
            return
        proc.stdin.write(line.encode() + b"\n")
