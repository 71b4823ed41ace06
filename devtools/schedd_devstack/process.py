"""One schedd service as a child process (:class:`ServiceProcess`), for :mod:`schedd_devstack.services`.

A process has its output appended to a log file; it can be started, stopped gracefully (SIGTERM, a
bounded wait, then SIGKILL), crashed (SIGKILL), frozen and thawed (SIGSTOP / SIGCONT). Not
guaranteed: anything about what the service does once started (the cluster waits for that).
"""

from __future__ import annotations

import contextlib
import pwd
import shutil
import signal
import subprocess
import time
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from pathlib import Path

from schedd_devstack._process import (
    die_with_parent_prefix,
    kill_group,
    read_tail,
    register_running,
    unregister_running,
)
from schedd_devstack.binaries import DevstackError

__all__ = ["ClusterError", "ServiceProcess", "terminate_all"]

DEFAULT_STOP_TIMEOUT = 10.0
LOG_TAIL_BYTES = 4000
#: What a service logs when the address it was given is taken (gRPC's and the HTTP servers' words).
_BIND_FAILURE_MARKERS = ("cannot listen on", "address already in use")


class ClusterError(DevstackError):
    """A schedd service could not be started, did not become ready in time, or died."""


class ServiceProcess:
    """One service as a child process, with stdout and stderr appended to ``log_dir/NAME.log``.

    The child runs in its own session (process group), so a Ctrl-C in the terminal
    reaches only the parent, which then stops its children in order; and, when
    ``setpriv`` is available and we are on the main thread, it gets SIGTERM if the
    parent dies without stopping it. Not thread-safe.
    """

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        *,
        env: Mapping[str, str],
        log_dir: Path,
        cwd: Path | None = None,
        stop_timeout: float = DEFAULT_STOP_TIMEOUT,
        user: str = "",
    ) -> None:
        self.name = name
        self.argv = list(argv)
        self.env = dict(env)
        #: run as this user (its uid, primary group and groups) rather than ours; needs root
        self.user = user
        self.log_dir = Path(log_dir)
        self.cwd = cwd
        self.stop_timeout = stop_timeout
        self._proc: subprocess.Popen[bytes] | None = None
        self._log_offset = 0
        self._paused = False
        self._term_sent = False
        #: monotonic time of the latest start
        self.started_at: float | None = None
        #: set by terminate() and kill(): the process was ended on purpose, not by a crash
        self.stopped = False

    def __repr__(self) -> str:
        state = "alive" if self.alive else f"exited {self.returncode}" if self._proc else "not started"
        return f"<ServiceProcess {self.name} pid={self.pid} {state}>"

    @property
    def log_path(self) -> Path:
        """Appended to across restarts; each start writes a ``--- start ...`` header line."""
        return self.log_dir / f"{self.name}.log"

    @property
    def pid(self) -> int | None:
        """The service's own PID (it stays set after the process exits), None before ``start``."""
        return None if self._proc is None else self._proc.pid

    @property
    def alive(self) -> bool:
        """True while the process has not exited (a paused process is alive)."""
        return self._proc is not None and self._proc.poll() is None

    @property
    def returncode(self) -> int | None:
        """The exit status once exited (negative: killed by that signal), else None."""
        return None if self._proc is None else self._proc.poll()

    @property
    def paused(self) -> bool:
        return self._paused and self.alive

    def start(self) -> None:
        """Start the process; raises :class:`ClusterError` if it is already running or cannot be run."""
        if self.alive:
            raise ClusterError(f"{self.name} is already running (pid {self.pid})")
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self._log_offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        cmd = [*self._prefix(), *self.argv]
        with self.log_path.open("ab") as log:
            log.write(f"--- start {datetime.now().isoformat(timespec='seconds')}: {' '.join(cmd)}\n".encode())
            log.flush()
            try:
                self._proc = subprocess.Popen(
                    cmd,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=self.env,
                    cwd=self.cwd,
                    start_new_session=True,
                )
            except OSError as exc:
                raise ClusterError(f"cannot start {self.name} ({' '.join(self.argv)}): {exc}") from exc
        self._paused = False
        self._term_sent = False
        self.stopped = False
        self.started_at = time.monotonic()
        register_running(self, self._stop_at_exit)

    def terminate(self, timeout: float | None = None) -> int | None:
        """SIGTERM, wait up to ``timeout`` (default ``stop_timeout``) seconds, then SIGKILL.

        A paused process is resumed after the SIGTERM so that it can act on it.
        Returns the exit status (None if never started). Idempotent.
        """
        self.request_stop()
        return self.wait_or_kill(self.stop_timeout if timeout is None else timeout)

    def request_stop(self) -> None:
        """Send SIGTERM once (plus SIGCONT when paused) without waiting; see :meth:`wait_or_kill`."""
        if self.alive and not self._term_sent:
            self._signal(signal.SIGTERM)
            self._term_sent = True
            if self._paused:
                self._signal(signal.SIGCONT)
                self._paused = False

    def wait_or_kill(self, timeout: float) -> int | None:
        """Wait up to ``timeout`` seconds for the process to exit, then SIGKILL its group; reap it."""
        proc = self._proc
        if proc is None:
            return None
        try:
            try:
                proc.wait(timeout=max(timeout, 0.0))
            except subprocess.TimeoutExpired:
                kill_group(proc)
            if proc.poll() is None:
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired as exc:
                    raise ClusterError(f"{self.name} (pid {proc.pid}) outlived SIGKILL by 30 s") from exc
        finally:
            self._paused = False
            self.stopped = True
            unregister_running(self)
        return proc.poll()

    def kill(self) -> int | None:
        """SIGKILL the process (and its process group), as a crash would, and reap it."""
        proc = self._proc
        if proc is None:
            return None
        try:
            kill_group(proc)
            proc.wait(timeout=30)
        finally:
            self._paused = False
            self.stopped = True
            unregister_running(self)
        return proc.poll()

    def pause(self) -> None:
        """SIGSTOP: the process freezes (its sockets stay open) until :meth:`resume`."""
        self._require_alive("pause")
        self._signal(signal.SIGSTOP)
        self._paused = True

    def resume(self) -> None:
        """SIGCONT a paused process."""
        self._require_alive("resume")
        self._signal(signal.SIGCONT)
        self._paused = False

    def send_signal(self, sig: signal.Signals) -> None:
        """Send ``sig`` to the process if it is alive (no wait)."""
        if self.alive:
            self._signal(sig)

    def wait(self, timeout: float) -> int | None:
        """Wait up to ``timeout`` seconds for the process to exit; its status, or None if still alive."""
        if self._proc is None:
            return None
        try:
            return self._proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def log_tail(self, max_bytes: int = LOG_TAIL_BYTES) -> str:
        """The last ``max_bytes`` of what this process logged since its latest start."""
        return read_tail(self.log_path, self._log_offset, max_bytes)

    def lost_its_port(self) -> bool:
        """True when the process exited because an address it was to listen on was taken (another
        process bound the port after it was picked): then it may be started again on new ports."""
        return not self.alive and any(m in self.log_tail().lower() for m in _BIND_FAILURE_MARKERS)

    def describe_failure(self, what: str) -> str:
        """``what`` plus the process state and its log tail, for error messages."""
        status = "still running" if self.alive else f"exited with status {self.returncode}"
        tail = self.log_tail().rstrip() or "(empty)"
        return f"{what} ({self.name}, pid {self.pid}, {status}; log {self.log_path}):\n{tail}"

    def _prefix(self) -> list[str]:
        prefix = die_with_parent_prefix("TERM")
        if not self.user:
            return prefix
        # One setpriv changes the user and then sets the death signal: a change of user clears it.
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            raise ClusterError(f"cannot start {self.name} as {self.user!r}: setpriv is missing")
        gid = pwd.getpwnam(self.user).pw_gid
        return [setpriv, f"--reuid={self.user}", f"--regid={gid}", "--init-groups", *prefix[1:-1], "--"]

    def _stop_at_exit(self) -> None:
        self.terminate(min(self.stop_timeout, 5.0))

    def _require_alive(self, action: str) -> None:
        if not self.alive:
            raise ClusterError(f"cannot {action} {self.name}: it is not running")

    def _signal(self, sig: signal.Signals) -> None:
        assert self._proc is not None
        with contextlib.suppress(ProcessLookupError):
            self._proc.send_signal(sig)


def terminate_all(processes: Iterable[ServiceProcess], timeout: float = DEFAULT_STOP_TIMEOUT) -> None:
    """Stop several processes at once: SIGTERM to all, then wait for each within one shared deadline,
    SIGKILLing whoever is left when it passes."""
    procs = [p for p in processes if p.alive]
    for p in procs:
        p.request_stop()
    deadline = time.monotonic() + timeout
    for p in procs:
        p.wait_or_kill(deadline - time.monotonic())
