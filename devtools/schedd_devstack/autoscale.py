"""Scale a local :class:`~schedd_devstack.services.Cluster`'s workers on queue demand, by the rule
``deploy/k8s`` gives KEDA and the HorizontalPodAutoscaler.

The rule (:class:`ScaleRule`, pure):

* the workers a queue wants are ``ceil(demand / slots per worker)``, bounded by a minimum and a
  maximum, where demand is ``schedd_queue_demand{queue}`` (task instances queued plus attempts
  running), the largest value any registry reports (every registry reads the same database);
* more workers are added at once; fewer are removed only down to the highest count wanted during
  the last ``scale_down_window`` seconds (the HPA's scale-down stabilisation window), so a metric
  that dips for a moment drains nothing.

Not modelled: the HPA's 10 % tolerance, its scale-up and scale-down rate policies, and KEDA's
fallback replicas (when no registry answers, :class:`Autoscaler` keeps the workers it has).

:class:`Autoscaler` applies the rule to a running cluster, one :meth:`Autoscaler.step` at a time
on the calling thread (the cluster is not thread-safe): it scrapes every registry's ``/metrics``
over HTTP, starts workers with ``Cluster.add_worker`` (without waiting for them to connect: a
starting worker counts, as a pending pod does) and removes surplus ones the way a Kubernetes
scale-down does, by SIGTERM, which drains the worker: it takes no new work, lets its running
tasks finish within its drain grace and exits. It never kills a worker; a drained worker still
alive when the cluster stops is stopped by the cluster. It removes the workers it started last
first; like the Deployment controller, it does not know which one is idle.
"""

from __future__ import annotations

import math
import time
import urllib.request
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

from schedd_devstack.services import Cluster, ServiceProcess

__all__ = ["Autoscaler", "ScaleRule", "ScalingStep", "desired_workers", "queue_demand"]

DEMAND_METRIC = "schedd_queue_demand"
_SCRAPE_TIMEOUT = 2.0


def desired_workers(demand: float, slots_per_worker: int, min_workers: int, max_workers: int) -> int:
    """``ceil(demand / slots_per_worker)`` bounded by ``[min_workers, max_workers]``."""
    wanted = math.ceil(demand / slots_per_worker) if demand > 0 else 0
    return max(min_workers, min(max_workers, wanted))


