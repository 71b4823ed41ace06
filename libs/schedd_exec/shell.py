"""Running a shell command as one attempt.

The command runs under ``/bin/sh -c`` in a session (and so a process group) of its own with
the attempt's environment on top of the executor's task environment, never the caller's own
(``schedd_exec.environment``), and as its task user when there is one
(``schedd_exec.task_user``). Output (stdout and stderr, merged) is passed
to ``on_output`` as it arrives. The execution timeout, when set, is enforced: SIGTERM to the
process group, then SIGKILL after ``kill_grace``. Cancelling the coroutine stops the command
the same way. When the shell exits, whatever it left running in its group is killed: what a
task starts ends with it. With a ``reaper``, the group is watched by the worker's reaper process
while it runs (killed if the worker dies or can no longer vouch for it), and a group being
stopped is SIGKILLed by the reaper after the grace even if the worker freezes meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime

from schedd_exec.environment import TaskEnvironment
from schedd_exec.outcome import Outcome
from schedd_exec.reaper import Reaper

OUTPUT_TAIL_BYTES = 2000
READ_CHUNK = 64 * 1024


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
    proc = await asyncio.create_subprocess_exec(
        *base.command_prefix(death_signal=True),
        "/bin/sh",
        "-c",
        command,
        env=base.for_attempt(env),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        start_new_session=True,
    )
    if reaper is not None:
        reaper.watch(proc.pid)
    tail = bytearray()

    async def pump() -> None:
        assert proc.stdout is not None
        while chunk := await proc.stdout.read(READ_CHUNK):
            tail.extend(chunk)
            del tail[:-OUTPUT_TAIL_BYTES]
            if on_output is not None:
                on_output(chunk)
        await proc.wait()

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
    code = proc.returncode if proc.returncode is not None else -1
    text = tail.decode(errors="replace")
    reason = "" if code == 0 else _describe_exit(code)
    error = reason + (f"; output tail:\n{text}" if reason and text else "")
    return Outcome(code == 0, code, error, started, datetime.now(UTC), log_note=reason)


def _describe_exit(code: int) -> str:
    """``exit code 3``, or ``killed by SIGKILL`` for a shell ended by a signal."""
    if code >= 0:
        return f"exit code {code}"
    try:
        return f"killed by {signal.Signals(-code).name}"
    except ValueError:
        return f"killed by signal {-code}"


async def terminate(proc: asyncio.subprocess.Process, grace: float, reaper: Reaper | None = None) -> None:
    """SIGTERM the process group, then SIGKILL it after ``grace`` seconds (by the reaper too)."""
    if reaper is not None:
        reaper.kill_at(proc.pid, time.monotonic() + grace)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        await asyncio.wait_for(proc.wait(), grace)
    except TimeoutError:
        _kill_group(proc.pid)
        await proc.wait()


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
