"""Configuration of the scheduler service, read once in ``main``."""

from __future__ import annotations

from dataclasses import dataclass, field

from schedd_coord.credentials import EtcdAuth
from schedd_coord.lease import LeaseTiming
from schedd_core.limits import DEFAULT_MAX_MAP_LENGTH
from schedd_exec.environment import TaskEnvironment
from schedd_scheduler.watcher_config import WatcherSpec
from schedd_store.retention import Retention


@dataclass(frozen=True)
class SchedulerConfig:
    database_url: str
    etcd_endpoints: str
    identity: str
    #: the etcd user (``SCHEDD_ETCD_USER``); None: no authentication
    etcd_auth: EtcdAuth | None = None
    lease: LeaseTiming = field(default_factory=LeaseTiming)
    #: Most runs evaluated in one fenced transaction.
    batch_size: int = 500
    #: Task instances one pass plans besides its oldest run: the smallest pending runs whose task
    #: counts add up to at most this. Keeps every pass well inside the lease's renew deadline.
    pass_budget: int = 5000
    #: Most task instances one mapped task expands into (Airflow's ``max_map_length``).
    max_map_length: int = DEFAULT_MAX_MAP_LENGTH
    db_pool_size: int = 4
    #: Seconds a SIGTERM hand-over waits for the current pass to finish.
    stop_grace: float = 5.0
    #: host:port to serve Prometheus metrics on; empty for none.
    metrics_listen: str = ""
    #: Seconds unheard after which a running attempt is lost, for attempts whose worker has no row
    #: (the windows of every other worker are stored with it by its registry).
    zombie_threshold: float = 30.0
    #: Losses after which a task instance fails instead of running again.
    max_lost_attempts: int = 3
    #: distributed (registries and workers), local (subprocesses of this process) or sequential.
    executor: str = "distributed"
    #: Tasks the local executor runs at once.
    parallelism: int = 8
    #: The metadata database as the task role, for transactional tasks of the local executor.
    task_database_url: str = ""
    #: What the local executor's task processes start with and as whom they run; None: the allowed
    #: part of the scheduler's environment, as its user (``schedd_exec.environment``).
    task_environment: TaskEnvironment | None = None
    #: How long finished runs, output and the other records are kept (the leader deletes the rest).
    retention: Retention = field(default_factory=Retention)
    #: Seconds between two rounds of retention.
    housekeeping_interval: float = 600.0
    #: The asset watchers the leader runs (``SCHEDD_ASSET_WATCHERS``; schedd_scheduler.watcher_config).
    asset_watchers: tuple[WatcherSpec, ...] = ()

    def session_settings(self) -> dict[str, str]:
        """PostgreSQL settings of every connection of the scheduler's engine.

        A leader paused inside a transaction (SIGSTOP, GC) holds a shared lock on the fence row,
        which would block the next leader from raising the fence. PostgreSQL ends such a session
        once it has been idle in its transaction for ``idle_in_transaction_session_timeout``, or
        once one statement ran for ``statement_timeout``. Both are below the renew deadline, and
        their sum is below the TTL, so the lock of a leader frozen at any point of a transaction
        is released before etcd can even hand the lease to a standby. A statement that would run
        longer than the renew deadline could not commit inside the term anyway.

        JIT compilation is off: the scheduler's statements are short OLTP statements for which
        compiling costs far more than it saves (and the planner's estimate of when it pays off
        follows statistics the scheduler does not control).
        """
        statement_ms = int(self.lease.renew_deadline * 1000)
        idle_ms = max(100, int(min(self.lease.renew_deadline / 2, self.lease.margin) * 1000))
        return {
            "idle_in_transaction_session_timeout": str(idle_ms),
            "statement_timeout": str(statement_ms),
            "jit": "off",
        }
