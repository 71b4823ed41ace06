"""Faults of the leader and of the database, across real containers: the leading scheduler's container
killed, PostgreSQL's container restarted mid-run, the leader cut off from etcd (``network
disconnect``) while it still reaches PostgreSQL. Afterwards: no attempt overlaps another of the same
task, no task starts before its upstream tasks ended, the fence token never went down and passes
commit in token order, every run settles with success (tests/chaos/invariants.py)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import cast

import pytest

from schedd_devstack.services import Cluster
from tests.chaos.invariants import FenceWatch, attempts_per_task, check_all, marked_dag, wait_settled
from tests.containers.engine import Engine
from tests.containers.fault_cluster import MARKS, TTL, FaultCluster, register, trigger
from tests.polling import wait_until

FAN = {"a": [], "b": ["a"], "c": ["a"], "d": ["b", "c"]}
RUNS = ["r1", "r2", "r3"]
SETTLE = 180.0


@pytest.fixture
def cluster(container_engine: Engine, tmp_path: Path) -> Iterator[FaultCluster]:
    marks = tmp_path / "marks"
    marks.mkdir()
    marks.chmod(0o777)  # the workers write their marks as uid 10001
    with FaultCluster(container_engine, f"schedd-faults-{os.getpid()}", marks) as started:
        started.start()
        register(started, tmp_path / "fan.yaml", marked_dag("fan", FAN, Path(MARKS), 2.0))
        yield started


def _start_runs(cluster: FaultCluster) -> None:
    for run_id in RUNS:
        trigger(cluster, "fan", run_id)
    wait_until("the first task to start", lambda: any(cluster.marks.iterdir()), 60, retry_on=(Exception,))


def _settle(cluster: FaultCluster, fault_at: float) -> float:
    wait_settled(cast(Cluster, cluster), "fan", RUNS, SETTLE)
    return time.monotonic() - fault_at


def _report(fault: str, cluster: FaultCluster, **figures: float) -> None:
    reruns = sum(n - 1 for n in attempts_per_task(cluster.marks).values())
    shown = ", ".join(f"{name.replace('_', ' ')} {value:.2f} s" for name, value in figures.items())
    print(f"\n{fault}: {shown}, attempts re-run {reruns}")
    check_all(cast(Cluster, cluster), cluster.marks, FAN)


def _term_began(cluster: FaultCluster) -> float:
    """When the current term raised the fence (the database's clock, the host's: containers share it)."""
    return float(cluster.fetchval("SELECT extract(epoch FROM raised_at) FROM scheduler_fence"))


def test_the_leaders_container_killed(cluster: FaultCluster) -> None:
    token, leader = cluster.fence()
    _start_runs(cluster)
    with FenceWatch(cast(Cluster, cluster)):
        killed_at, killed_wall = time.monotonic(), time.time()
        cluster.container(leader).kill()
        wait_until("a standby to lead", lambda: cluster.fence()[0] > token, TTL + 15, retry_on=(Exception,))
        led = _term_began(cluster) - killed_wall
        settled = _settle(cluster, killed_at)
    assert cluster.leader() != leader
    _report("leader container killed", cluster, to_a_new_leader=led, to_settle=settled)
    assert led <= TTL + 0.5, f"the standby led {led:.2f} s after the kill"


def test_postgres_restarted_mid_run(cluster: FaultCluster) -> None:
    _start_runs(cluster)
    with FenceWatch(cast(Cluster, cluster)):
        restarted_at = time.monotonic()
        cluster.container("postgres").restart(timeout=10)
        wait_until(
            "PostgreSQL back", lambda: cluster.fetch("SELECT 1"), 60, interval=0.2, retry_on=(Exception,)
        )
        back_at = time.monotonic()
        settled = _settle(cluster, restarted_at)
    _report("PostgreSQL restarted", cluster, database_back=back_at - restarted_at, to_settle=settled)


def test_the_leader_cut_off_from_etcd(cluster: FaultCluster) -> None:
    token, leader = cluster.fence()
    _start_runs(cluster)
    etcd = cluster.networks["etcd"]
    with FenceWatch(cast(Cluster, cluster)):
        cut_at, cut_wall = time.monotonic(), time.time()
        etcd.disconnect(cluster.container(leader))
        wait_until("a standby to lead", lambda: cluster.fence()[0] > token, TTL + 15, retry_on=(Exception,))
        led = _term_began(cluster) - cut_wall
        new_term = cluster.fetchval("SELECT raised_at FROM scheduler_fence")
        settled = _settle(cluster, cut_at)
        stale = cluster.fetchval(
            "SELECT count(*) FROM scheduler_passes WHERE token <= $1 AND committed_at > $2", token, new_term
        )
        etcd.connect(cluster.container(leader), aliases=[leader])
    cluster.container(leader).reload()
    assert cluster.leader() != leader and cluster.container(leader).status == "running"
    _report("leader cut off from etcd", cluster, to_a_new_leader=led, to_settle=settled)
    assert stale == 0, f"{stale} passes of the cut-off term committed after the new term began"
