"""Prometheus metrics of a registry: connected workers and their credits, assignments, what each
queue holds (the signal autoscalers scale workers on), pool slots, how long tasks waited in their
queue and how their attempts ended.

Gauges of the deployment (queues, pools) and of this registry's workers are read when a scrape
asks for them (:class:`DeploymentGauges`, on the registry's event loop), never on a timer of their
own: an unscraped registry reads nothing, and a scrape sees the store as it is at that moment. The
deployment's gauges are the same on every registry (take one registry's, or the max, never the
sum); a queue once seen stays listed, at 0 when it empties, so an autoscaler reads 0 rather than
nothing. A scrape while the store is unreachable answers without them (the worker gauges still).

Counters and histograms count what this registry did: the assignments it sent, and the results it
applied (a result applied by another registry, or a repeated or stale report, is not counted here);
sum them over registries. The ``dag`` label takes at most
:data:`DAG_LABELS` distinct values per process; results of later DAGs count under ``_other``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric

from schedd.v1 import worker_pb2
from schedd_registry.dispatcher import Dispatcher
from schedd_store import pools
from schedd_store.database import Engine
from schedd_store.queue_loads import QueueLoad, queue_loads
from schedd_telemetry import exposition
from schedd_telemetry.labels import BoundedLabel, LabelledChildren

log = logging.getLogger(__name__)

#: Longest a scrape waits for the registry's gauges, in seconds.
SCRAPE_TIMEOUT = 5.0
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
        self._outcome_of = LabelledChildren(self.outcomes)
        self._duration_of = LabelledChildren(self.duration)

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
        self._outcome_of(dag, state).inc()
        if state != "abandoned" and result.HasField("start_time") and result.HasField("end_time"):
            start, end = result.start_time, result.end_time
            seconds = (end.seconds - start.seconds) + (end.nanos - start.nanos) / 1e9
            self._duration_of(dag).observe(max(seconds, 0.0))

    def read_at_scrape(self, engine: Engine, dispatcher: Dispatcher, loop: asyncio.AbstractEventLoop) -> None:
        """Serve the deployment's and the workers' gauges, read from ``engine`` and ``dispatcher`` on
        ``loop`` when scraped."""
        self.registry.register(DeploymentGauges(engine, dispatcher, loop))


class DeploymentGauges:
    """A collector whose figures are read when scraped (see the module docstring).

    ``collect`` runs in the metrics server's thread; the reads run on the registry's event loop, so
    the dispatcher's sessions are read on the thread that changes them. A scrape waits at most
    :data:`SCRAPE_TIMEOUT` seconds and answers without these gauges when that is not enough."""

    def __init__(self, engine: Engine, dispatcher: Dispatcher, loop: asyncio.AbstractEventLoop) -> None:
        self._engine = engine
        self._dispatcher = dispatcher
        self._loop = loop
        #: Queues seen so far: listed at 0 once empty. Changed on the event loop only.
        self._known_queues: set[str] = set()

    def describe(self) -> list[Metric]:
        return list(_families().values())

    def collect(self) -> list[Metric]:
        reading = self._read()
        try:
            future = asyncio.run_coroutine_threadsafe(reading, self._loop)
        except RuntimeError:  # the loop is closed: the registry is exiting
            reading.close()
            return []
        try:
            return future.result(timeout=SCRAPE_TIMEOUT)
        except Exception as exc:  # the loop too busy for the scrape's patience
            future.cancel()
            log.warning("metrics: registry gauges not read (%s)", type(exc).__name__)
            return []

    async def _read(self) -> list[Metric]:
        families = _families()
        sessions = self._dispatcher.sessions
        families["workers"].add_metric([], len(sessions))
        families["free_slots"].add_metric([], sum(s.credits for s in sessions))
        try:
            loads = await queue_loads(self._engine)
            listed = await pools.list_pools(self._engine)
        except Exception as exc:
            log.warning("metrics: queue and pool gauges not read: %s", exc)
            return [families["workers"], families["free_slots"]]
        self._known_queues |= set(loads)
        for queue in sorted(self._known_queues):
            load = loads.get(queue, QueueLoad(0, 0))
            families["depth"].add_metric([queue], load.queued)
            families["running"].add_metric([queue], load.running)
            families["demand"].add_metric([queue], load.demand)
        for pool in listed:
            families["pool_slots"].add_metric([pool.name, "used"], pool.used)
            families["pool_slots"].add_metric([pool.name, "free"], max(pool.slots - pool.used, 0))
        return list(families.values())


def _families() -> dict[str, GaugeMetricFamily]:
    """The gauges :class:`DeploymentGauges` serves, without samples."""
    return {
        "depth": GaugeMetricFamily(
            "schedd_queue_depth", "Task instances queued, by queue.", labels=["queue"]
        ),
        "running": GaugeMetricFamily("schedd_queue_running", "Attempts running, by queue.", labels=["queue"]),
        "demand": GaugeMetricFamily(
            "schedd_queue_demand",
            "Task instances queued plus attempts running, by queue: the slots the queue could use now "
            "(desired workers = ceil(demand / slots per worker)).",
            labels=["queue"],
        ),
        "pool_slots": GaugeMetricFamily(
            "schedd_pool_slots", "Slots of each pool, used and free.", labels=["pool", "state"]
        ),
        "workers": GaugeMetricFamily("schedd_registry_workers", "Workers connected to this registry."),
        "free_slots": GaugeMetricFamily("schedd_registry_free_slots", "Unspent worker credits."),
    }
