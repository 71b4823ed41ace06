"""A worker keeps one warm Python process while idle and starts more when its tasks run at once
(``SCHEDD_PYTHON_WARM``, ``schedd_exec.python_pool``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from schedd_devstack.services import Cluster
from tests.fixtures.services import cluster_on_own_database, schedctl
from tests.polling import wait_until

pytestmark = pytest.mark.e2e

SLOTS = 4
#: Bound on a run of four one-second tasks, start-up of their processes included.
RUN_TIMEOUT = 60


def _python_children(cluster: Cluster) -> set[int]:
    """The worker's warm Python processes (children of its process running ``python_child``)."""
    (worker,) = cluster.workers.values()
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        parent = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("PPid:"))
        if parent == worker.pid and b"schedd_exec.python_child" in cmdline:
            found.add(int(entry.name))
    return found


@pytest.fixture(scope="module")
def one_worker(
    database_url: str, etcd_endpoints: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    with cluster_on_own_database(
        database_url, etcd_endpoints, tmp_path_factory.mktemp("warm"), workers=1, worker_capacity=SLOTS
    ) as cluster:
        spec = {
            "dag_id": "wide",
            "tasks": [
                {
                    "task_id": f"s{i}",
                    "python": {"target": "tests.unit.pypool_tasks:sleep"},
                    "params": {"seconds": 1.0},
                }
                for i in range(SLOTS)
            ],
        }
        path = tmp_path_factory.mktemp("dags") / "wide.json"
        path.write_text(json.dumps(spec))
        assert schedctl(cluster.api_address, "dags", "register", str(path), "--unpause").returncode == 0
        yield cluster


def test_an_idle_worker_keeps_one_warm_process_and_starts_more_for_tasks_at_once(one_worker: Cluster) -> None:
    wait_until("the worker's warm process", lambda: len(_python_children(one_worker)) == 1, 30)
    done = schedctl(
        one_worker.api_address,
        "runs",
        "trigger",
        "wide",
        "--run-id",
        "r1",
        "--wait",
        "--wait-timeout",
        str(RUN_TIMEOUT),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    # The four tasks ran at once: each in a process of its own.
    rows = one_worker.fetch(
        "SELECT result FROM task_instances WHERE run_pk = (SELECT id FROM dag_runs WHERE run_id = 'r1')"
    )
    pids = {
        json.loads(r["result"])["pid"] if isinstance(r["result"], str) else r["result"]["pid"] for r in rows
    }
    assert len(pids) == SLOTS, rows
    assert len(_python_children(one_worker)) <= SLOTS
