"""Run a private PostgreSQL server as a local child process.

:class:`LocalPostgres` owns one cluster under ``base_dir/pgdata`` and one
``postgres`` process. Guarantees while :attr:`LocalPostgres.running`:

* it listens on 127.0.0.1 only, on a port picked by ``schedd_devstack.ports`` (never
  5432), plus a Unix socket in the data directory (or in a short temporary
  directory when that path is too long for a socket name);
* every local and loopback connection logs in with a password (``scram-sha-256``,
  no ``trust`` line: ``schedd_devstack.pg_auth``); the superuser is ``schedd``, its
  password is kept in ``base_dir/postgres-password`` (0600) and carried by :attr:`url`;
  a database ``schedd`` exists;
* ``max_connections`` is 200;
* the PID we hold is the postmaster's own (it is started directly, not through
  ``pg_ctl``), so :meth:`LocalPostgres.stop` and :meth:`LocalPostgres.kill`
  act on the server and nothing else.

Not guaranteed: durability with ``durable=False`` (``fsync``,
``synchronous_commit`` and ``full_page_writes`` are off; a host crash may
corrupt the cluster, a process kill does not), nor that the port stays the same
across restarts (it is reused when still free).

PostgreSQL refuses to run as root. When this process is root, ``initdb`` and
``postgres`` run as the ``postgres`` system user (or ``schedd``, created with
``useradd --system`` when neither exists); the data directory is chowned to
that user, and any directory on the way to it (or to the binaries) that user
cannot traverse gets the matching execute bit added, with a warning logged.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import BinaryIO

from schedd_devstack._process import (
    child_env,
    die_with_parent_prefix,
    kill_group,
    read_tail,
    register_running,
    run_coroutine_sync,
    stop_process,
    unregister_running,
)
from schedd_devstack.binaries import DevstackError, find_postgres_bindir
from schedd_devstack.pg_account import Account, ensure_traversable, service_account
from schedd_devstack.pg_auth import owner_password, serves_other_rules, set_owner_password
from schedd_devstack.pg_databases import (
    DATABASE,
    SUPERUSER,
    TASK_ROLE,
    asyncpg_dsn,
    create_database,
    drop_database,
    ensure_task_role,
    with_database,
)
from schedd_devstack.pg_ready import ServerExited, wait_ready
from schedd_devstack.ports import LOCALHOST, free_port, port_is_free

# The database helpers are pg_databases'; named here too, where the tests and the stack import them.
__all__ = [
    "DATABASE",
    "SUPERUSER",
    "TASK_ROLE",
    "LocalPostgres",
    "asyncpg_dsn",
    "create_database",
    "drop_database",
    "ensure_task_role",
    "with_database",
]

MAX_CONNECTIONS = 200

_LOG = logging.getLogger(__name__)

# sun_path holds 108 bytes including the NUL; leave room for "/.s.PGSQL.65535.lock".
_MAX_SOCKET_DIR_LEN = 107 - len("/.s.PGSQL.65535.lock")
_BIND_FAILURE_MARKERS = ("Address already in use", "could not create any TCP/IP sockets")
_START_ATTEMPTS = 3
_INITDB_TIMEOUT = 120.0
_ABORT_TIMEOUT = 10.0  # graceful stop of a server or initdb whose start-up failed or was interrupted


class _PortTaken(Exception):
    """The postmaster exited because its port was grabbed between probe and bind."""


class LocalPostgres:
    """One private PostgreSQL server; see the module docstring for what it guarantees.

    Not thread-safe: call ``start``/``stop``/``kill`` from one thread. ``start``
    may be called again after ``stop`` or ``kill`` (same or another
    ``base_dir``); an existing cluster in ``base_dir/pgdata`` is reused.
    """

    def __init__(
        self,
        *,
        startup_timeout: float = 30.0,
        stop_timeout: float = 30.0,
        settings: Mapping[str, str] | None = None,
    ) -> None:
        """``settings``: server settings added to this module's own on every start (a benchmark's
        ``shared_preload_libraries``, say)."""
        self._settings = dict(settings or {})
        self._startup_timeout = startup_timeout
        self._stop_timeout = stop_timeout
        self._proc: subprocess.Popen[bytes] | None = None
        self._port: int | None = None
        self._base_dir: Path | None = None
        self._temp_socket_dir: Path | None = None
        self._password = ""

    # -- properties ---------------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        """True while the postmaster we started has not exited."""
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        """The postmaster's PID, or None when not started (stays set after it dies until stop/kill)."""
        return None if self._proc is None else self._proc.pid

    @property
    def port(self) -> int:
        """The TCP port of the last start. Raises DevstackError before the first start."""
        if self._port is None:
            raise DevstackError("LocalPostgres has not been started")
        return self._port

    @property
    def url(self) -> str:
        """SQLAlchemy URL of the ``schedd`` database, with the owner's password:
        ``postgresql+asyncpg://schedd:PASSWORD@127.0.0.1:PORT/schedd``."""
        return f"postgresql+asyncpg://{SUPERUSER}:{self._password}@{LOCALHOST}:{self.port}/{DATABASE}"

    @property
    def dsn(self) -> str:
        """The same as :attr:`url` in the plain ``postgresql://`` form asyncpg and libpq take."""
        return asyncpg_dsn(self.url)

    @property
    def base_dir(self) -> Path:
        if self._base_dir is None:
            raise DevstackError("LocalPostgres has not been started")
        return self._base_dir

    @property
    def data_dir(self) -> Path:
        return self.base_dir / "pgdata"

    @property
    def log_path(self) -> Path:
        """Server log (initdb output and the postmaster's stderr), appended to across restarts."""
        return self.base_dir / "postgres.log"

    # -- lifecycle ----------------------------------------------------------------------------------

    def start(self, base_dir: Path, *, durable: bool = True) -> None:
        """Initialise ``base_dir/pgdata`` if needed, start the server and wait until it serves ``schedd``.

        Blocks at most about ``startup_timeout`` seconds after ``initdb`` (which
        has its own 120 s bound). On failure or interruption the half-started
        server is stopped (SIGINT, SIGKILL after 10 s) before the exception
        propagates; a :class:`DevstackError` carries the tail of :attr:`log_path`.
        ``durable=False`` turns off fsync, synchronous_commit and
        full_page_writes for this run (and uses ``initdb --no-sync``).
        """
        if self.running:
            raise DevstackError(f"PostgreSQL is already running (pid {self.pid})")
        self._release()
        bindir = find_postgres_bindir()
        base_dir = Path(base_dir).resolve()
        base_dir.mkdir(parents=True, exist_ok=True)
        if self._base_dir != base_dir:
            self._port = None
        self._base_dir = base_dir
        data_dir = self.data_dir

        account = service_account() if os.geteuid() == 0 else None
        if account is not None:
            ensure_traversable(base_dir, account)
            ensure_traversable(bindir, account)
            data_dir.mkdir(mode=0o700, exist_ok=True)
            os.chown(data_dir, account.uid, account.gid)
        made = not (data_dir / "PG_VERSION").exists()
        if made:
            self._initdb(bindir, data_dir, account, durable=durable)
        self._password, new_password = owner_password(base_dir)
        if made or new_password or serves_other_rules(data_dir):
            run_as = None if account is None else (account.uid, account.gid)
            set_owner_password(
                bindir / "postgres", data_dir, SUPERUSER, self._password, run_as, child_env(["PG"])
            )
        socket_dir = self._socket_dir(data_dir, account)

        deadline = time.monotonic() + self._startup_timeout
        try:
            for attempt in range(1, _START_ATTEMPTS + 1):
                port = self._port if self._port is not None and port_is_free(self._port) else free_port()
                self._port = port
                try:
                    self._launch_and_wait(bindir, data_dir, socket_dir, port, account, durable, deadline)
                    return
                except _PortTaken:
                    _LOG.info("port %d was taken before PostgreSQL bound it (attempt %d)", port, attempt)
                    self._port = None
            raise DevstackError(
                f"PostgreSQL could not bind a free port in {_START_ATTEMPTS} attempts; log: {self.log_path}"
            )
        except BaseException:
            self._release()
            raise

    def stop(self) -> None:
        """Fast shutdown (SIGINT), bounded by ``stop_timeout``, then SIGKILL of its process group.

        Idempotent; returns once the server has exited. The data is kept.
        """
        proc = self._proc
        try:
            if proc is not None:
                stop_process(proc, signal.SIGINT, self._stop_timeout)
        finally:
            self._release()

    def kill(self) -> None:
        """SIGKILL the postmaster and its backends at once (a crash; the next start recovers)."""
        proc = self._proc
        try:
            if proc is not None:
                kill_group(proc)
                proc.wait(timeout=30)
        finally:
            self._release()

    # -- internals ----------------------------------------------------------------------------------

    def _forget_process(self) -> None:
        self._proc = None
        unregister_running(self)

    def _release(self) -> None:
        self._forget_process()
        if self._temp_socket_dir is not None:
            shutil.rmtree(self._temp_socket_dir, ignore_errors=True)
            self._temp_socket_dir = None

    @staticmethod
    def _spawn(cmd: list[str], log: BinaryIO, account: Account | None) -> subprocess.Popen[bytes]:
        """Start ``cmd`` in its own session, output to ``log``, as ``account`` when given."""
        return subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd="/",
            env=child_env(["PG"]),
            start_new_session=True,
            user=None if account is None else account.uid,
            group=None if account is None else account.gid,
            extra_groups=None if account is None else [],
        )

    def _initdb(self, bindir: Path, data_dir: Path, account: Account | None, *, durable: bool) -> None:
        cmd = [
            str(bindir / "initdb"),
            "-D",
            str(data_dir),
            "-U",
            SUPERUSER,
            # Replaced by password rules before the server first starts (``pg_auth``).
            "--auth-local=trust",
            "--auth-host=trust",
            "--encoding=UTF8",
            "--locale=C",
        ]
        if not durable:
            cmd.append("--no-sync")
        offset = self._log_size()
        with self.log_path.open("ab") as log:
            log.write(f"--- {' '.join(cmd)}\n".encode())
            log.flush()
            proc = self._spawn(cmd, log, account)
        try:
            returncode = proc.wait(timeout=_INITDB_TIMEOUT)
        except BaseException:
            # SIGTERM lets initdb remove the half-made cluster, so the next start can run it again.
            stop_process(proc, signal.SIGTERM, _ABORT_TIMEOUT)
            raise
        if returncode != 0:
            raise DevstackError(
                f"initdb failed with exit code {returncode} (log: {self.log_path}):\n"
                f"{read_tail(self.log_path, offset)}"
            )

    def _socket_dir(self, data_dir: Path, account: Account | None) -> Path:
        if len(str(data_dir)) <= _MAX_SOCKET_DIR_LEN:
            return data_dir
        socket_dir = Path(tempfile.mkdtemp(prefix="schedd-pgsock-"))
        if account is not None:
            os.chown(socket_dir, account.uid, account.gid)
        self._temp_socket_dir = socket_dir
        return socket_dir

    def _log_size(self) -> int:
        try:
            return self.log_path.stat().st_size
        except FileNotFoundError:
            return 0

    def _launch_and_wait(
        self,
        bindir: Path,
        data_dir: Path,
        socket_dir: Path,
        port: int,
        account: Account | None,
        durable: bool,
        deadline: float,
    ) -> None:
        settings = {
            "listen_addresses": LOCALHOST,
            "port": str(port),
            "unix_socket_directories": _guc_list_item(str(socket_dir)),
            "max_connections": str(MAX_CONNECTIONS),
        }
        if not durable:
            settings.update(fsync="off", synchronous_commit="off", full_page_writes="off")
        settings.update(self._settings)
        cmd = [*die_with_parent_prefix("INT"), str(bindir / "postgres"), "-D", str(data_dir)]
        for key, value in settings.items():
            cmd += ["-c", f"{key}={value}"]

        offset = self._log_size()
        with self.log_path.open("ab") as log:
            log.write(f"--- {' '.join(cmd)}\n".encode())
            log.flush()
            proc = self._spawn(cmd, log, account)
        self._proc = proc
        register_running(self, self.stop)
        try:
            run_coroutine_sync(lambda: wait_ready(proc, port, data_dir, self._password, deadline))
        except ServerExited as exc:
            tail = read_tail(self.log_path, offset)
            self._forget_process()
            if any(marker in tail for marker in _BIND_FAILURE_MARKERS):
                raise _PortTaken() from exc
            raise DevstackError(
                f"PostgreSQL exited with code {exc.returncode} during start-up "
                f"(log: {self.log_path}):\n{tail}"
            ) from exc
        except BaseException as exc:
            with contextlib.suppress(DevstackError):
                stop_process(proc, signal.SIGINT, _ABORT_TIMEOUT)
            self._forget_process()
            if isinstance(exc, DevstackError):
                raise DevstackError(
                    f"{exc} (log: {self.log_path}):\n{read_tail(self.log_path, offset)}"
                ) from exc
            raise


def _guc_list_item(value: str) -> str:
    """Quote one element of a comma-separated GUC list if it needs it."""
    if any(c in value for c in ', \t"'):
        return '"' + value.replace('"', '""') + '"'
    return value
