"""Running one assignment in a subprocess.

Shell commands run under ``/bin/sh -c`` with the assignment's environment on
top of the worker's. The execution timeout, when set, is enforced: SIGTERM to
the process group, then SIGKILL after a grace period. Output is captured; its
tail goes into the result's error on failure.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from dataclasses import dataclass
from datetime import UTC, datetime

from schedd.v1 import worker_pb2

OUTPUT_TAIL_BYTES = 2000


@dataclass(frozen=True)
class Outcome:
    succeeded: bool
    exit_code: int
    error: str
    started_at: datetime
    ended_at: datetime


async def run_assignment(assignment: worker_pb2.Assignment, *, kill_grace: float) -> Outcome:
    started = datetime.now(UTC)
    action = assignment.WhichOneof("action")
    if action == "shell":
        argv = ["/bin/sh", "-c", assignment.shell.command]
    elif action == "python":
        module, _, func = assignment.python.target.partition(":")
        argv = [
            os.environ.get("SCHEDD_PYTHON", "python3"),
            "-c",
            f"import importlib; importlib.import_module({module!r}).{func}()",
        ]
    else:
        return Outcome(False, -1, "assignment has no action", started, datetime.now(UTC))
    env = {**os.environ, **dict(assignment.env)}
    proc = await asyncio.create_subprocess_exec(
        *argv,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        start_new_session=True,
    )
    timeout = (
        assignment.execution_timeout.ToTimedelta().total_seconds()
        if assignment.HasField("execution_timeout")
        else None
    )
    try:
        output, _ = await asyncio.wait_for(proc.communicate(), timeout)
    except TimeoutError:
        await _terminate(proc, kill_grace)
        return Outcome(False, -1, f"execution timeout of {timeout}s exceeded", started, datetime.now(UTC))
    except asyncio.CancelledError:
        await _terminate(proc, kill_grace)
        raise
    code = proc.returncode if proc.returncode is not None else -1
    tail = output[-OUTPUT_TAIL_BYTES:].decode(errors="replace") if output else ""
    error = "" if code == 0 else f"exit code {code}" + (f"; output tail:\n{tail}" if tail else "")
    return Outcome(code == 0, code, error, started, datetime.now(UTC))


async def _terminate(proc: asyncio.subprocess.Process, grace: float) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        await asyncio.wait_for(proc.wait(), grace)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        await proc.wait()
