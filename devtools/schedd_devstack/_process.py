"""Process plumbing shared by the local server starters (private to this package)."""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import shutil
import signal
import subprocess
import threading
from collections.abc import Callable, Coroutine, Iterable
from pathlib import Path
from typing import Any, TypeVar

from schedd_devstack.binaries import DevstackError

T = TypeVar("T")

LOG_TAIL_BYTES = 4000


def child_env(strip_prefixes: Iterable[str]) -> dict[str, str]:
    """This process's environment without variables that would reconfigure the child server."""
    prefixes = tuple(strip_prefixes)
    return {k: v for k, v in os.environ.items() if not k.startswith(prefixes)}


def die_with_parent_prefix(signame: str) -> list[str]:
    """A command prefix that makes the child receive ``signame`` if this process dies.

    Uses ``setpriv --pdeathsig`` (util-linux), which sets the parent-death signal
    and then execs the real program, so the child PID stays the server's PID.
    Linux delivers that signal when the *thread* that started the child exits,
    so it is only armed when called from the main thread; from any other thread,
    and where ``setpriv`` is missing, the prefix is empty and a child can outlive
    a crashed parent. It is a safety net for parents killed with SIGKILL; a
    normal exit stops the servers through ``stop()`` or the atexit hook.
    """
    if threading.current_thread() is not threading.main_thread():
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        return []
    return [setpriv, f"--pdeathsig={signame}", "--"]


def read_tail(path: Path, offset: int = 0, max_bytes: int = LOG_TAIL_BYTES) -> str:
    """The last ``max_bytes`` of ``path`` written after byte ``offset``; empty if unreadable."""
    try:
        with path.open("rb") as f:
            size = f.seek(0, os.SEEK_END)
            f.seek(max(offset, size - max_bytes))
            return f.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the process group led by ``proc`` (it must have been started with a new session)."""
    if proc.poll() is not None:
        return
    # The leader is not reaped yet, so its PID still names our process group.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


def stop_process(proc: subprocess.Popen[bytes], sig: signal.Signals, timeout: float) -> None:
    """Send ``sig`` to ``proc``, wait up to ``timeout`` seconds, then SIGKILL its group and reap it.

    Returns once the process has exited and been reaped (a SIGKILLed process
    always exits, so the final wait is bounded too).
    """
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(sig)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_group(proc)
    if proc.poll() is None:
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired as exc:
            raise DevstackError(f"process {proc.pid} did not exit 30 s after SIGKILL") from exc


def run_coroutine_sync(factory: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run the coroutine made by ``factory`` to completion on a fresh event loop in a helper thread.

    Safe to call whether or not the calling thread has an event loop (running or
    merely set): that loop is neither used nor replaced. Exceptions propagate.
    """
    result: list[T] = []
    error: list[BaseException] = []

    def target() -> None:
        try:
            result.append(asyncio.run(factory()))
        except BaseException as exc:
            error.append(exc)

    thread = threading.Thread(target=target, name="schedd-devstack-async", daemon=True)
    thread.start()
    thread.join()
    if error:
        raise error[0]
    return result[0]


_running: dict[int, Callable[[], None]] = {}
_running_lock = threading.Lock()


def register_running(owner: object, stop: Callable[[], None]) -> None:
    """Remember a started server so the atexit hook stops it if its owner never does."""
    with _running_lock:
        _running[id(owner)] = stop


def unregister_running(owner: object) -> None:
    with _running_lock:
        _running.pop(id(owner), None)


@atexit.register
def _stop_all_at_exit() -> None:
    with _running_lock:
        stops = list(_running.values())
        _running.clear()
    for stop in stops:
        with contextlib.suppress(Exception):
            stop()