@dataclass
class ScaleRule:
    """The worker count to run next, from the demand seen now and during the scale-down window.

    Pure apart from the history it keeps: the caller passes the time (any monotonic clock).
    """

    slots_per_worker: int
    min_workers: int
    max_workers: int
    #: seconds: a scale-down goes no lower than the highest count wanted during this window
    scale_down_window: float = 0.0
    _history: deque[tuple[float, int]] = field(default_factory=deque, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.slots_per_worker < 1:
            raise ValueError("slots_per_worker must be at least 1")
        if not 0 <= self.min_workers <= self.max_workers:
            raise ValueError("need 0 <= min_workers <= max_workers")
        if self.scale_down_window < 0:
            raise ValueError("scale_down_window must not be negative")

    def decide(self, now: float, demand: float, current: int) -> int:
        """The workers to run, given ``demand`` at ``now`` and ``current`` workers running."""
        wanted = desired_workers(demand, self.slots_per_worker, self.min_workers, self.max_workers)
        self._history.append((now, wanted))
        while self._history and self._history[0][0] < now - self.scale_down_window:
            self._history.popleft()
        if wanted >= current:
            return wanted
        return min(current, max(count for _, count in self._history))


def queue_demand(metrics_text: str, queue: str) -> float:
    """``schedd_queue_demand{queue=...}`` in one ``/metrics`` page; 0 when it has no such series
    (a queue that never had a task), as the autoscalers' ``or vector(0)`` reads it."""
    for family in text_string_to_metric_families(metrics_text):
        if family.name != DEMAND_METRIC:
            continue
        for sample in family.samples:
            if sample.name == DEMAND_METRIC and sample.labels.get("queue") == queue:
                return float(sample.value)
    return 0.0


@dataclass(frozen=True)
class ScalingStep:
    """What one :meth:`Autoscaler.step` saw and did."""

    #: the largest demand the registries reported; None when none answered
    demand: float | None
    #: workers running (or starting) before the step, not counting draining ones
    current: int
    #: the count the rule chose (``current`` when no registry answered)
    target: int
    started: tuple[str, ...] = ()
    drained: tuple[str, ...] = ()


class Autoscaler:
    """Keeps ``cluster``'s workers of ``queue`` at what :class:`ScaleRule` says; see the module docstring.

    It manages the workers alive in the cluster when it is made, plus those it starts (with
    ``slots_per_worker`` slots, serving ``queue`` alone), spread round-robin over the cluster's
    registries. ``worker_env`` adds settings for the workers it starts.
    """

    def __init__(
        self,
        cluster: Cluster,
        rule: ScaleRule,
        *,
        queue: str = "default",
        worker_env: dict[str, str] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.cluster = cluster
        self.rule = rule
        self.queue = queue
        self._worker_env = {**(worker_env or {}), "SCHEDD_WORKER_QUEUES": queue}
        self._clock = clock
        self._active: list[str] = [wid for wid, proc in cluster.workers.items() if proc.alive]
        self._draining: list[str] = []
        self._started = 0
        #: every worker this autoscaler started, in order
        self.started: list[str] = []
        #: the exit status of every worker it drained that has exited, by worker id
        self.exited: dict[str, int | None] = {}

    @property
    def active(self) -> list[str]:
        """Workers running or starting that are not draining, oldest first."""
        return list(self._active)

    @property
    def draining(self) -> list[str]:
        """Workers sent SIGTERM that have not exited yet."""
        return list(self._draining)

    def scrape(self) -> float | None:
        """The largest ``schedd_queue_demand`` of the queue over the registries that answered."""
        values = []
        for address in self._metrics_addresses():
            try:
                with urllib.request.urlopen(f"http://{address}/metrics", timeout=_SCRAPE_TIMEOUT) as resp:
                    text = resp.read().decode()
            except OSError:
                continue
            values.append(queue_demand(text, self.queue))
        return max(values) if values else None

    def step(self) -> ScalingStep:
        """Reap drained workers that exited, scrape, decide, then start or drain workers."""
        self._reap()
        demand = self.scrape()
        current = len(self._active)
        if demand is None:
            return ScalingStep(None, current, current)
        target = self.rule.decide(self._clock(), demand, current)
        started = tuple(self._start() for _ in range(target - current))
        drained = tuple(self._drain(self._active[-1]) for _ in range(current - target))
        return ScalingStep(demand, current, target, started, drained)

    def run_until(self, done: Callable[[], bool], timeout: float, interval: float = 0.5) -> list[ScalingStep]:
        """:meth:`step` every ``interval`` seconds until ``done()``; the steps that changed something.

        Raises TimeoutError when ``done()`` is still false after ``timeout`` seconds.
        """
        deadline = self._clock() + timeout
        changes: list[ScalingStep] = []
        while True:
            result = self.step()
            if result.started or result.drained:
                changes.append(result)
            if done():
                return changes
            if self._clock() > deadline:
                raise TimeoutError(f"not done after {timeout:g}s of autoscaling: {changes}")
            time.sleep(interval)

    # -- internals ----------------------------------------------------------------------------------

    def _metrics_addresses(self) -> Iterable[str]:
        for proc in self.cluster.registries.values():
            address = self.cluster.metrics.get(proc.name)
            if address and proc.alive:
                yield address

    def _start(self) -> str:
        registries = list(self.cluster.registries)
        registry = registries[self._started % len(registries)]
        self._started += 1
        proc = self.cluster.add_worker(
            capacity=self.rule.slots_per_worker, wait=False, registry=registry, env=self._worker_env
        )
        self._active.append(proc.name)
        self.started.append(proc.name)
        return proc.name

    def _drain(self, worker_id: str) -> str:
        self._active.remove(worker_id)
        self._draining.append(worker_id)
        self._process(worker_id).request_stop()
        return worker_id

    def _reap(self) -> None:
        for worker_id in list(self._draining):
            proc = self._process(worker_id)
            if not proc.alive:
                self.exited[worker_id] = proc.wait_or_kill(0)  # reaps it; it has exited already
                self._draining.remove(worker_id)
        # A worker that died on its own is no longer capacity: the next step replaces it.
        self._active = [wid for wid in self._active if self._process(wid).alive]

    def _process(self, worker_id: str) -> ServiceProcess:
        return self.cluster.workers[worker_id]
