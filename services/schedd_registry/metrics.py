"""Prometheus metrics of a registry: connected workers and their credits, assignments, what each
queue holds (the signal autoscalers scale workers on), pool slots, how long tasks waited in their
queue and how their attempts ended.

Gauges read from PostgreSQL (queues, pools) are refreshed every few seconds by :meth:`refresh`
and are the same on every registry (they describe the whole deployment: take one registry's, or
the max, never the sum). Counters and histograms count what this registry did: the assignments
it sent, and the results it applied (a result applied by another registry, or a repeated or
stale report, is not counted here); sum them over registries. The ``dag`` label takes at most
:data:`DAG_LABELS` distinct values per process; results of later DAGs count under ``_other``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from sqlalchemy.ext.asyncio import AsyncEngine

from schedd.v1 import worker_pb2
from schedd_registry.dispatcher import Dispatcher
from schedd_store import pools
from schedd_store.queue_loads import queue_loads
from schedd_telemetry import exposition
from schedd_telemetry.labels import BoundedLabel

log = logging.getLogger(__name__)

#: Most distinct values of the ``dag`` label.
DAG_LABELS = 100
#: Seconds; from a task picked up at once to one that waited an hour for a slot.
WAIT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 3600.0)
#: Seconds; from a trivial task to a long batch job.
DURATION_BUCKETS = (0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0, 14400.0)

_STATES = {
    worker_pb2.TASK_OUTCOME_SUCCEEDED: "success",
    worker_pb2.TASK_OUTCOME_FAILED: "failed",
    worker_pb2.TASK_OUTCOME_ABANDONED: "abandoned",
}


class RegistryMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.queue_depth = Gauge(
            "schedd_queue_depth", "Task instances queued, by queue.", ["queue"], registry=r
        )
        self.queue_running = Gauge(
            "schedd_queue_running", "Attempts running, by queue.", ["queue"], registry=r
        )
        self.queue_demand = Gauge(
            "schedd_queue_demand",
            "Task instances queued plus attempts running, by queue: the slots the queue could use now "
            "(desired workers = ceil(demand / slots per worker)).",
            ["queue"],
            registry=r,
        )
        self.pool_slots = Gauge(
            "schedd_pool_slots", "Slots of each pool, used and free.", ["pool", "state"], registry=r
        )
        self.workers = Gauge("schedd_registry_workers", "Workers connected to this registry.", registry=r)
        self.free_slots = Gauge("schedd_registry_free_slots", "Unspent worker credits.", registry=r)
        self.assigned = Counter("schedd_registry_assignments", "Assignments sent to workers.", registry=r)
        self.handed_off = Counter(
            "schedd_registry_handoffs",
            "Successors claimed in their upstream task's result transaction and sent to its worker "
            "(counted among the assignments too).",
            registry=r,
        )
        self.queued_to_running = Histogram(
            "schedd_task_queued_to_running_seconds",
            "Seconds from a task instance being queued to its claim for a worker.",
            registry=r,
            buckets=WAIT_BUCKETS,
        )
        self.outcomes = Counter(
            "schedd_task_outcomes",
            "Attempt results this registry applied, by DAG and how the attempt ended "
            "(success, failed, abandoned).",
            ["dag", "state"],
            registry=r,
        )
        self.duration = Histogram(
            "schedd_task_duration_seconds",
            "Seconds attempts ran (start to end, as the worker reported), by DAG.",
            ["dag"],
            registry=r,
            buckets=DURATION_BUCKETS,
        )
        self.dag_label = BoundedLabel(DAG_LABELS)

    def serve(self, address: str) -> None:
        exposition.serve(self.registry, address)

    def claimed(self, assignments: Sequence[worker_pb2.Assignment]) -> None:
        """Count a claim's assignments and how long each waited in its queue."""
        self.assigned.inc(len(assignments))
        now = time.time()
        for assignment in assignments:
            if assignment.HasField("queued_time"):
                queued = assignment.queued_time.seconds + assignment.queued_time.nanos / 1e9
                self.queued_to_running.observe(max(now - queued, 0.0))

    def applied(self, result: worker_pb2.TaskResult) -> None:
        """Count a result this registry applied."""
        state = _STATES.get(result.outcome)
        if state is None:
            return
        dag = self.dag_label(result.dag_id or "_unknown")
        self.outcomes.labels(dag=dag, state=state).inc()
        if state != "abandoned" and result.HasField("start_time") and result.HasField("end_time"):
            seconds = (result.end_time.ToDatetime() - result.start_time.ToDatetime()).total_seconds()
            self.duration.labels(dag=dag).observe(max(seconds, 0.0))

    async def refresh(self, engine: AsyncEngine, dispatcher: Dispatcher, interval: float = 5.0) -> None:
        """Refresh the gauges every ``interval`` seconds (metrics only; nothing waits on this)."""
        known_queues: set[str] = set()
        known_pools: set[str] = set()
        while True:
            try:
                loads = await queue_loads(engine)
                for queue in known_queues - set(loads):
                    for gauge in (self.queue_depth, self.queue_running, self.queue_demand):
                        gauge.labels(queue=queue).set(0)
                for queue, load in loads.items():
                    self.queue_depth.labels(queue=queue).set(load.queued)
                    self.queue_running.labels(queue=queue).set(load.running)
                    self.queue_demand.labels(queue=queue).set(load.demand)
                known_queues |= set(loads)
                listed = {p.name: p for p in await pools.list_pools(engine)}
                for name in known_pools - set(listed):
                    self.pool_slots.remove(name, "used")
                    self.pool_slots.remove(name, "free")
                for name, pool in listed.items():
                    self.pool_slots.labels(pool=name, state="used").set(pool.used)
                    self.pool_slots.labels(pool=name, state="free").set(max(pool.slots - pool.used, 0))
                known_pools = set(listed)
                sessions = dispatcher.sessions
                self.workers.set(len(sessions))
                self.free_slots.set(sum(s.credits for s in sessions))
            except Exception as exc:
                log.warning("metrics refresh failed: %s", exc)
            await asyncio.sleep(interval)
