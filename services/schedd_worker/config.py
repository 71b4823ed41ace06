"""Configuration of a worker, read once in ``main``."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class WorkerConfig:
    registry: str
    worker_id: str
    hostname: str
    queues: tuple[str, ...] = ("default",)
    capacity: int = 4
    code_version: str = ""
    #: Seconds between SIGTERM and SIGKILL when a task must stop.
    kill_grace: float = 5.0
