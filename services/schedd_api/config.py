"""Configuration of the api service, read once in ``main``."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ApiConfig:
    database_url: str
    listen: str = "127.0.0.1:50051"
    etcd_endpoints: str = ""
    db_pool_size: int = 5
