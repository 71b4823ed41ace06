"""The workers of a :class:`schedd_devstack.services.Cluster`.

A worker counts as connected once its ``workers`` row is ``active`` and was written after it was
started. While waiting for that, a worker that exited because its ``/metrics`` port was taken
before it bound it is started again, as the same worker id, on a new port (up to
``BIND_ATTEMPTS`` times); any other exit, and the deadline, raise
:class:`~schedd_devstack.process.ClusterError` with its log tail and its registry's. A worker
started without waiting gets no such second start.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from datetime import datetime

from schedd_coord import access
from schedd_devstack.cluster_base import BIND_ATTEMPTS, POLL_SECONDS, ClusterBase
from schedd_devstack.process import ClusterError, ServiceProcess


class WorkersMixin(ClusterBase):
    """Starting, stopping and waiting for workers."""

    def add_worker(
        self,
        worker_id: str | None = None,
        *,
        capacity: int | None = None,
        wait: bool = True,
        registry: str | None = None,
        env: Mapping[str, str] | None = None,
        user: str = "",
    ) -> ServiceProcess:
        """Start one more worker (default id ``worker-N``; an id whose process is dead may be
        reused) and, with ``wait``, return once it is connected. ``registry`` is the address of
        the registry to connect to (default: the first one); ``env`` adds settings for this worker
        only (``SCHEDD_DRAIN_GRACE``...), winning over every other setting; ``user`` runs it as that
        user (from a root test process; the cluster's ``python`` must be reachable by the user)."""
        self._require_running()
        if not self.registries:
            raise ClusterError("this cluster has no registry for a worker to connect to")
        if registry is not None and registry not in self.registries:
            raise ClusterError(f"no registry at {registry!r}; registries: {', '.join(self.registries)}")
        if worker_id is not None and worker_id in self.workers and self.workers[worker_id].alive:
            raise ClusterError(f"worker {worker_id} is already running")
        db_now = self._db_now()
        proc = self._spawn_worker(worker_id, capacity=capacity, registry=registry, env=env, user=user)
        if wait:
            proc = self._wait_worker(proc, db_now, time.monotonic() + self.startup_timeout)
        return proc

    def stop_worker(self, worker_id: str, timeout: float | None = None) -> int | None:
        """Graceful stop (SIGTERM, then SIGKILL after ``timeout``); returns the exit status."""
        return self._worker(worker_id).terminate(timeout)

    def kill_worker(self, worker_id: str) -> int | None:
        """SIGKILL a worker, as a crash would (its running tasks are orphaned, not killed)."""
        return self._worker(worker_id).kill()

    def wait_for_worker(self, worker_id: str, timeout: float = 30.0) -> None:
        """Wait until the worker's ``workers`` row is active (however old it is)."""
        self._wait_worker(self._worker(worker_id), None, time.monotonic() + timeout)

    # -- internals ----------------------------------------------------------------------------------

    def _spawn_worker(
        self,
        worker_id: str | None = None,
        *,
        capacity: int | None = None,
        registry: str | None = None,
        env: Mapping[str, str] | None = None,
        user: str = "",
    ) -> ServiceProcess:
        if worker_id is None:
            while True:
                self._worker_seq += 1
                worker_id = f"worker-{self._worker_seq}"
                if worker_id not in self.workers:
                    break
        registry = registry or self.registry_address
        proc = self._process(
            worker_id,
            "schedd_worker.main",
            {
                "SCHEDD_REGISTRY": registry,
                "SCHEDD_WORKER_ID": worker_id,
                "SCHEDD_WORKER_CAPACITY": str(capacity or self.worker_capacity),
                "SCHEDD_ETCD_ENDPOINTS": self.etcd_endpoints,
                **self._etcd_user(access.WORKER_USER),
                "SCHEDD_TASK_DATABASE_URL": self.task_database_url,
                "SCHEDD_METRICS_LISTEN": self._metrics_address(worker_id),
            },
            kind="worker",
            extra_env=env,
            user=user,
        )
        self.workers[worker_id] = proc
        self.worker_registries[worker_id] = registry
        proc.start()
        return proc

    def _wait_worker(self, proc: ServiceProcess, since: datetime | None, deadline: float) -> ServiceProcess:
        """Wait until the worker is connected; returns its process (a new one when it had to be
        started again on a new port)."""
        worker_id = proc.name
        restarts = 0
        while True:
            if not proc.alive and not proc.stopped and proc.lost_its_port() and restarts < BIND_ATTEMPTS:
                restarts += 1
                proc = self.workers[worker_id] = self._restart_on_new_metrics_port(proc)
            if not proc.alive:
                raise ClusterError(proc.describe_failure(f"worker {worker_id} exited before connecting"))
            rows = self.fetch("SELECT state, last_seen_at FROM workers WHERE worker_id = $1", worker_id)
            if rows and rows[0]["state"] == "active" and (since is None or rows[0]["last_seen_at"] >= since):
                return proc
            if time.monotonic() >= deadline:
                raise ClusterError(self._worker_late(proc, rows[0] if rows else "none"))
            time.sleep(POLL_SECONDS * 2)

    def _worker_late(self, proc: ServiceProcess, row: object) -> str:
        """What a worker that did not connect in time logged, and what its registry logged."""
        worker_id = proc.name
        registry_proc = self.registries.get(self.worker_registries.get(worker_id, ""), self.registry)
        registry = registry_proc.describe_failure("registry log") if registry_proc else ""
        return (
            proc.describe_failure(
                f"worker {worker_id} did not connect to the registry at "
                f"{self.worker_registries.get(worker_id, self.registry_address)} "
                f"in time (workers row: {row})"
            )
            + f"\n\n{registry}"
        )
