"""Faults of the network paths around the registry, across real containers: a worker cut off from its
registry while its task runs (``network disconnect``), and packets between the registry and
PostgreSQL delayed and lost (``tc netem`` in the registry's network namespace). Afterwards the
invariants of tests/chaos/invariants.py hold."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import cast

from schedd_devstack.services import Cluster
from tests.chaos.invariants import FenceWatch, attempts_per_task, check_all, marked_dag, wait_settled
from tests.containers.engine import Engine
from tests.containers.fault_cluster import MARKS, FaultCluster, attempts, register, trigger
from tests.polling import wait_until

SETTLE = 180.0


def _marks(tmp_path: Path) -> Path:
    marks = tmp_path / "marks"
    marks.mkdir()
    marks.chmod(0o777)  # the workers write their marks as uid 10001
    return marks


def test_a_worker_cut_off_from_its_registry_while_its_task_runs(
    container_engine: Engine, tmp_path: Path
) -> None:
    """The cut-off worker stops its attempt; the leader fails it over after the silence limit and the
    retry runs on the other worker: two attempts, the first lost, no overlap, one success."""
    marks = _marks(tmp_path)
    name = f"schedd-faults-{os.getpid()}"
    fast = {
        "SCHEDD_HEARTBEAT_INTERVAL": "0.5",
        "SCHEDD_WORKER_LEASE_TTL": "2",
        "SCHEDD_ZOMBIE_THRESHOLD": "4",
    }
    with FaultCluster(container_engine, name, marks, fast) as cluster:
        cluster.start(workers=0)
        cluster.add_worker("cut")
        register(cluster, tmp_path / "work.yaml", marked_dag("work", {"t": []}, Path(MARKS), 6.0))
        with FenceWatch(cast(Cluster, cluster)):
            trigger(cluster, "work", "r1")
            wait_until(
                "the task to start on the worker", lambda: any(marks.iterdir()), 60, retry_on=(Exception,)
            )
            cluster.add_worker("steady")
            cut_at = time.monotonic()
            cluster.networks["work"].disconnect(cluster.container("cut"))
            wait_until(
                "the retry to start elsewhere",
                lambda: len(attempts(cluster, "work")) == 2,
                SETTLE,
                interval=0.2,
                retry_on=(Exception,),
            )
            moved_at = time.monotonic()
            wait_settled(cast(Cluster, cluster), "work", ["r1"], SETTLE)
            settled = time.monotonic() - cut_at
        assert attempts(cluster, "work") == [("t", "cut", "lost"), ("t", "steady", "success")]
        print(
            f"\nworker cut off from its registry: retry started after {moved_at - cut_at:.2f} s, "
            f"settled after {settled:.2f} s, attempts re-run {sum(attempts_per_task(marks).values()) - 1}"
        )
        check_all(cast(Cluster, cluster), marks, {"t": []})


def test_delay_and_loss_between_the_registry_and_postgres(container_engine: Engine, tmp_path: Path) -> None:
    marks = _marks(tmp_path)
    edges: dict[str, list[str]] = {f"t{i}": [] for i in range(8)} | {"join": [f"t{i}" for i in range(8)]}
    with FaultCluster(container_engine, f"schedd-faults-{os.getpid()}", marks) as cluster:
        cluster.start()
        register(cluster, tmp_path / "fan.yaml", marked_dag("fan", edges, Path(MARKS), 1.0))
        runs = ["r1", "r2", "r3"]
        with FenceWatch(cast(Cluster, cluster)):
            impairment = cluster.impair("registry", "db", "150ms 50ms", 10)
            started = time.monotonic()
            try:
                for run_id in runs:
                    trigger(cluster, "fan", run_id)
                wait_settled(cast(Cluster, cluster), "fan", runs, SETTLE)
            finally:
                cluster.restore("registry", "db")
            settled = time.monotonic() - started
        reruns = sum(n - 1 for n in attempts_per_task(marks).values())
        print(f"\nregistry <-> PostgreSQL, {impairment}: settled after {settled:.2f} s, "
              f"attempts re-run {reruns}")  # fmt: skip
        check_all(cast(Cluster, cluster), marks, edges)
