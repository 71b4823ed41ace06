"""Leadership faults injected at the exact point that matters: a leader frozen while it holds the
fence lock, a pass too large to plan in one go. Each test ends with the invariant checks of
``invariants``. Figures are printed, never asserted; the liveness bounds are generous."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from schedd_devstack.faults import arm
from schedd_devstack.services import Cluster, ServiceProcess
from tests.chaos.invariants import FenceWatch, check_all, marked_dag, wait_settled
from tests.fixtures.services import schedctl as run_schedctl
from tests.polling import wait_until

pytestmark = [pytest.mark.chaos, pytest.mark.e2e]

TTL = 2
FAST_LEASE = {"SCHEDD_LEASE_TTL": str(TTL), "SCHEDD_RENEW_DEADLINE": "1.4"}
LIVENESS = TTL + 15.0
DIAMOND = {"a": [], "b": ["a"], "c": ["a"], "d": ["b", "c"]}

MakeCluster = Callable[..., Cluster]


@pytest.fixture
def make_cluster(fresh_database_url: str, etcd_endpoints: str, tmp_path: Path) -> Iterator[MakeCluster]:
    clusters: list[Cluster] = []

    def make(**kwargs: Any) -> Cluster:
        cluster = Cluster(
            fresh_database_url,
            etcd_endpoints,
            tmp_path / f"logs{len(clusters)}",
            service_env={**FAST_LEASE, **kwargs.pop("service_env", {})},
            **kwargs,
        )
        clusters.append(cluster)
        cluster.start()
        return cluster

    yield make
    for cluster in clusters:
        cluster.stop()
        cluster.release_election()


def schedctl(cluster: Cluster, *args: str) -> None:
    result = run_schedctl(cluster.api_address, *args)
    assert result.returncode == 0, result.stdout + result.stderr


def register(cluster: Cluster, directory: Path, spec: dict[str, Any]) -> None:
    path = directory / f"{spec['dag_id']}.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    schedctl(cluster, "dags", "register", str(path))


def process_state(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


def test_a_leader_frozen_while_holding_the_fence_lock_does_not_block_the_next_term(
    make_cluster: MakeCluster, tmp_path: Path
) -> None:
    faults, marks = tmp_path / "faults", tmp_path / "marks"
    marks.mkdir()
    cluster = make_cluster(schedulers=2, workers=2, scheduler_env={"SCHEDD_FAULTS": str(faults)})
    token, _ = cluster.wait_for_leader()
    register(cluster, tmp_path, marked_dag("work", DIAMOND, marks, 0.2))
    schedctl(cluster, "runs", "trigger", "work", "--run-id", "before", "--wait", "--wait-timeout", "60")
    with FenceWatch(cluster):
        hit = arm(faults, "fence.locked", "stop")
        schedctl(cluster, "runs", "trigger", "work", "--run-id", "frozen")
        wait_until("the leader to reach the fence lock", hit.exists, LIVENESS, interval=0.02)
        frozen_at = time.monotonic()
        pid = int(hit.read_text())
        frozen: ServiceProcess = next(p for p in cluster.schedulers.values() if p.pid == pid)
        wait_until("the leader to stop itself", lambda: process_state(pid) == "T", 5, interval=0.02)
        try:
            new_token, new_leader = cluster.wait_for_leader(above=token, timeout=LIVENESS)
            took = time.monotonic() - frozen_at
            assert new_leader is not frozen
            schedctl(
                cluster, "runs", "trigger", "work", "--run-id", "during", "--wait", "--wait-timeout", "60"
            )
        finally:
            frozen.resume()
        print(
            f"\nleader frozen holding the fence lock: the next term raised the fence after {took:.2f}s "
            f"(TTL {TTL}s)"
        )
        wait_until(
            "the thawed leader to step down",
            lambda: (
                cluster.scheduler_is_leader(next(i for i, p in cluster.schedulers.items() if p is frozen))
                is False
            ),
            LIVENESS,
            interval=0.02,
        )
        assert frozen.alive, frozen.describe_failure("the thawed leader died")
        wait_settled(cluster, "work", ["before", "frozen", "during"], LIVENESS)
    assert new_token > token
    check_all(cluster, marks, DIAMOND)


def test_a_five_thousand_task_run_is_planned_within_the_term(
    make_cluster: MakeCluster, tmp_path: Path
) -> None:
    """The root finishes and 4,999 tasks become ready at once (in a queue no worker serves): the
    leader plans and queues them while keeping its lease, in the same term."""
    cluster = make_cluster(schedulers=1, workers=1)
    token, leader = cluster.wait_for_leader()
    schedctl(cluster, "pools", "set", "wide", "10000")
    tasks: list[dict[str, Any]] = [{"task_id": "root", "shell": {"command": "true"}}]
    tasks += [
        {
            "task_id": f"t{i}",
            "upstream": ["root"],
            "queue": "nowhere",
            "pool": "wide",
            "shell": {"command": "true"},
        }
        for i in range(4999)
    ]
    register(cluster, tmp_path, {"dag_id": "wide", "tasks": tasks})
    schedctl(cluster, "runs", "trigger", "wide", "--run-id", "r1")
    began = time.monotonic()
    wait_until(
        "the 4,999 tasks to be queued",
        lambda: (
            cluster.fetchval("SELECT count(*) FROM task_instances WHERE dag_id = 'wide' AND state = 'queued'")
            == 4999
        ),
        120,
        interval=0.02,
    )
    print(f"\n4,999 ready tasks planned and queued {time.monotonic() - began:.2f}s after the trigger")
    assert cluster.fence()[0] == token, "the leader lost its term while planning"
    assert leader.alive
    log = leader.log_tail(200_000)
    assert "fail-stop" not in log and "no keep-alive" not in log, log[-3000:]
