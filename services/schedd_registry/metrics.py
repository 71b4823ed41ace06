"""Prometheus metrics of a registry: connected workers, assignments, and queue depth per queue
(the signal an autoscaler scales workers on)."""

from __future__ import annotations

import asyncio
import logging

from prometheus_client import CollectorRegistry, Counter, Gauge, start_http_server
from sqlalchemy.ext.asyncio import AsyncEngine

from schedd_registry.dispatcher import Dispatcher
from schedd_store import dispatch

log = logging.getLogger(__name__)


class RegistryMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.queue_depth = Gauge(
            "schedd_queue_depth", "Task instances queued, by queue.", ["queue"], registry=r
        )
        self.workers = Gauge("schedd_registry_workers", "Workers connected to this registry.", registry=r)
        self.free_slots = Gauge("schedd_registry_free_slots", "Unspent worker credits.", registry=r)
        self.assigned = Counter("schedd_registry_assignments", "Assignments sent to workers.", registry=r)

    def serve(self, address: str) -> None:
        host, _, port = address.rpartition(":")
        start_http_server(int(port), addr=host or "0.0.0.0", registry=self.registry)

    async def refresh(self, engine: AsyncEngine, dispatcher: Dispatcher, interval: float = 5.0) -> None:
        """Refresh the gauges every ``interval`` seconds (metrics only; nothing waits on this)."""
        known: set[str] = set()
        while True:
            try:
                depths = await dispatch.queue_depths(engine)
                for queue in known - set(depths):
                    self.queue_depth.labels(queue=queue).set(0)
                for queue, depth in depths.items():
                    self.queue_depth.labels(queue=queue).set(depth)
                known |= set(depths)
                sessions = dispatcher.sessions
                self.workers.set(len(sessions))
                self.free_slots.set(sum(s.credits for s in sessions))
            except Exception as exc:
                log.warning("metrics refresh failed: %s", exc)
            await asyncio.sleep(interval)
