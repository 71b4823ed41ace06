"""Faults between registries and workers, injected where they matter, each followed by the
invariant checks of ``invariants`` (no overlapping attempts, upstream order, fence order).

- a registry killed (kill -9) right after it claimed assignments and before sending them;
- a successor handed off by a committed result statement whose assignment cannot be built;
- one of two registries killed mid-run: its workers move to the other;
- a half-open worker stream (the network drops every byte both ways, nobody hangs up);
- a worker killed (kill -9) while its task's background child runs: the child dies too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from schedd_devstack.faults import arm
from schedd_devstack.services import Cluster
from tests.chaos.invariants import FenceWatch, attempts_per_task, check_all, marked_dag, wait_settled
from tests.fixtures.services import schedctl as run_schedctl
from tests.fixtures.tcp_proxy import TcpProxy
from tests.polling import wait_until

pytestmark = [pytest.mark.chaos, pytest.mark.e2e]

FAST = {
    "SCHEDD_HEARTBEAT_INTERVAL": "0.5",
    "SCHEDD_WORKER_LEASE_TTL": "2",
    "SCHEDD_LEASE_TTL": "2",
    "SCHEDD_RENEW_DEADLINE": "1.4",
}
LIVENESS = 60.0
DIAMOND = {"a": [], "b": ["a"], "c": ["a"], "d": ["b", "c"]}
CHAIN = {"a": [], "b": ["a"], "c": ["b"]}
FAN: dict[str, list[str]] = {f"t{i}": [] for i in range(24)}

MakeCluster = Callable[..., Cluster]


@pytest.fixture
def make_cluster(fresh_database_url: str, etcd_endpoints: str, tmp_path: Path) -> Iterator[MakeCluster]:
    clusters: list[Cluster] = []

    def make(**kwargs: Any) -> Cluster:
        cluster = Cluster(
            fresh_database_url,
            etcd_endpoints,
            tmp_path / f"logs{len(clusters)}",
            service_env={**FAST, **kwargs.pop("service_env", {})},
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


def marks_dir(tmp_path: Path) -> Path:
    marks = tmp_path / "marks"
    marks.mkdir()
    return marks


def test_a_registry_killed_between_claim_and_delivery_loses_nothing(
    make_cluster: MakeCluster, tmp_path: Path
) -> None:
    marks, faults = marks_dir(tmp_path), tmp_path / "faults"
    cluster = make_cluster(workers=0)
    steady = cluster.registry_address
    faulty = cluster.add_registry(env={"SCHEDD_FAULTS": str(faults)})
    cluster.add_worker("w1", registry=faulty, env={"SCHEDD_REGISTRY": f"{faulty},{steady}"})
    register(cluster, tmp_path, marked_dag("work", DIAMOND, marks, 0.2))
    with FenceWatch(cluster):
        hit = arm(faults, "registry.claimed", "kill")
        schedctl(cluster, "runs", "trigger", "work", "--run-id", "r1")
        wait_until("the registry to claim", hit.exists, LIVENESS)
        wait_until("the registry to die", lambda: not cluster.registries[faulty].alive, 10)
        wait_settled(cluster, "work", ["r1"], LIVENESS)
    lost = cluster.fetchval(
        "SELECT count(*) FROM task_attempts a JOIN task_instances ti ON ti.id = a.ti_id "
        "WHERE ti.dag_id = 'work' AND ti.task_id = 'a' AND a.state = 'lost'"
    )
    assert lost == 1, "the claimed-but-undelivered attempt was not failed over"
    assert set(attempts_per_task(marks).values()) == {1}, "an undelivered attempt ran"
    check_all(cluster, marks, DIAMOND)


def test_a_successor_handed_off_but_not_sent_is_run_again(make_cluster: MakeCluster, tmp_path: Path) -> None:
    """The result statement of ``a`` commits its hand-off (``b`` claimed for ``a``'s worker), then
    building ``b``'s assignment fails: the registry ends the worker's stream, the worker's reconnect
    has ``b``'s attempt counted lost, the leader runs ``b`` again, and the lost attempt never ran."""
    marks, faults = marks_dir(tmp_path), tmp_path / "faults"
    cluster = make_cluster(workers=0)
    faulty = cluster.add_registry(env={"SCHEDD_FAULTS": str(faults)})
    cluster.add_worker("w1", registry=faulty, env={"SCHEDD_REGISTRY": faulty})
    register(cluster, tmp_path, marked_dag("handed", CHAIN, marks, 0.2))
    with FenceWatch(cluster):
        hit = arm(faults, "registry.handed_off", "fail")
        schedctl(cluster, "runs", "trigger", "handed", "--run-id", "r1")
        wait_until("a hand-off to be stored and its assignment to fail", hit.exists, LIVENESS)
        wait_settled(cluster, "handed", ["r1"], LIVENESS)
    lost = cluster.fetch(
        "SELECT ti.task_id FROM task_attempts a JOIN task_instances ti ON ti.id = a.ti_id "
        "WHERE ti.dag_id = 'handed' AND a.state = 'lost'"
    )
    assert [r["task_id"] for r in lost] in (["b"], ["c"]), "the unsent successor was not failed over"
    assert set(attempts_per_task(marks).values()) == {1}, "an unsent attempt ran"
    check_all(cluster, marks, CHAIN)


def test_workers_of_a_killed_registry_move_to_the_other(make_cluster: MakeCluster, tmp_path: Path) -> None:
    marks = marks_dir(tmp_path)
    cluster = make_cluster(workers=0, registries=2)
    first, second = list(cluster.registries)
    for i in range(3):
        cluster.add_worker(f"w{i}", registry=first, env={"SCHEDD_REGISTRY": f"{first},{second}"})
    register(cluster, tmp_path, marked_dag("fan", FAN, marks, 0.5))
    with FenceWatch(cluster):
        schedctl(cluster, "runs", "trigger", "fan", "--run-id", "r1")
        wait_until("some tasks to run", lambda: len(list(marks.iterdir())) >= 6, LIVENESS)
        cluster.registries[first].kill()
        wait_settled(cluster, "fan", ["r1"], LIVENESS)
    served = {r["registry"] for r in cluster.fetch("SELECT registry FROM workers WHERE state <> 'gone'")}
    assert served == {cluster.registry_ids[second]}, served
    assert set(attempts_per_task(marks).values()) == {1}, attempts_per_task(marks)
    check_all(cluster, marks, FAN)


def test_a_half_open_worker_stream_stops_the_attempt_before_its_retry(
    make_cluster: MakeCluster, tmp_path: Path
) -> None:
    """Every byte between a worker and its registry is dropped: the worker's lease keeps it running up
    to the silence cap, then it stops its attempt; the leader fails it over only after the silence
    limit, and the retry runs on another worker."""
    marks = marks_dir(tmp_path)
    cluster = make_cluster(workers=0, service_env={"SCHEDD_ZOMBIE_THRESHOLD": "4"})
    proxy = TcpProxy(cluster.registry_address).start()
    try:
        cluster.add_worker("cut", env={"SCHEDD_REGISTRY": proxy.endpoint})
        register(cluster, tmp_path, marked_dag("work", {"t": []}, marks, 6.0))
        with FenceWatch(cluster):
            schedctl(cluster, "runs", "trigger", "work", "--run-id", "r1")
            wait_until(
                "the task to start on the cut-off worker", lambda: bool(list(marks.iterdir())), LIVENESS
            )
            cluster.add_worker("steady")
            proxy.blackhole()
            wait_settled(cluster, "work", ["r1"], LIVENESS)
        proxy.restore()
    finally:
        proxy.stop()
    rows = cluster.fetch(
        "SELECT a.worker_id, a.state FROM task_attempts a JOIN task_instances ti ON ti.id = a.ti_id "
        "WHERE ti.dag_id = 'work' ORDER BY a.claimed_at"
    )
    assert [(r["worker_id"], r["state"]) for r in rows] == [("cut", "lost"), ("steady", "success")], rows
    check_all(cluster, marks, {"t": []})


def test_the_background_child_of_a_killed_workers_task_dies_with_it(
    make_cluster: MakeCluster, tmp_path: Path
) -> None:
    marks = marks_dir(tmp_path)
    cluster = make_cluster(workers=0)
    victim = cluster.add_worker("victim")
    register(cluster, tmp_path, marked_dag("work", {"t": []}, marks, 4.0))
    with FenceWatch(cluster):
        schedctl(cluster, "runs", "trigger", "work", "--run-id", "r1")
        wait_until("the task to start", lambda: bool(list(marks.iterdir())), LIVENESS)
        cluster.add_worker("rescuer")
        victim.kill()
        wait_settled(cluster, "work", ["r1"], LIVENESS)
    assert attempts_per_task(marks) == {("r1", "t"): 2}
    check_all(cluster, marks, {"t": []})
