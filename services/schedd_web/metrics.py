"""Prometheus metrics of the web service, served on ``--metrics-listen`` as the other services do.

Requests are counted by route (the route's pattern, so the label is bounded by the app's routes)
and status; SSE streams, sessions and the shared upstream watches are gauges.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from schedd_telemetry import exposition

BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class WebMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "schedd_web_requests",
            "HTTP requests, by route pattern and status code.",
            ["route", "status"],
            registry=self.registry,
        )
        self.seconds = Histogram(
            "schedd_web_request_seconds",
            "Duration of page requests (event streams excluded), by route pattern.",
            ["route"],
            registry=self.registry,
            buckets=BUCKETS,
        )
        self.streams = Gauge(
            "schedd_web_event_streams", "Open server-sent event streams.", registry=self.registry
        )
        self.sessions = Gauge("schedd_web_sessions", "Signed-in sessions held.", registry=self.registry)
        self.upstream_watches = Gauge(
            "schedd_web_run_watches",
            "WatchRun streams open to the api, each shared by the pages watching one run.",
            registry=self.registry,
        )
        self.run_updates = Counter(
            "schedd_web_run_updates", "Run snapshots received from WatchRun streams.", registry=self.registry
        )

    def serve(self, address: str) -> None:
        exposition.serve(self.registry, address)
