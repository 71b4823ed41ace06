"""Running a shell command as one attempt.

The command runs under ``/bin/sh -c`` in a session (and so a process group) of its own with
the attempt's environment on top of the executor's task environment, never the caller's own
(``schedd_exec.environment``), and as its task user when there is one
(``schedd_exec.task_user``). Output (stdout and stderr, merged) is passed
to ``on_output`` as it arrives. The execution timeout, when set, is enforced: SIGTERM to the
process group, then SIGKILL after ``kill_grace``. Cancelling the coroutine stops the command
the same way. When the shell exits, whatever it left running in its group is killed: what a
task starts ends with it.

With a ``reaper`` (every executor has one), the group is watched by the worker's reaper process
from the moment the shell has been started, before anything else runs in the worker: it is
killed if the worker dies (even by SIGKILL) or can no longer vouch for it, and a group being
stopped is SIGKILLed by the reaper after the grace even if the worker freezes meanwhile. Without
a reaper the shell gets the parent-death signal instead (``schedd_exec.deathsig``), which costs
an extra program's start (about 1 ms of CPU a task here) and covers the shell alone, not what it
starts. Not covered: the worker dying inside the start itself, between the fork and the exec
(with the death signal, until the signal is set), and the worker and its reaper dying at once.

The shell's exit is awaited through a pidfd where the platform has one, so a task costs no
thread (asyncio's default child watcher starts one per process); elsewhere a thread waits.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime

from schedd_exec.environment import TaskEnvironment
from schedd_exec.outcome import Outcome
from schedd_exec.reaper import Reaper

OUTPUT_TAIL_BYTES = 2000


class _Output(asyncio.Protocol):
    """The shell's merged output: kept as a tail, passed on as it arrives, done at end of file."""

    def __init__(self, on_output: Callable[[bytes], None] | None, done: asyncio.Future[None]) -> None:
        self.tail = bytearray()
        self._on_output = on_output
        self._done = done

    def data_received(self, data: bytes) -> None:
        self.tail.extend(data)
        del self.tail[:-OUTPUT_TAIL_BYTES]
        if self._on_output is not None:
            self._on_output(data)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self._done.done():
            self._done.set_result(None)


async def run_shell(
    command: str,
    *,
    env: Mapping[str, str],
    timeout: float | None,
    kill_grace: float,
    on_output: Callable[[bytes], None] | None = None,
    reaper: Reaper | None = None,
    environment: TaskEnvironment | None = None,
) -> Outcome:
    """Run ``command``; ``environment`` defaults to the allowed part of this process's environment."""
    base = environment if environment is not None else TaskEnvironment.from_environ(os.environ)
    started = datetime.now(UTC)
    # The same fork and exec that asyncio's create_subprocess_exec runs on the loop, done here so
    # that the reaper is told of the group before anything else runs in this process.
    proc = subprocess.Popen(  # noqa: ASYNC220
        (*base.command_prefix(death_signal=reaper is None), "/bin/sh", "-c", command),
        bufsize=0,
        env=base.for_attempt(env),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    if reaper is not None:
        reaper.watch(proc.pid)
    loop = asyncio.get_running_loop()
    output_ended: asyncio.Future[None] = loop.create_future()
    output = _Output(on_output, output_ended)
    transport: asyncio.ReadTransport | None = None

    async def pump() -> None:
        nonlocal transport
        transport, _ = await loop.connect_read_pipe(lambda: output, proc.stdout)
        await output_ended
        await _exited(proc)

    try:
        await asyncio.wait_for(pump(), timeout)
    except TimeoutError:
        await terminate(proc, kill_grace, reaper)
        return Outcome(False, -1, f"execution timeout of {timeout:g}s exceeded", started, datetime.now(UTC))
    except asyncio.CancelledError:
        await terminate(proc, kill_grace, reaper)
        raise
    finally:
        _kill_group(proc.pid)  # whatever the command left running in its group
        if reaper is not None:
            reaper.forget(proc.pid)
        if transport is not None:
            transport.close()
        elif proc.stdout is not None:
            proc.stdout.close()
    code = proc.returncode if proc.returncode is not None else -1
    text = output.tail.decode(errors="replace")
    reason = "" if code == 0 else _describe_exit(code)
    error = reason + (f"; output tail:\n{text}" if reason and text else "")
    return Outcome(code == 0, code, error, started, datetime.now(UTC), log_note=reason)


async def _exited(proc: subprocess.Popen[bytes]) -> int:
    """Wait for ``proc`` to exit, reap it and return its status: readable on its pidfd, or in a thread."""
    try:
        pidfd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):  # no pidfds here, or the process is reaped already
        return await asyncio.to_thread(proc.wait)
    loop = asyncio.get_running_loop()
    readable: asyncio.Future[None] = loop.create_future()

    def exited() -> None:
        if not readable.done():
            readable.set_result(None)

    loop.add_reader(pidfd, exited)
    try:
        await readable
    finally:
        loop.remove_reader(pidfd)
        os.close(pidfd)
    return proc.wait()


def _describe_exit(code: int) -> str:
    """``exit code 3``, or ``killed by SIGKILL`` for a shell ended by a signal."""
    if code >= 0:
        return f"exit code {code}"
    try:
        return f"killed by {signal.Signals(-code).name}"
    except ValueError:
        return f"killed by signal {-code}"


async def terminate(proc: subprocess.Popen[bytes], grace: float, reaper: Reaper | None = None) -> None:
    """SIGTERM the process group, then SIGKILL it after ``grace`` seconds (by the reaper too)."""
    if reaper is not None:
        reaper.kill_at(proc.pid, time.monotonic() + grace)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        await asyncio.wait_for(_exited(proc), grace)
    except TimeoutError:
        _kill_group(proc.pid)
        await _exited(proc)


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
