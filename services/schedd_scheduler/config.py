"""Configuration of the scheduler service, read once in ``main``."""

from __future__ import annotations

from dataclasses import dataclass, field

from schedd_coord.lease import LeaseTiming


@dataclass(frozen=True)
class SchedulerConfig:
    database_url: str
    etcd_endpoints: str
    identity: str
    lease: LeaseTiming = field(default_factory=LeaseTiming)
    #: Most runs evaluated in one fenced transaction.
    batch_size: int = 500
    db_pool_size: int = 4
    #: Seconds a SIGTERM hand-over waits for the current pass to finish.
    stop_grace: float = 5.0
    #: host:port to serve Prometheus metrics on; empty for none.
    metrics_listen: str = ""
    #: Seconds without a heartbeat after which a running attempt is lost and runs again.
    zombie_threshold: float = 30.0
    #: Losses after which a task instance fails instead of running again.
    max_lost_attempts: int = 3
    #: distributed (registries and workers), local (subprocesses of this process) or sequential.
    executor: str = "distributed"
    #: Tasks the local executor runs at once.
    parallelism: int = 8

    def session_settings(self) -> dict[str, str]:
        """PostgreSQL settings of the scheduler's connections.

        A leader paused inside a transaction (SIGSTOP, GC) holds a shared lock on the fence row,
        which would block the next leader from raising the fence. PostgreSQL ends such a session
        after ``idle_in_transaction_session_timeout``, well inside one lease TTL, so a paused
        leader delays a failover by at most that much.
        """
        idle_ms = max(100, int(self.lease.renew_deadline * 1000 / 2))
        return {
            "idle_in_transaction_session_timeout": str(idle_ms),
            "statement_timeout": str(int(self.lease.ttl * 1000)),
        }
