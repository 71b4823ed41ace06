"""Run the schedd services as real subprocesses: for the end-to-end tests and for ``make run``.

:class:`ServiceProcess` is one service process (``python -m schedd_api.main`` and so
on) with its output in a log file: start it, stop it gracefully (SIGTERM, a bounded
wait, then SIGKILL), crash it (SIGKILL), freeze and thaw it (SIGSTOP / SIGCONT).

:class:`Cluster` is a whole schedd deployment on top of a PostgreSQL and an etcd that
already run: it migrates the database, starts the api, the registry, N scheduler
replicas and M workers on free loopback ports, and returns from :meth:`Cluster.start`
only once

* the api and the registry answer gRPC health checks with SERVING,
* a scheduler leads (``scheduler_fence.token`` rose above its value before the start),
* every worker is connected (its ``workers`` row is ``active`` and was written after
  the worker was started).

Every service serves Prometheus ``/metrics`` on a free loopback port of its own, listed in
:attr:`Cluster.metrics` by process name (``api``, ``registry``, ``scheduler-1``, ``worker-1``...).

Every wait is bounded; a failure raises :class:`ClusterError` carrying the tail of the
log of the process that failed (or of each candidate, when no single one is to blame),
after stopping whatever had started. :meth:`Cluster.stop` stops workers first, then
the schedulers, the registry and the api; it is idempotent and is also run at
interpreter exit, so no service outlives the process that started it. Workers and
schedulers can be added, stopped and killed one at a time (for chaos tests).

More than one registry: ``registries=N`` starts N (the initial workers are spread over them
round-robin) and :meth:`Cluster.add_registry` starts one more; ``add_worker(registry=ADDR)``
connects a worker to a given one. ``registries=0`` starts none, for a cluster whose schedulers
run the tasks themselves (``SCHEDD_EXECUTOR=local``; it must then have no workers).
Per-process settings: ``scheduler_env``/``worker_env``/``registry_env`` for every process of
that kind, and ``env=`` of ``add_worker``/``add_scheduler``/``add_registry`` for one process
(these win over every other setting, e.g. ``SCHEDD_DRAIN_GRACE`` or ``SCHEDD_WORKER_CAPACITY``).

The election key in etcd is fixed (``/schedd/scheduler/leader``), so two clusters on
one etcd would compete for one leadership. ``start`` therefore refuses to run when
another cluster of this process has live schedulers on the same etcd, and waits (bounded)
until no leader key is left from earlier; ``stop`` deletes the leader key when one of this
cluster's (now dead) schedulers still holds it (after a SIGKILL, say), and their member
keys, so the next cluster need not wait for the leases to expire.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import secrets
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request
import weakref
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Any

import asyncpg  # type: ignore[import-untyped, unused-ignore]  # no stubs
import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from schedd_coord import access
from schedd_coord.client import EtcdClient
from schedd_coord.credentials import EtcdAuth
from schedd_coord.election import LEADER_KEY, MEMBERS_PREFIX, LeaderInfo
from schedd_coord.errors import CoordinationError
from schedd_devstack._process import (
    die_with_parent_prefix,
    kill_group,
    read_tail,
    register_running,
    run_coroutine_sync,
    unregister_running,
)
from schedd_devstack.binaries import DevstackError
from schedd_devstack.credentials import create_cluster_tokens
from schedd_devstack.etcd_access import EtcdCredentials
from schedd_devstack.ports import LOCALHOST, free_port
from schedd_devstack.postgres import ensure_task_role
from schedd_store.engine import asyncpg_dsn
from schedd_store.migrate import upgrade_async

__all__ = ["Cluster", "ClusterError", "ServiceProcess", "terminate_all"]

DEFAULT_STOP_TIMEOUT = 10.0
DEFAULT_STARTUP_TIMEOUT = 60.0
LOG_TAIL_BYTES = 4000

_POLL_SECONDS = 0.05
_BIND_FAILURE_MARKERS = ("cannot listen on", "address already in use")
_BIND_ATTEMPTS = 3
# A leader key left behind by a crashed scheduler disappears when its lease expires
# (3 s by default; after an etcd restart the TTL starts over).
_STALE_LEADER_TIMEOUT = 15.0
_HEALTH_CHANNEL_OPTIONS = [
    ("grpc.initial_reconnect_backoff_ms", 50),
    ("grpc.min_reconnect_backoff_ms", 50),
    ("grpc.max_reconnect_backoff_ms", 250),
]


class ClusterError(DevstackError):
    """A schedd service could not be started, did not become ready in time, or died."""


# -- one process --------------------------------------------------------------------------------------


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


# -- the cluster --------------------------------------------------------------------------------------

_clusters: weakref.WeakSet[Cluster] = weakref.WeakSet()
_clusters_lock = threading.Lock()


def _service_env(base: Mapping[str, str] | None) -> dict[str, str]:
    """Our environment without any ``SCHEDD_*`` setting that could point a service elsewhere."""
    source = os.environ if base is None else base
    env = {k: v for k, v in source.items() if not k.startswith("SCHEDD_")}
    env["PYTHONUNBUFFERED"] = "1"
    env.setdefault("_TYPER_STANDARD_TRACEBACK", "1")  # plain tracebacks: compact, greppable log tails
    return env


async def _fetch(database_url: str, query: str, *args: object) -> list[dict[str, Any]]:
    conn = await asyncpg.connect(asyncpg_dsn(database_url), timeout=5)
    try:
        return [dict(r) for r in await conn.fetch(query, *args, timeout=10)]
    finally:
        await conn.close()


class Cluster:
    """A schedd deployment of subprocesses on a given PostgreSQL and etcd; see the module docstring.

    ``database_url`` is SQLAlchemy-style (``postgresql+asyncpg://...``) and ``etcd_endpoints`` is
    ``host:port[,host:port]``. Logs go to ``log_dir/<service>.log``. ``env`` replaces the
    base environment of every service (default: ours, without ``SCHEDD_*``); ``service_env``
    adds settings for every service (``SCHEDD_LOG_LEVEL``, ``SCHEDD_LEASE_TTL``...).
    Without ``auth`` the services run with ``SCHEDD_AUTH=none`` (development mode); with it, start
    creates an admin token (:attr:`admin_token`) and a worker token every worker connects with.
    A DAG's first registration leaves it unpaused unless ``dags_paused_at_creation`` (the api's own
    default, which ``make run`` keeps): tests and benchmarks run what they register.
    With ``web`` it also starts the web UI (``schedd_web``) against the api once the api serves, on
    ``web_port`` (default: a free one); :attr:`web_url` is its address, ``/healthz`` answered.
    Usable as a context manager. Not thread-safe.
    """

    def __init__(
        self,
        database_url: str,
        etcd_endpoints: str,
        log_dir: Path,
        *,
        schedulers: int = 1,
        workers: int = 2,
        worker_capacity: int = 4,
        registries: int = 1,
        api_port: int | None = None,
        registry_port: int | None = None,
        python: str = sys.executable,
        env: Mapping[str, str] | None = None,
        service_env: Mapping[str, str] | None = None,
        scheduler_env: Mapping[str, str] | None = None,
        worker_env: Mapping[str, str] | None = None,
        registry_env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        startup_timeout: float = DEFAULT_STARTUP_TIMEOUT,
        stop_timeout: float = DEFAULT_STOP_TIMEOUT,
        auth: bool = False,
        etcd_credentials: EtcdCredentials | None = None,
        dags_paused_at_creation: bool = False,
        web: bool = False,
        web_port: int | None = None,
    ) -> None:
        if schedulers < 0 or workers < 0 or registries < 0:
            raise ValueError("schedulers, workers and registries must not be negative")
        if registries == 0 and workers > 0:
            raise ValueError("workers need a registry: registries=0 requires workers=0")
        self.database_url = database_url
        #: the URL transactional task code connects with (the task role; set by ``migrate``)
        self.task_database_url = database_url
        self.etcd_endpoints = etcd_endpoints
        #: the etcd users' passwords (default: ``SCHEDD_DEVSTACK_ETCD_CREDENTIALS``); each service
        #: connects as its own user, none without them
        self.etcd_credentials = etcd_credentials or EtcdCredentials.from_env(os.environ)
        self.log_dir = Path(log_dir)
        self.python = python
        self.worker_capacity = worker_capacity
        self.startup_timeout = startup_timeout
        self.stop_timeout = stop_timeout
        self.cwd = cwd
        self._initial_schedulers = schedulers
        self._initial_workers = workers
        self._initial_registries = registries
        self._api_port = api_port
        self._web = web
        self._web_port = web_port
        self._registry_port = registry_port
        self._base_env = _service_env(env)
        self.auth = auth
        if not auth:
            self._base_env["SCHEDD_AUTH"] = "none"
        self._base_env.update(service_env or {})
        #: with ``auth``: an admin token (for schedctl) and the token every worker connects with
        self.admin_token = ""
        self.worker_token = ""
        self._kind_env: dict[str, dict[str, str]] = {
            "scheduler": dict(scheduler_env or {}),
            "worker": dict(worker_env or {}),
            "registry": dict(registry_env or {}),
            "api": {"SCHEDD_DAGS_PAUSED_AT_CREATION": str(dags_paused_at_creation).lower()},
        }
        self.tag = secrets.token_hex(2)
        self.api: ServiceProcess | None = None
        #: with ``web``: the web UI (``schedd-web``) and its ``http://host:port`` address
        self.web: ServiceProcess | None = None
        self.web_url = ""
        self.registry: ServiceProcess | None = None
        self.api_address = ""
        #: the address of the first registry ("" with ``registries=0``)
        self.registry_address = ""
        #: every registry by address, in start order (the first is also ``self.registry``)
        self.registries: dict[str, ServiceProcess] = {}
        #: the registry identity (``SCHEDD_REGISTRY_ID``, as in ``workers.registry``) by address
        self.registry_ids: dict[str, str] = {}
        #: the address of the registry each worker was started against, by worker id
        self.worker_registries: dict[str, str] = {}
        self._registry_seq = 0
        #: by identity (``scheduler-N-TAG``), in start order
        self.schedulers: dict[str, ServiceProcess] = {}
        #: metrics address (host:port) by scheduler identity
        self.scheduler_metrics: dict[str, str] = {}
        #: the ``/metrics`` address (host:port) of every service started, by process name
        self.metrics: dict[str, str] = {}
        #: by worker id (``worker-N``), in start order
        self.workers: dict[str, ServiceProcess] = {}
        self._scheduler_seq = 0
        self._worker_seq = 0
        self._started = False

    # -- introspection ------------------------------------------------------------------------------

    @property
    def processes(self) -> list[ServiceProcess]:
        """Every process this cluster started (alive or not): api, registry, web UI, schedulers, workers."""
        servers = [p for p in (self.api, self.registry, self.web) if p is not None]
        servers += [p for p in self.registries.values() if p is not self.registry]
        return [*servers, *self.schedulers.values(), *self.workers.values()]

    def dead(self) -> list[ServiceProcess]:
        """Processes that exited on their own: not through ``terminate``/``kill`` (or the cluster's
        ``stop_*``/``kill_*`` methods, which use them)."""
        return [p for p in self.processes if p.started_at is not None and not p.alive and not p.stopped]

    def env(self) -> dict[str, str]:
        """What a client needs: ``SCHEDD_API`` (for schedctl) plus the database and etcd settings."""
        return {
            "SCHEDD_API": self.api_address,
            "SCHEDD_DATABASE_URL": self.database_url,
            "SCHEDD_ETCD_ENDPOINTS": self.etcd_endpoints,
        }

    def fetch(self, query: str, *args: object) -> list[dict[str, Any]]:
        """Run ``query`` on the cluster's database (asyncpg, ``$1`` placeholders); rows as dicts.

        Callable from synchronous code whether or not an event loop is running.
        """
        return run_coroutine_sync(lambda: _fetch(self.database_url, query, *args))

    def fetchval(self, query: str, *args: object) -> Any:
        """The first column of the first row of ``query``, or None when there is no row."""
        rows = self.fetch(query, *args)
        return next(iter(rows[0].values())) if rows else None

    def fence(self) -> tuple[int, str]:
        """``(token, holder)`` of ``scheduler_fence``: the latest term that raised it, and whose."""
        rows = self.fetch("SELECT token, holder FROM scheduler_fence WHERE id = 1")
        if not rows:
            raise ClusterError("scheduler_fence has no row; is the database migrated?")
        return int(rows[0]["token"]), str(rows[0]["holder"])

    def leader(self) -> ServiceProcess | None:
        """The alive scheduler of this cluster that raised the fence last, if any.

        A paused or partitioned leader stays "the leader" here until another one raises the fence.
        """
        _, holder = self.fence()
        proc = self.schedulers.get(holder)
        return proc if proc is not None and proc.alive else None

    # -- lifecycle ----------------------------------------------------------------------------------

    def migrate(self) -> None:
        """Bring the database schema to head (safe to repeat), and make sure the task role exists."""
        try:
            run_coroutine_sync(lambda: upgrade_async(self.database_url))
            self.task_database_url = ensure_task_role(self.database_url)
        except Exception as exc:
            raise ClusterError(f"migrating {self._redacted_url()} failed: {exc}") from exc

    def start(self, *, migrate: bool = True) -> None:
        """Start every service and wait until the cluster is ready (see the module docstring).

        Bounded by ``startup_timeout``; on failure or interruption everything started is
        stopped before the error propagates.
        """
        if self._started:
            raise ClusterError("this cluster has been started already")
        self._started = True
        with _clusters_lock:
            rivals = [
                c
                for c in _clusters
                if c is not self
                and c.etcd_endpoints == self.etcd_endpoints
                and any(p.alive for p in c.schedulers.values())
            ]
            if rivals and self._initial_schedulers:
                raise ClusterError(
                    "another cluster in this process has live schedulers on the same etcd "
                    f"({self.etcd_endpoints}); they would compete for one leadership: stop it first"
                )
            _clusters.add(self)
        register_running(self, self.stop)
        deadline = time.monotonic() + self.startup_timeout
        try:
            if migrate:
                self.migrate()
            if self.auth:
                made = run_coroutine_sync(lambda: create_cluster_tokens(self.database_url, self.tag))
                self.admin_token, self.worker_token = made.admin, made.worker
                self._kind_env["worker"].setdefault("SCHEDD_WORKER_TOKEN", made.worker)
            token_before, _ = self.fence()
            if self._initial_schedulers:
                self._wait_no_foreign_leader(min(deadline, time.monotonic() + _STALE_LEADER_TIMEOUT))
            self._spawn_api()
            if self._initial_registries:
                self._spawn_registry()
            extra_registries = [self._spawn_extra_registry() for _ in range(self._initial_registries - 1)]
            for _ in range(self._initial_schedulers):
                self._spawn_scheduler()
            if self._initial_registries:
                self._await_serving("registry", deadline)
            for proc in extra_registries:
                self._await_extra_registry(proc, deadline)
            db_now = self._db_now()
            addresses = list(self.registries)
            new_workers = [
                self._spawn_worker(registry=addresses[i % len(addresses)])
                for i in range(self._initial_workers)
            ]
            self._await_serving("api", deadline)
            if self._web:
                self._start_web(deadline)
            if self._initial_schedulers:
                self._wait_leader(token_before, deadline)
            for proc in new_workers:
                self._wait_worker(proc, db_now, deadline)
        except (CoordinationError, OSError, asyncpg.PostgresError) as exc:
            self.stop()
            raise ClusterError(
                f"cluster start-up failed talking to PostgreSQL ({self._redacted_url()}) or etcd "
                f"({self.etcd_endpoints}): {type(exc).__name__}: {exc}"
            ) from exc
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Stop workers, then schedulers, then the registry and the api (each group: SIGTERM, a
        bounded wait, SIGKILL). Then drop the leader key if one of ours still holds it. Idempotent."""
        try:
            terminate_all(self.workers.values(), self.stop_timeout)
            terminate_all(self.schedulers.values(), self.stop_timeout)
            servers = [self.web, *self.registries.values(), self.registry, self.api]
            terminate_all({id(p): p for p in servers if p is not None}.values(), self.stop_timeout)
        finally:
            if self.schedulers:
                with contextlib.suppress(Exception):
                    self.release_election()
            unregister_running(self)

    def __enter__(self) -> Cluster:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # -- workers ------------------------------------------------------------------------------------

    def add_worker(
        self,
        worker_id: str | None = None,
        *,
        capacity: int | None = None,
        wait: bool = True,
        registry: str | None = None,
        env: Mapping[str, str] | None = None,
        user: str = "",
    ) -> ServiceProcess:
        """Start one more worker (default id ``worker-N``; an id whose process is dead may be
        reused) and, with ``wait``, return once it is connected. ``registry`` is the address of
        the registry to connect to (default: the first one); ``env`` adds settings for this worker
        only (``SCHEDD_DRAIN_GRACE``...), winning over every other setting; ``user`` runs it as that
        user (from a root test process; the cluster's ``python`` must be reachable by the user)."""
        self._require_running()
        if not self.registries:
            raise ClusterError("this cluster has no registry for a worker to connect to")
        if registry is not None and registry not in self.registries:
            raise ClusterError(f"no registry at {registry!r}; registries: {', '.join(self.registries)}")
        if worker_id is not None and worker_id in self.workers and self.workers[worker_id].alive:
            raise ClusterError(f"worker {worker_id} is already running")
        db_now = self._db_now()
        proc = self._spawn_worker(worker_id, capacity=capacity, registry=registry, env=env, user=user)
        if wait:
            self._wait_worker(proc, db_now, time.monotonic() + self.startup_timeout)
        return proc

    def stop_worker(self, worker_id: str, timeout: float | None = None) -> int | None:
        """Graceful stop (SIGTERM, then SIGKILL after ``timeout``); returns the exit status."""
        return self._worker(worker_id).terminate(timeout)

    def kill_worker(self, worker_id: str) -> int | None:
        """SIGKILL a worker, as a crash would (its running tasks are orphaned, not killed)."""
        return self._worker(worker_id).kill()

    def wait_for_worker(self, worker_id: str, timeout: float = 30.0) -> None:
        """Wait until the worker's ``workers`` row is active (however old it is)."""
        self._wait_worker(self._worker(worker_id), None, time.monotonic() + timeout)

    # -- schedulers ---------------------------------------------------------------------------------

    def add_scheduler(
        self, *, etcd_endpoints: str | None = None, env: Mapping[str, str] | None = None, user: str = ""
    ) -> ServiceProcess:
        """Start one more scheduler replica (identity ``scheduler-N-TAG``); it campaigns at once.
        Does not wait: with a leader in place it stays a standby. ``etcd_endpoints`` overrides the
        cluster's (e.g. a proxy that a partition test can cut); ``env`` adds settings for this
        replica only (``SCHEDD_EXECUTOR``...); ``user`` runs it as that user, as for ``add_worker``."""
        self._require_running()
        return self._spawn_scheduler(etcd_endpoints, env=env, user=user)

    # -- registries ---------------------------------------------------------------------------------

    def add_registry(self, *, env: Mapping[str, str] | None = None, wait: bool = True) -> str:
        """Start one more registry (``registry-N``, identity ``registry-N-TAG``) on a free port and
        return its address; with ``wait``, once it answers health checks. ``env`` adds settings for
        this registry only."""
        self._require_running()
        proc = self._spawn_extra_registry(env=env)
        if wait:
            proc = self._await_extra_registry(proc, time.monotonic() + self.startup_timeout)
        return self._address_of(proc)

    def registry_of_worker(self, worker_id: str) -> str:
        """The identity (as in ``workers.registry``) of the registry the worker was started against."""
        return self.registry_ids[self.worker_registries[self._worker(worker_id).name]]

    def scheduler_is_leader(self, identity: str) -> bool | None:
        """What the replica's own ``schedd_scheduler_is_leader`` metric says; None when unreachable."""
        url = f"http://{self.scheduler_metrics[identity]}/metrics"
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:
                text = resp.read().decode()
        except OSError:
            return None
        for line in text.splitlines():
            if line.startswith("schedd_scheduler_is_leader "):
                return float(line.split()[1]) == 1.0
        return None

    def stop_scheduler(self, identity: str, timeout: float | None = None) -> int | None:
        """Graceful stop: a leader finishes its pass and resigns, so a standby takes over at once."""
        return self._scheduler(identity).terminate(timeout)

    def kill_scheduler(self, identity: str) -> int | None:
        """SIGKILL a scheduler: its leader key stays until the lease expires."""
        return self._scheduler(identity).kill()

    def wait_for_leader(self, above: int = 0, timeout: float = 30.0) -> tuple[int, ServiceProcess]:
        """Wait until one of our alive schedulers raised the fence above ``above``; ``(token, it)``."""
        return self._wait_leader(above, time.monotonic() + timeout)

    def release_election(self) -> bool:
        """Delete the election keys this cluster's dead schedulers left in etcd (the leader key,
        if one of them holds it, and their member keys) instead of waiting for their leases to
        expire. Returns whether the leader key was deleted. Live schedulers' keys are left alone.
        """
        dead = {identity for identity, proc in self.schedulers.items() if not proc.alive}

        async def release() -> bool:
            client = EtcdClient(self.etcd_endpoints, auth=self._etcd_root())
            try:
                for identity in dead:
                    await client.delete(MEMBERS_PREFIX + identity.encode())
                kv = await client.get(LEADER_KEY)
                if kv is None or LeaderInfo.from_kv(kv).identity not in dead:
                    return False
                return await client.delete_if_created_at(LEADER_KEY, kv.create_revision)
            finally:
                await client.close()

        return run_coroutine_sync(release)

    def current_leader_key(self) -> LeaderInfo | None:
        """What etcd's leader key says right now (None when nobody leads)."""

        async def get() -> LeaderInfo | None:
            client = EtcdClient(self.etcd_endpoints, auth=self._etcd_root())
            try:
                kv = await client.get(LEADER_KEY)
                return LeaderInfo.from_kv(kv) if kv is not None else None
            finally:
                await client.close()

        return run_coroutine_sync(get)

    # -- internals: spawning ------------------------------------------------------------------------

    def _process(
        self,
        name: str,
        module: str,
        env: Mapping[str, str],
        *,
        kind: str = "",
        extra_env: Mapping[str, str] | None = None,
        user: str = "",
    ) -> ServiceProcess:
        # Code bundles are cached under the cluster's own directory (XDG_CACHE_HOME), not the user's
        # home; a process started as another user keeps the default of that user's home.
        cache = {} if user else {"XDG_CACHE_HOME": str(self.log_dir / "cache")}
        return ServiceProcess(
            name,
            [self.python, "-m", module],
            env={**self._base_env, **cache, **self._kind_env.get(kind, {}), **env, **(extra_env or {})},
            log_dir=self.log_dir,
            cwd=self.cwd,
            stop_timeout=self.stop_timeout,
            user=user,
        )

    def _spawn_api(self, *, new_port: bool = False) -> None:
        port = self._api_port if self._api_port and not new_port else free_port()
        self.api_address = f"{LOCALHOST}:{port}"
        self.api = self._process(
            "api",
            "schedd_api.main",
            {
                "SCHEDD_DATABASE_URL": self.database_url,
                "SCHEDD_ETCD_ENDPOINTS": self.etcd_endpoints,  # for the leader status
                **self._etcd_user(access.API_USER),
                "SCHEDD_API_LISTEN": self.api_address,
                "SCHEDD_METRICS_LISTEN": self._metrics_address("api"),
            },
            kind="api",
        )
        self.api.start()

    def _start_web(self, deadline: float) -> None:
        """Start the web UI against the api and wait until its ``/healthz`` answers, on a new port when
        another process took the one probed."""
        for attempt in range(1, _BIND_ATTEMPTS + 1):
            port = self._web_port if self._web_port and attempt == 1 else free_port()
            self.web_url = f"http://{LOCALHOST}:{port}"
            self.web = self._process(
                "web",
                "schedd_web.main",
                {
                    "SCHEDD_API": self.api_address,
                    "SCHEDD_WEB_LISTEN": f"{LOCALHOST}:{port}",
                    "SCHEDD_METRICS_LISTEN": self._metrics_address("web"),
                },
                kind="web",
            )
            self.web.start()
            if self._wait_http(self.web, f"{self.web_url}/healthz", deadline):
                return
        raise ClusterError(f"web could not bind a free port in {_BIND_ATTEMPTS} attempts")

    def _spawn_registry(self, *, new_port: bool = False) -> None:
        port = self._registry_port if self._registry_port and not new_port else free_port()
        if self.registry is not None:
            self.registries.pop(self.registry_address, None)
            self.registry_ids.pop(self.registry_address, None)
        self.registry_address = f"{LOCALHOST}:{port}"
        identity = f"registry-{self.tag}"
        self.registry = self._process(
            "registry",
            "schedd_registry.main",
            {
                "SCHEDD_DATABASE_URL": self.database_url,
                "SCHEDD_REGISTRY_LISTEN": self.registry_address,
                "SCHEDD_REGISTRY_ID": identity,
                "SCHEDD_METRICS_LISTEN": self._metrics_address("registry"),
            },
            kind="registry",
        )
        # The first registry comes first in ``registries`` (workers are spread in this order).
        self.registries = {self.registry_address: self.registry, **self.registries}
        self.registry_ids[self.registry_address] = identity
        self.registry.start()

    def _spawn_extra_registry(
        self, *, env: Mapping[str, str] | None = None, name: str | None = None
    ) -> ServiceProcess:
        """A registry besides the first: ``registry-N`` (N >= 2) on a free port."""
        if name is None:
            self._registry_seq = max(self._registry_seq, 1) + 1
            name = f"registry-{self._registry_seq}"
        address = f"{LOCALHOST}:{free_port()}"
        identity = f"{name}-{self.tag}"
        proc = self._process(
            name,
            "schedd_registry.main",
            {
                "SCHEDD_DATABASE_URL": self.database_url,
                "SCHEDD_REGISTRY_LISTEN": address,
                "SCHEDD_REGISTRY_ID": identity,
                "SCHEDD_METRICS_LISTEN": self._metrics_address(name),
            },
            kind="registry",
            extra_env=env,
        )
        self.registries[address] = proc
        self.registry_ids[address] = identity
        proc.start()
        return proc

    def _await_extra_registry(self, proc: ServiceProcess, deadline: float) -> ServiceProcess:
        """Wait until a registry of ``_spawn_extra_registry`` serves, restarting it on a new port when
        another process grabbed its port; returns the process that serves."""
        for attempt in range(1, _BIND_ATTEMPTS + 1):
            if self._wait_health(proc, self._address_of(proc), deadline):
                return proc
            if attempt == _BIND_ATTEMPTS:
                break
            address = self._address_of(proc)
            del self.registries[address]
            del self.registry_ids[address]
            proc = self._spawn_extra_registry(env=proc.env, name=proc.name)
        raise ClusterError(f"{proc.name} could not bind a free port in {_BIND_ATTEMPTS} attempts")

    def _etcd_root(self) -> EtcdAuth | None:
        """etcd's ``root``, for this process's own look at the election (None without credentials:
        then ``SCHEDD_ETCD_*``, as every client)."""
        return self.etcd_credentials.auth(access.ROOT_USER) if self.etcd_credentials else None

    def _etcd_user(self, user: str) -> dict[str, str]:
        """The settings that make a service connect to etcd as ``user`` (none without credentials)."""
        return self.etcd_credentials.service_env(user) if self.etcd_credentials else {}

    def _metrics_address(self, name: str) -> str:
        """A free ``host:port`` for the ``/metrics`` of the service ``name``, recorded in ``metrics``."""
        self.metrics[name] = f"{LOCALHOST}:{free_port()}"
        return self.metrics[name]

    def _address_of(self, registry: ServiceProcess) -> str:
        return next(a for a, p in self.registries.items() if p is registry)

    def _spawn_scheduler(
        self, etcd_endpoints: str | None = None, *, env: Mapping[str, str] | None = None, user: str = ""
    ) -> ServiceProcess:
        self._scheduler_seq += 1
        identity = f"scheduler-{self._scheduler_seq}-{self.tag}"
        metrics = f"{LOCALHOST}:{free_port()}"
        proc = self._process(
            f"scheduler-{self._scheduler_seq}",
            "schedd_scheduler.main",
            {
                "SCHEDD_DATABASE_URL": self.database_url,
                "SCHEDD_ETCD_ENDPOINTS": etcd_endpoints or self.etcd_endpoints,
                **self._etcd_user(access.SCHEDULER_USER),
                "SCHEDD_SCHEDULER_ID": identity,
                "SCHEDD_METRICS_LISTEN": metrics,
            },
            kind="scheduler",
            extra_env=env,
            user=user,
        )
        self.schedulers[identity] = proc
        self.scheduler_metrics[identity] = metrics
        self.metrics[proc.name] = metrics
        proc.start()
        return proc

    def _spawn_worker(
        self,
        worker_id: str | None = None,
        *,
        capacity: int | None = None,
        registry: str | None = None,
        env: Mapping[str, str] | None = None,
        user: str = "",
    ) -> ServiceProcess:
        if worker_id is None:
            while True:
                self._worker_seq += 1
                worker_id = f"worker-{self._worker_seq}"
                if worker_id not in self.workers:
                    break
        registry = registry or self.registry_address
        proc = self._process(
            worker_id,
            "schedd_worker.main",
            {
                "SCHEDD_REGISTRY": registry,
                "SCHEDD_WORKER_ID": worker_id,
                "SCHEDD_WORKER_CAPACITY": str(capacity or self.worker_capacity),
                "SCHEDD_ETCD_ENDPOINTS": self.etcd_endpoints,
                **self._etcd_user(access.WORKER_USER),
                "SCHEDD_TASK_DATABASE_URL": self.task_database_url,
                "SCHEDD_METRICS_LISTEN": self._metrics_address(worker_id),
            },
            kind="worker",
            extra_env=env,
            user=user,
        )
        self.workers[worker_id] = proc
        self.worker_registries[worker_id] = registry
        proc.start()
        return proc

    # -- internals: waiting -------------------------------------------------------------------------

    def _await_serving(self, kind: str, deadline: float) -> None:
        """Wait for the api or registry to answer health checks, restarting it on a new port
        when another process grabbed its port between our probe and its bind."""
        for attempt in range(1, _BIND_ATTEMPTS + 1):
            proc = self.api if kind == "api" else self.registry
            address = self.api_address if kind == "api" else self.registry_address
            assert proc is not None
            if self._wait_health(proc, address, deadline):
                return
            if attempt == _BIND_ATTEMPTS:
                break
            if kind == "api":
                self._spawn_api(new_port=True)
            else:
                self._spawn_registry(new_port=True)
        raise ClusterError(f"{kind} could not bind a free port in {_BIND_ATTEMPTS} attempts")

    def _wait_health(self, proc: ServiceProcess, address: str, deadline: float) -> bool:
        """True once ``proc`` answers SERVING at ``address``; False if it exited because its port
        was taken; raises ClusterError on any other exit and on the deadline."""
        serving = health_pb2.HealthCheckResponse.SERVING
        with grpc.insecure_channel(address, options=_HEALTH_CHANNEL_OPTIONS) as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            while True:
                if not proc.alive:
                    if any(m in proc.log_tail().lower() for m in _BIND_FAILURE_MARKERS):
                        return False
                    raise ClusterError(proc.describe_failure(f"{proc.name} exited during start-up"))
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise ClusterError(
                        proc.describe_failure(
                            f"{proc.name} did not answer health checks at {address} in time"
                        )
                    )
                try:
                    resp = stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=min(1.0, remaining))
                    if resp.status == serving:
                        return True
                except grpc.RpcError:
                    pass
                time.sleep(_POLL_SECONDS)

    def _wait_http(self, proc: ServiceProcess, url: str, deadline: float) -> bool:
        """True once ``url`` answers 200; False if ``proc`` exited because its port was taken; raises
        ClusterError on any other exit and on the deadline."""
        while True:
            if not proc.alive:
                if any(m in proc.log_tail().lower() for m in _BIND_FAILURE_MARKERS):
                    return False
                raise ClusterError(proc.describe_failure(f"{proc.name} exited during start-up"))
            if time.monotonic() >= deadline:
                raise ClusterError(proc.describe_failure(f"{proc.name} did not answer {url} in time"))
            with contextlib.suppress(OSError), urllib.request.urlopen(url, timeout=1) as resp:
                if resp.status == 200:
                    return True
            time.sleep(_POLL_SECONDS)

    def _wait_no_foreign_leader(self, deadline: float) -> None:
        """Wait for a leader key left by someone else to go away (its lease expiring)."""
        while True:
            info = self.current_leader_key()
            if info is None:
                return
            if time.monotonic() >= deadline:
                raise ClusterError(
                    f"another scheduler ({info.identity!r}, token {info.token}) leads on etcd "
                    f"{self.etcd_endpoints}; stop it before starting a cluster there"
                )
            time.sleep(0.1)

    def _wait_leader(self, above: int, deadline: float) -> tuple[int, ServiceProcess]:
        while True:
            candidates = list(self.schedulers.values())
            dead = [p for p in candidates if not p.alive and not p.stopped]
            if dead:
                raise ClusterError(
                    "\n\n".join(
                        p.describe_failure(f"{p.name} exited while waiting for a leader") for p in dead
                    )
                )
            token, holder = self.fence()
            proc = self.schedulers.get(holder)
            if token > above and proc is not None and proc.alive:
                return token, proc
            if time.monotonic() >= deadline:
                alive = [p for p in candidates if p.alive]
                details = "\n\n".join(p.describe_failure("log") for p in alive) or "no scheduler is alive"
                raise ClusterError(
                    f"no scheduler raised the fence above {above} in time (fence: token {token}, "
                    f"holder {holder!r}):\n{details}"
                )
            time.sleep(_POLL_SECONDS * 2)

    def _wait_worker(self, proc: ServiceProcess, since: datetime | None, deadline: float) -> None:
        worker_id = proc.name
        while True:
            if not proc.alive:
                raise ClusterError(proc.describe_failure(f"worker {worker_id} exited before connecting"))
            rows = self.fetch("SELECT state, last_seen_at FROM workers WHERE worker_id = $1", worker_id)
            if rows and rows[0]["state"] == "active" and (since is None or rows[0]["last_seen_at"] >= since):
                return
            if time.monotonic() >= deadline:
                registry_proc = self.registries.get(self.worker_registries.get(worker_id, ""), self.registry)
                registry = registry_proc.describe_failure("registry log") if registry_proc else ""
                raise ClusterError(
                    proc.describe_failure(
                        f"worker {worker_id} did not connect to the registry at "
                        f"{self.worker_registries.get(worker_id, self.registry_address)} "
                        f"in time (workers row: {rows[0] if rows else 'none'})"
                    )
                    + f"\n\n{registry}"
                )
            time.sleep(_POLL_SECONDS * 2)

    # -- internals: misc ----------------------------------------------------------------------------

    def _db_now(self) -> datetime:
        value = self.fetchval("SELECT now()")
        assert isinstance(value, datetime)
        return value

    def _require_running(self) -> None:
        if not self._started:
            raise ClusterError("the cluster is not running")
        if self._initial_registries:
            if self.registry is None or not self.registry.alive:
                raise ClusterError("the cluster is not running")
        elif self.api is None or not self.api.alive:
            raise ClusterError("the cluster is not running")

    def _worker(self, worker_id: str) -> ServiceProcess:
        try:
            return self.workers[worker_id]
        except KeyError:
            raise ClusterError(f"no worker {worker_id!r}; workers: {', '.join(self.workers)}") from None

    def _scheduler(self, identity: str) -> ServiceProcess:
        try:
            return self.schedulers[identity]
        except KeyError:
            raise ClusterError(
                f"no scheduler {identity!r}; schedulers: {', '.join(self.schedulers)}"
            ) from None

    def _redacted_url(self) -> str:
        head, sep, tail = self.database_url.rpartition("@")
        return f"{head.split('://')[0]}://...@{tail}" if sep else self.database_url
