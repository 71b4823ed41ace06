"""Run the schedd services as real subprocesses: for the end-to-end tests and for ``make run``.

:class:`ServiceProcess` is one service process (``python -m schedd_api.main`` and so
on) with its output in a log file: start it, stop it gracefully (SIGTERM, a bounded
wait, then SIGKILL), crash it (SIGKILL), freeze and thaw it (SIGSTOP / SIGCONT).

:class:`Cluster` is a whole schedd deployment on top of a PostgreSQL and an etcd that
already run: it migrates the database, starts the api, the registry, N scheduler
replicas and M workers on loopback ports picked by :mod:`schedd_devstack.ports`, and returns
from :meth:`Cluster.start` only once

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

A port is picked before the service binds it, so another process may take it in between: a service
that exits for that reason is started again on new ports (``BIND_ATTEMPTS`` times) by the waits of
``start``, ``add_worker``, ``add_registry`` and ``wait_for_leader``.

The parts, by concern: :mod:`~schedd_devstack.process` (one process),
:mod:`~schedd_devstack.cluster_base` (settings, the database),
:mod:`~schedd_devstack.cluster_servers` (api, registries, web UI),
:mod:`~schedd_devstack.cluster_schedulers` (schedulers, the election) and
:mod:`~schedd_devstack.cluster_workers` (workers).
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
import weakref
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType

import asyncpg  # type: ignore[import-untyped, unused-ignore]  # no stubs

from schedd_coord.errors import CoordinationError
from schedd_devstack._process import register_running, run_coroutine_sync, unregister_running
from schedd_devstack.cluster_base import DEFAULT_STARTUP_TIMEOUT, ClusterShape, KindSettings
from schedd_devstack.cluster_schedulers import SchedulersMixin
from schedd_devstack.cluster_servers import ServersMixin
from schedd_devstack.cluster_workers import WorkersMixin
from schedd_devstack.credentials import create_cluster_tokens
from schedd_devstack.etcd_access import EtcdCredentials
from schedd_devstack.process import DEFAULT_STOP_TIMEOUT, ClusterError, ServiceProcess, terminate_all

__all__ = ["Cluster", "ClusterError", "ServiceProcess", "terminate_all"]

# A leader key left behind by a crashed scheduler disappears when its lease expires
# (3 s by default; after an etcd restart the TTL starts over).
_STALE_LEADER_TIMEOUT = 15.0

_clusters: weakref.WeakSet[Cluster] = weakref.WeakSet()
_clusters_lock = threading.Lock()


class Cluster(ServersMixin, SchedulersMixin, WorkersMixin):
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
        super().__init__(
            database_url,
            etcd_endpoints,
            log_dir,
            shape=ClusterShape(schedulers, workers, registries, api_port, registry_port, web, web_port),
            kinds=KindSettings(scheduler_env, worker_env, registry_env, dags_paused_at_creation),
            worker_capacity=worker_capacity,
            python=python,
            env=env,
            common_env=service_env,
            cwd=cwd,
            startup_timeout=startup_timeout,
            stop_timeout=stop_timeout,
            auth=auth,
            etcd_credentials=etcd_credentials,
        )

    def start(self, *, migrate: bool = True) -> None:
        """Start every service and wait until the cluster is ready (see the module docstring).

        Bounded by ``startup_timeout``; on failure or interruption everything started is
        stopped before the error propagates.
        """
        if self._started:
            raise ClusterError("this cluster has been started already")
        self._started = True
        self._claim_etcd()
        register_running(self, self.stop)
        deadline = time.monotonic() + self.startup_timeout
        try:
            if migrate:
                self.migrate()
            if self.auth:
                made = run_coroutine_sync(lambda: create_cluster_tokens(self.database_url, self.tag))
                self.admin_token, self.worker_token = made.admin, made.worker
                self._kind_env["worker"].setdefault("SCHEDD_WORKER_TOKEN", made.worker)
            self._start_services(deadline)
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

    def _claim_etcd(self) -> None:
        """Refuse to start schedulers on an etcd where another cluster of this process has live ones."""
        with _clusters_lock:
            rivals = [
                c
                for c in _clusters
                if c is not self
                and c.etcd_endpoints == self.etcd_endpoints
                and any(p.alive for p in c.schedulers.values())
            ]
            if rivals and self._shape.schedulers:
                raise ClusterError(
                    "another cluster in this process has live schedulers on the same etcd "
                    f"({self.etcd_endpoints}); they would compete for one leadership: stop it first"
                )
            _clusters.add(self)

    def _start_services(self, deadline: float) -> None:
        """Start the servers, the schedulers and the workers, and wait until each is ready."""
        shape = self._shape
        token_before, _ = self.fence()
        if shape.schedulers:
            self._wait_no_foreign_leader(min(deadline, time.monotonic() + _STALE_LEADER_TIMEOUT))
        self._spawn_api()
        if shape.registries:
            self._spawn_registry()
        extra_registries = [self._spawn_extra_registry() for _ in range(shape.registries - 1)]
        for _ in range(shape.schedulers):
            self._spawn_scheduler()
        if shape.registries:
            self._await_serving("registry", deadline)
        for proc in extra_registries:
            self._await_extra_registry(proc, deadline)
        db_now = self._db_now()
        addresses = list(self.registries)
        new_workers = [
            self._spawn_worker(registry=addresses[i % len(addresses)]) for i in range(shape.workers)
        ]
        self._await_serving("api", deadline)
        if shape.web:
            self._start_web(deadline)
        if shape.schedulers:
            self._wait_leader(token_before, deadline)
        for proc in new_workers:
            self._wait_worker(proc, db_now, deadline)
