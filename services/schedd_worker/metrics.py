"""Prometheus metrics of a worker: its slots in use and free, and how its attempts ended.

``schedd_worker_slots`` is read from the executor when scraped (never stale); ``outcome`` of
``schedd_worker_attempts_total`` is ``succeeded``, ``failed`` or ``abandoned`` (stopped before it
finished: drained, cancelled, fenced, or handed back unstarted), counted when the worker reports
the attempt, whether or not the registry then applies the report.
"""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge

from schedd_exec.outcome import Outcome
from schedd_telemetry import exposition
from schedd_telemetry.labels import LabelledChildren

OUTCOMES = ("succeeded", "failed", "abandoned")


class WorkerMetrics:
    def __init__(self, capacity: int, running: Callable[[], int]) -> None:
        self.registry = CollectorRegistry()
        slots = Gauge(
            "schedd_worker_slots", "This worker's slots, used and free.", ["state"], registry=self.registry
        )
        slots.labels(state="used").set_function(lambda: min(running(), capacity))
        slots.labels(state="free").set_function(lambda: max(capacity - running(), 0))
        self.attempts = Counter(
            "schedd_worker_attempts",
            "Attempts this worker ended, by outcome (succeeded, failed, abandoned).",
            ["outcome"],
            registry=self.registry,
        )
        self._attempts_of = LabelledChildren(self.attempts)
        for outcome in OUTCOMES:
            self._attempts_of(outcome)

    def serve(self, address: str) -> None:
        exposition.serve(self.registry, address)

    def ended(self, outcome: Outcome) -> None:
        name = "abandoned" if outcome.abandoned else "succeeded" if outcome.succeeded else "failed"
        self._attempts_of(name).inc()
