"""etcd and PostgreSQL restarting under a running workload, on servers of the test's own.

- etcd restarts for 10 s while workers still reach their registry: no task is killed or run twice
  (workers run on their registry's acknowledgements while their lease is gone).
- PostgreSQL restarts (fast shutdown, and kill -9) during a fan-out: every task runs exactly once,
  every result reported meanwhile is stored, and no call fails once the database is back.

Each test ends with the invariant checks of ``invariants``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from schedd_devstack import LocalEtcd, LocalPostgres
from schedd_devstack.services import Cluster
from tests.chaos.invariants import FenceWatch, attempts_per_task, check_all, marked_dag, wait_settled
from tests.fixtures.services import schedctl as run_schedctl
from tests.polling import wait_until

pytestmark = [pytest.mark.chaos, pytest.mark.e2e]

FAST = {
    "SCHEDD_LEASE_TTL": "2",
    "SCHEDD_RENEW_DEADLINE": "1.4",
    "SCHEDD_HEARTBEAT_INTERVAL": "0.5",
    "SCHEDD_WORKER_LEASE_TTL": "2",
}
LIVENESS = 60.0
#: How long etcd stays down.
ETCD_OUTAGE = 10.0


def schedctl(cluster: Cluster, *args: str) -> str:
    result = run_schedctl(cluster.api_address, *args)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def register(cluster: Cluster, directory: Path, spec: dict[str, Any]) -> None:
    path = directory / f"{spec['dag_id']}.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    schedctl(cluster, "dags", "register", str(path))


@pytest.fixture
def start_cluster(tmp_path: Path) -> Iterator[Callable[..., Cluster]]:
    clusters: list[Cluster] = []

    def start(database_url: str, etcd_endpoints: str, **kwargs: Any) -> Cluster:
        cluster = Cluster(database_url, etcd_endpoints, tmp_path / "logs", service_env=FAST, **kwargs)
        clusters.append(cluster)
        cluster.start()
        return cluster

    yield start
    for cluster in clusters:
        cluster.stop()


def count_marked(marks: Path) -> int:
    return len(list(marks.iterdir()))


def test_an_etcd_restart_neither_kills_nor_reruns_a_task(
    start_cluster: Callable[..., Cluster], fresh_database_url: str, private_etcd: LocalEtcd, tmp_path: Path
) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    cluster = start_cluster(fresh_database_url, private_etcd.endpoint, workers=2)
    edges: dict[str, list[str]] = {f"t{i}": [] for i in range(4)}
    register(cluster, tmp_path, marked_dag("long", edges, marks, ETCD_OUTAGE + 4))
    with FenceWatch(cluster):
        schedctl(cluster, "runs", "trigger", "long", "--run-id", "r1")
        wait_until("all four tasks to run", lambda: count_marked(marks) == 4, LIVENESS)
        private_etcd.stop()
        time.sleep(ETCD_OUTAGE)  # the fault itself: etcd is down for this long
        token_before = cluster.fence()[0]
        private_etcd.start(private_etcd.base_dir, durable=False)
        back = time.time()
        cluster.wait_for_leader(above=token_before, timeout=LIVENESS)
        took = time.time() - back
        wait_settled(cluster, "long", ["r1"], LIVENESS)
    print(
        f"\netcd down {ETCD_OUTAGE:g}s (TTL 2s): a new term {took:.2f}s after etcd was back; "
        "no task killed or re-run"
    )
    assert set(attempts_per_task(marks).values()) == {1}, attempts_per_task(marks)
    states = cluster.fetch(
        "SELECT a.state, count(*) AS n FROM task_attempts a JOIN task_instances ti ON ti.id = a.ti_id "
        "WHERE ti.dag_id = 'long' GROUP BY a.state"
    )
    assert {r["state"]: r["n"] for r in states} == {"success": 4}, states
    check_all(cluster, marks, edges)


FAN = {"root": [], **{f"leaf{i}": ["root"] for i in range(40)}}
FAN["join"] = [f"leaf{i}" for i in range(40)]


@pytest.mark.parametrize("how", ["fast restart", "kill -9"])
def test_a_postgres_restart_during_a_fan_out_loses_and_repeats_nothing(
    start_cluster: Callable[..., Cluster],
    private_postgres: LocalPostgres,
    etcd_endpoints: str,
    tmp_path: Path,
    how: str,
) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    cluster = start_cluster(private_postgres.url, etcd_endpoints, workers=2)
    register(cluster, tmp_path, marked_dag("fan", FAN, marks, 0.3))
    runs = ["r1", "r2"]
    with FenceWatch(cluster):
        for run_id in runs:
            schedctl(cluster, "runs", "trigger", "fan", "--run-id", run_id)
        wait_until("a third of the tasks to run", lambda: count_marked(marks) >= 20, LIVENESS)
        if how == "kill -9":
            private_postgres.kill()
        else:
            private_postgres.stop()
        private_postgres.start(private_postgres.base_dir, durable=True)
        back = time.time()
        # Once the database is back, every call succeeds at the first try.
        for _ in range(5):
            schedctl(cluster, "runs", "get", "fan/r1")
            schedctl(cluster, "dags", "list")
        wait_settled(cluster, "fan", runs, LIVENESS)
        settled = time.time()
    first_pass = cluster.fetchval(
        "SELECT extract(epoch FROM min(committed_at)) FROM scheduler_passes "
        "WHERE committed_at > to_timestamp($1)",
        back,
    )
    print(
        f"\nPostgreSQL {how}: the first scheduling pass {float(first_pass) - back:.2f}s after it was back, "
        f"both runs settled {settled - back:.2f}s after"
    )
    per_task = attempts_per_task(marks)
    assert len(per_task) == len(runs) * len(FAN), sorted(per_task)
    assert set(per_task.values()) == {1}, {k: v for k, v in per_task.items() if v != 1}
    check_all(cluster, marks, FAN)
