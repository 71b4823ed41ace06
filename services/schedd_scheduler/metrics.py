"""Prometheus metrics of a scheduler replica, served over HTTP when a metrics address is given."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from schedd_telemetry import exposition


class SchedulerMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.is_leader = Gauge("schedd_scheduler_is_leader", "1 while this replica leads.", registry=r)
        self.elections = Counter("schedd_scheduler_elections", "Elections this replica won.", registry=r)
        self.fence_rejections = Counter(
            "schedd_scheduler_fence_rejections", "Write transactions rejected by the fence.", registry=r
        )
        self.failover_seconds = Gauge(
            "schedd_scheduler_failover_seconds",
            "Seconds from seeing the leader key vanish to this replica's first pass as leader.",
            registry=r,
        )
        self.passes = Counter("schedd_scheduler_passes", "Scheduling passes committed.", registry=r)
        self.tasks_queued = Counter("schedd_scheduler_tasks_queued", "Task instances queued.", registry=r)
        self.pass_seconds = Histogram(
            "schedd_scheduler_pass_seconds",
            "Duration of one scheduling pass.",
            registry=r,
            buckets=(0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0),
        )

        self.runs_scheduled = Counter(
            "schedd_scheduler_runs_scheduled", "Scheduled runs made for ended intervals.", registry=r
        )
        self.schedule_delay_seconds = Histogram(
            "schedd_scheduler_schedule_delay_seconds",
            "Seconds from the end of a data interval to the creation of its scheduled run.",
            registry=r,
            buckets=(0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 60.0, 3600.0),
        )
        self.backfill_runs = Counter(
            "schedd_scheduler_backfill_runs", "Runs made or rerun for backfills.", registry=r
        )

    def serve(self, address: str) -> None:
        """Serve ``/metrics`` on ``address`` from a background thread (``schedd_telemetry.exposition``:
        an address without a host is the loopback interface, as for every service)."""
        exposition.serve(self.registry, address)
