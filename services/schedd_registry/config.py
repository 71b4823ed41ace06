"""Configuration of the registry service, read once in ``main``."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RegistryConfig:
    database_url: str
    identity: str
    listen: str = "127.0.0.1:50052"
    etcd_endpoints: str = ""
    db_pool_size: int = 6
    heartbeat_interval: float = 5.0
    #: Most assignments claimed for one worker in one statement.
    claim_batch: int = 256
