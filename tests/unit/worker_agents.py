"""A worker agent for unit tests: never connected, its messages read from ``agent._outgoing``."""

from __future__ import annotations

from pathlib import Path

from schedd_core.clock import FakeClock
from schedd_worker.agent import WorkerAgent
from schedd_worker.config import WorkerConfig


def unconnected_agent(tmp_path: Path, clock: FakeClock | None = None) -> WorkerAgent:
    """An agent whose registry address leads nowhere, on ``clock`` (a new fake one when None)."""
    config = WorkerConfig(
        registries=("127.0.0.1:1",),
        worker_id="w",
        hostname="h",
        incarnation="i",
        bundle_cache_dir=str(tmp_path / "bundles"),
    )
    return WorkerAgent(config, clock=clock or FakeClock())
