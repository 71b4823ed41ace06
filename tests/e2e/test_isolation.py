"""One bad run never stalls the rest: a run whose scheduling pass raises (here its pinned DAG version's
stored spec is damaged) is isolated and failed with the reason, while the runs triggered with it
and after it run as usual, and the leader keeps its term."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
import yaml

from schedd.v1 import api_pb2, api_pb2_grpc
from tests.fixtures.services import RunningCluster, running_cluster

pytestmark = pytest.mark.e2e


@pytest.fixture
def cluster(fresh_database_url: str, etcd_endpoints: str, tmp_path: Path) -> Iterator[RunningCluster]:
    with running_cluster(fresh_database_url, etcd_endpoints, tmp_path / "logs") as running:
        yield running


def register(cluster: RunningCluster, tmp_path: Path, dag_id: str) -> None:
    path = tmp_path / f"{dag_id}.yaml"
    path.write_text(
        yaml.safe_dump({"dag_id": dag_id, "tasks": [{"task_id": "t", "shell": {"command": "true"}}]})
    )
    result = cluster.schedctl("dags", "register", str(path))
    assert result.returncode == 0, result.stderr


def test_a_run_that_breaks_its_pass_is_failed_and_the_others_run(
    cluster: RunningCluster, tmp_path: Path
) -> None:
    token = cluster.cluster.fence()[0]
    register(cluster, tmp_path, "poison")
    register(cluster, tmp_path, "healthy")
    cluster.fetch("UPDATE dag_versions SET spec = '\\xffffff'::bytea WHERE dag_id = 'poison'")
    with grpc.insecure_channel(cluster.api_address) as channel:
        runs = api_pb2_grpc.RunServiceStub(channel)
        runs.CreateRun(api_pb2.CreateRunRequest(parent="dags/poison", run_id="p1"), timeout=30)
        for i in range(5):
            runs.CreateRun(api_pb2.CreateRunRequest(parent="dags/healthy", run_id=f"h{i}"), timeout=30)
    deadline = time.monotonic() + 60
    while cluster.fetchval("SELECT count(*) FROM dag_runs WHERE state NOT IN ('success', 'failed')"):
        assert time.monotonic() < deadline, cluster.fetch("SELECT run_id, state, error FROM dag_runs")
        time.sleep(0.1)
    rows = {r["run_id"]: r for r in cluster.fetch("SELECT run_id, state, error FROM dag_runs")}
    assert {k: v["state"] for k, v in rows.items()} == {
        "p1": "failed",
        **{f"h{i}": "success" for i in range(5)},
    }
    assert "could not plan this run" in rows["p1"]["error"] and "cannot be read" in rows["p1"]["error"]
    shown = cluster.schedctl("runs", "get", "poison/p1")
    assert "could not plan this run" in shown.stdout, shown.stdout
    assert cluster.cluster.fence()[0] == token, "the leader lost its term over one bad run"
    # A run triggered afterwards is not held back either.
    result = cluster.schedctl(
        "runs", "trigger", "healthy", "--run-id", "after", "--wait", "--wait-timeout", "60"
    )
    assert result.returncode == 0, result.stdout + result.stderr
