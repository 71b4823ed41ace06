"""The state every part of :class:`schedd_devstack.services.Cluster` shares: its settings, the
processes it started, and its look at the database.

:class:`ClusterBase` holds what the constructor was given and the processes by kind; the servers
(``cluster_servers``), the schedulers (``cluster_schedulers``) and the workers (``cluster_workers``)
each add their own methods on top of it, and ``services.Cluster`` puts them together with the
start and the stop. Nothing here starts a process by itself.
"""

from __future__ import annotations

import os
import secrets
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import asyncpg  # type: ignore[import-untyped, unused-ignore]  # no stubs

from schedd_coord import access
from schedd_coord.credentials import EtcdAuth
from schedd_core.database_url import asyncpg_dsn
from schedd_devstack._process import run_coroutine_sync
from schedd_devstack.etcd_access import EtcdCredentials
from schedd_devstack.ports import LOCALHOST, free_port
from schedd_devstack.postgres import ensure_task_role
from schedd_devstack.process import DEFAULT_STOP_TIMEOUT, ClusterError, ServiceProcess
from schedd_store.migrate import upgrade_async

DEFAULT_STARTUP_TIMEOUT = 60.0
#: How often a service whose port was taken is started again on new ports before giving up.
BIND_ATTEMPTS = 3
POLL_SECONDS = 0.05


@dataclass
class ClusterShape:
    """How many processes of each kind :meth:`Cluster.start` starts, and on which ports."""

    schedulers: int = 1
    workers: int = 2
    registries: int = 1
    api_port: int | None = None
    registry_port: int | None = None
    web: bool = False
    web_port: int | None = None

    def check(self) -> None:
        if self.schedulers < 0 or self.workers < 0 or self.registries < 0:
            raise ValueError("schedulers, workers and registries must not be negative")
        if self.registries == 0 and self.workers > 0:
            raise ValueError("workers need a registry: registries=0 requires workers=0")


@dataclass
class KindSettings:
    """The settings of every process of a kind (``scheduler``, ``worker``, ``registry``, ``api``)."""

    scheduler: Mapping[str, str] | None = None
    worker: Mapping[str, str] | None = None
    registry: Mapping[str, str] | None = None
    dags_paused_at_creation: bool = False
    by_kind: dict[str, dict[str, str]] = field(init=False)

    def __post_init__(self) -> None:
        self.by_kind = {
            "scheduler": dict(self.scheduler or {}),
            "worker": dict(self.worker or {}),
            "registry": dict(self.registry or {}),
            "api": {"SCHEDD_DAGS_PAUSED_AT_CREATION": str(self.dags_paused_at_creation).lower()},
        }


def service_env(base: Mapping[str, str] | None) -> dict[str, str]:
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


class ClusterBase:
    """Settings, processes and database access of a cluster; see :class:`schedd_devstack.services.Cluster`."""

    def __init__(
        self,
        database_url: str,
        etcd_endpoints: str,
        log_dir: Path,
        *,
        shape: ClusterShape,
        kinds: KindSettings,
        worker_capacity: int = 4,
        python: str = sys.executable,
        env: Mapping[str, str] | None = None,
        common_env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        startup_timeout: float = DEFAULT_STARTUP_TIMEOUT,
        stop_timeout: float = DEFAULT_STOP_TIMEOUT,
        auth: bool = False,
        etcd_credentials: EtcdCredentials | None = None,
    ) -> None:
        shape.check()
        self._shape = shape
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
        self.auth = auth
        self._base_env = service_env(env)
        if not auth:
            self._base_env["SCHEDD_AUTH"] = "none"
        self._base_env.update(common_env or {})
        self._kind_env = kinds.by_kind
        #: with ``auth``: an admin token (for schedctl) and the token every worker connects with
        self.admin_token = ""
        self.worker_token = ""
        self.tag = secrets.token_hex(2)
        self._init_processes()
        self._started = False

    def _init_processes(self) -> None:
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

    # -- the database -------------------------------------------------------------------------------

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

    def migrate(self) -> None:
        """Bring the database schema to head (safe to repeat), and make sure the task role exists."""
        try:
            run_coroutine_sync(lambda: upgrade_async(self.database_url))
            self.task_database_url = ensure_task_role(self.database_url)
        except Exception as exc:
            raise ClusterError(f"migrating {self._redacted_url()} failed: {exc}") from exc

    def _db_now(self) -> datetime:
        value = self.fetchval("SELECT now()")
        assert isinstance(value, datetime)
        return value

    def _redacted_url(self) -> str:
        head, sep, tail = self.database_url.rpartition("@")
        return f"{head.split('://')[0]}://...@{tail}" if sep else self.database_url

    # -- processes ----------------------------------------------------------------------------------

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

    def _restart_on_new_metrics_port(self, proc: ServiceProcess) -> ServiceProcess:
        """Start a process that lost its ``/metrics`` port again, as itself but on a new port; the
        caller puts the new process where the old one was."""
        again = ServiceProcess(
            proc.name,
            proc.argv,
            env={**proc.env, "SCHEDD_METRICS_LISTEN": self._metrics_address(proc.name)},
            log_dir=self.log_dir,
            cwd=proc.cwd,
            stop_timeout=proc.stop_timeout,
            user=proc.user,
        )
        again.start()
        return again

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

    def _require_running(self) -> None:
        if not self._started:
            raise ClusterError("the cluster is not running")
        if self._shape.registries:
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
