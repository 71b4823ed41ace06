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
        """Whether any group is watched (or due to be killed)."""
        return bool(self._watched)

    def watch(self, pgid: int) -> None:
        if self.before_watch is not None:
            self.before_watch()
        self._watched[pgid] = None
        self._send(f"watch {pgid}")

    def forget(self, pgid: int) -> None:
        if self._watched.pop(pgid, 0) != 0:
            self._send(f"forget {pgid}")

    def kill_at(self, pgid: int, at: float) -> None:
        """SIGKILL the group at monotonic time ``at``, whatever the deadline says by then."""
        self._watched[pgid] = at
        self._send(f"kill {pgid} {at}")

    def _send(self, line: str) -> None:
        proc = self._proc
        if proc is None or proc.stdin is None or proc.stdin.is_closing():
            return
        proc.stdin.write(line.encode() + b"\n")
