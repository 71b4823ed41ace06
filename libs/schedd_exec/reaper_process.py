"""The reaper process (``python -m schedd_exec.reaper_process``), driven by ``schedd_exec.reaper``.

It reads lines on stdin: ``deadline <monotonic seconds>``, ``watch <pgid>``, ``forget <pgid>``,
``kill <pgid> <monotonic seconds>``, and SIGKILLs every watched group once the deadline passes, a
group given a kill time at that time, and everything still watched when stdin closes (its worker
died). ``time.monotonic`` is the system-wide CLOCK_MONOTONIC, the same in both processes. It
imports nothing but the standard library's os-level modules: one runs beside every worker.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import time

#: A deadline that never comes.
FAR = float("inf")


def _kill(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def serve(fd: int = 0) -> None:
    """Read commands from ``fd`` until EOF, killing groups as their time comes; then kill the rest."""
    deadline = FAR
    watched: set[int] = set()
    timed: dict[int, float] = {}
    buffer = b""
    while True:
        now = time.monotonic()
        if now >= deadline:
            for pgid in watched:
                _kill(pgid)
            watched.clear()
        for pgid, at in list(timed.items()):
            if now >= at:
                _kill(pgid)
                del timed[pgid]
        next_time = min([deadline, *timed.values()]) if (watched or timed) else FAR
        timeout = None if next_time == FAR else max(0.0, next_time - now)
        readable, _, _ = select.select([fd], [], [], timeout)
        if not readable:
            continue
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        buffer += chunk
        *lines, buffer = buffer.split(b"\n")
        for line in lines:
            verb, *args = line.decode().split()
            if verb == "deadline":
                deadline = float(args[0])
            elif verb == "watch":
                watched.add(int(args[0]))
                timed.pop(int(args[0]), None)
            elif verb == "forget":
                watched.discard(int(args[0]))
                timed.pop(int(args[0]), None)
            elif verb == "kill":
                watched.discard(int(args[0]))
                timed[int(args[0])] = float(args[1])
    for pgid in [*watched, *timed]:
        _kill(pgid)


def main() -> None:
    # Signals meant for the worker (a Ctrl-C in its terminal) must not stop the reaper.
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    serve()


if __name__ == "__main__":
    main()
