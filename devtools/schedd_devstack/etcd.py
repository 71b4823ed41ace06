"""Run a private single-member etcd as a local child process.

:class:`LocalEtcd` owns one etcd process with its data in ``base_dir/etcd``.
Guarantees while :attr:`LocalEtcd.running`:

* client and peer URLs are plain HTTP on 127.0.0.1, on ports picked by
  ``schedd_devstack.ports``; the member has answered ``/health`` with ``"health": "true"``, so it
  has elected itself leader and serves reads and writes;
* heartbeat and election timing are etcd's defaults (100 ms / 1000 ms), so
  lease and leader-election behaviour matches a real deployment;
* :attr:`LocalEtcd.pid` is etcd's own PID: :meth:`LocalEtcd.kill` crashes the
  member, and a later :meth:`LocalEtcd.start` on the same ``base_dir`` restarts
  it with its data, on the same ports when they are still free.

With ``auth``, the member has authentication on once ``start`` returns: the users of
:mod:`schedd_coord.access` exist with the passwords in :attr:`LocalEtcd.credentials`
(``base_dir/etcd-credentials``, kept across restarts). ``auth_token_ttl`` sets etcd's
``--auth-token-ttl`` (seconds a token lives unused; etcd's default is 300).

Not guaranteed: durability with ``durable=False`` (``--unsafe-no-fsync``, when
the binary supports it: fine for tests, a host crash loses writes), nor that
the ports survive a restart (when one was taken meanwhile, new ones are picked
and :attr:`LocalEtcd.endpoint` changes).
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import signal
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

from schedd_devstack._process import (
    child_env,
    die_with_parent_prefix,
    kill_group,
    read_tail,
    register_running,
    stop_process,
    unregister_running,
)
from schedd_devstack.binaries import DevstackError, find_etcd
from schedd_devstack.etcd_access import EtcdCredentials
from schedd_devstack.ports import LOCALHOST, free_port, port_is_free

_LOG = logging.getLogger(__name__)

_START_ATTEMPTS = 3
_ABORT_TIMEOUT = 10.0  # graceful stop of an etcd whose start-up failed or was interrupted
_BIND_FAILURE_MARKERS = ("address already in use",)


class _PortTaken(Exception):
    """etcd exited because a port was grabbed between probe and bind."""


@functools.cache
def _supports_unsafe_no_fsync(binary: str) -> bool:
    try:
        out = subprocess.run([binary, "--help"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return False
    return "--unsafe-no-fsync" in out.stdout + out.stderr


def _healthy(client_url: str, timeout: float) -> bool:
    try:
        with urllib.request.urlopen(f"{client_url}/health", timeout=timeout) as response:
            body = json.loads(response.read())
    except (OSError, ValueError):
        return False
    return isinstance(body, dict) and body.get("health") == "true"


class LocalEtcd:
    """One private etcd member; see the module docstring for what it guarantees.

    Not thread-safe: call ``start``/``stop``/``kill`` from one thread.
    """

    def __init__(
        self,
        *,
        name: str = "schedd-devstack",
        startup_timeout: float = 30.0,
        stop_timeout: float = 15.0,
        auth: bool = False,
        auth_token_ttl: int | None = None,
    ) -> None:
        self._name = name
        self._auth = auth
        self._auth_token_ttl = auth_token_ttl
        #: the password files of etcd's users (None without ``auth``); set by ``start``
        self.credentials: EtcdCredentials | None = None
        self._startup_timeout = startup_timeout
        self._stop_timeout = stop_timeout
        self._proc: subprocess.Popen[bytes] | None = None
        self._client_port: int | None = None
        self._peer_port: int | None = None
        self._base_dir: Path | None = None

    # -- properties ---------------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        """True while the etcd process we started has not exited."""
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        """etcd's PID, or None when not started (stays set after it dies until stop/kill)."""
        return None if self._proc is None else self._proc.pid

    @property
    def port(self) -> int:
        """The client port of the last start. Raises DevstackError before the first start."""
        if self._client_port is None:
            raise DevstackError("LocalEtcd has not been started")
        return self._client_port

    @property
    def peer_port(self) -> int:
        if self._peer_port is None:
            raise DevstackError("LocalEtcd has not been started")
        return self._peer_port

    @property
    def endpoint(self) -> str:
        """``"127.0.0.1:PORT"``, the form ``SCHEDD_ETCD_ENDPOINTS`` takes."""
        return f"{LOCALHOST}:{self.port}"

    @property
    def client_url(self) -> str:
        return f"http://{self.endpoint}"

    @property
    def base_dir(self) -> Path:
        if self._base_dir is None:
            raise DevstackError("LocalEtcd has not been started")
        return self._base_dir

    @property
    def data_dir(self) -> Path:
        return self.base_dir / "etcd"

    @property
    def log_path(self) -> Path:
        """etcd's stderr, appended to across restarts."""
        return self.base_dir / "etcd.log"

    # -- lifecycle ----------------------------------------------------------------------------------

    def start(self, base_dir: Path, *, durable: bool = True) -> None:
        """Start etcd with its data in ``base_dir/etcd`` and wait until ``/health`` says true.

        Blocks at most about ``startup_timeout`` seconds. On failure or
        interruption the half-started etcd is stopped (SIGTERM, SIGKILL after
        10 s) before the exception propagates; a :class:`DevstackError` carries
        the tail of :attr:`log_path`.
        """
        if self.running:
            raise DevstackError(f"etcd is already running (pid {self.pid})")
        self._release()
        binary = find_etcd()
        base_dir = Path(base_dir).resolve()
        base_dir.mkdir(parents=True, exist_ok=True)
        if self._base_dir != base_dir:
            self._client_port = self._peer_port = None
        self._base_dir = base_dir

        deadline = time.monotonic() + self._startup_timeout
        for attempt in range(1, _START_ATTEMPTS + 1):
            self._client_port = self._reuse_or_pick(self._client_port)
            self._peer_port = self._reuse_or_pick(self._peer_port, avoid=self._client_port)
            try:
                self._launch_and_wait(binary, durable, deadline)
            except _PortTaken:
                _LOG.info("an etcd port was taken before etcd bound it (attempt %d)", attempt)
                self._client_port = self._peer_port = None
                continue
            if self._auth:
                self._provision()
            return
        raise DevstackError(
            f"etcd could not bind free ports in {_START_ATTEMPTS} attempts; log: {self.log_path}"
        )

    def _provision(self) -> None:
        """Set up etcd's users and turn authentication on; on failure stop etcd and re-raise."""
        try:
            credentials = EtcdCredentials(self.base_dir / "etcd-credentials")
            credentials.provision(self.endpoint)
        except BaseException:
            self.stop()
            raise
        self.credentials = credentials

    def stop(self) -> None:
        """SIGTERM, bounded by ``stop_timeout``, then SIGKILL. Idempotent; the data is kept."""
        proc = self._proc
        try:
            if proc is not None:
                stop_process(proc, signal.SIGTERM, self._stop_timeout)
        finally:
            self._release()

    def kill(self) -> None:
        """SIGKILL etcd (a crash) and reap it. The data is kept; ``start`` again to recover."""
        proc = self._proc
        try:
            if proc is not None:
                kill_group(proc)
                proc.wait(timeout=30)
        finally:
            self._release()

    # -- internals ----------------------------------------------------------------------------------

    def _release(self) -> None:
        self._proc = None
        unregister_running(self)

    @staticmethod
    def _reuse_or_pick(previous: int | None, avoid: int | None = None) -> int:
        if previous is not None and previous != avoid and port_is_free(previous):
            return previous
        while True:
            port = free_port()
            if port != avoid:
                return port

    def _launch_and_wait(self, binary: Path, durable: bool, deadline: float) -> None:
        peer_url = f"http://{LOCALHOST}:{self.peer_port}"
        cmd = [
            *die_with_parent_prefix("TERM"),
            str(binary),
            f"--name={self._name}",
            f"--data-dir={self.data_dir}",
            f"--listen-client-urls={self.client_url}",
            f"--advertise-client-urls={self.client_url}",
            f"--listen-peer-urls={peer_url}",
            f"--initial-advertise-peer-urls={peer_url}",
            f"--initial-cluster={self._name}={peer_url}",
            "--initial-cluster-state=new",
        ]
        if self._auth_token_ttl is not None:
            cmd.append(f"--auth-token-ttl={self._auth_token_ttl}")
        if not durable and _supports_unsafe_no_fsync(str(binary)):
            cmd.append("--unsafe-no-fsync")

        offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        with self.log_path.open("ab") as log:
            log.write(f"--- {' '.join(cmd)}\n".encode())
            log.flush()
            proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.base_dir,
                env=child_env(["ETCD_", "ETCDCTL_"]),
                start_new_session=True,
            )
        self._proc = proc
        register_running(self, self.stop)
        try:
            self._wait_healthy(proc, deadline)
        except BaseException as exc:
            exited_by_itself = proc.poll() is not None
            with contextlib.suppress(DevstackError):
                stop_process(proc, signal.SIGTERM, _ABORT_TIMEOUT)
            self._release()
            if isinstance(exc, DevstackError):
                tail = read_tail(self.log_path, offset)
                if exited_by_itself and any(m in tail.lower() for m in _BIND_FAILURE_MARKERS):
                    raise _PortTaken() from exc
                raise DevstackError(f"{exc} (log: {self.log_path}):\n{tail}") from exc
            raise

    def _wait_healthy(self, proc: subprocess.Popen[bytes], deadline: float) -> None:
        while True:
            if proc.poll() is not None:
                raise DevstackError(f"etcd exited with code {proc.returncode} during start-up")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise DevstackError("etcd did not report healthy in time")
            if _healthy(self.client_url, timeout=min(1.0, remaining)):
                return
            time.sleep(min(0.05, max(remaining, 0.0)))
