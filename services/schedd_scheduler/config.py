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
