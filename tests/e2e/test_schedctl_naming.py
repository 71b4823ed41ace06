"""``DAG/@latest`` names a DAG's newest run in every command and RPC that names a run, through a
real cluster: the reading commands (logs, result, explain, watch) and the writing ones (mark,
clear, cancel), which say which run they acted on; and the api resolves it in write calls for
gRPC clients too, replying with the run's own name."""

from __future__ import annotations

import json
from pathlib import Path

import grpc
import pytest

from schedd.v1 import api_pb2, api_pb2_grpc, resources_pb2 as pb
from tests.fixtures.services import RunningCluster

pytestmark = pytest.mark.e2e


def _register(cluster: RunningCluster, tmp_path: Path, dag_id: str, command: str) -> None:
    path = tmp_path / f"{dag_id}.json"
    path.write_text(
        json.dumps({"dag_id": dag_id, "tasks": [{"task_id": "t", "shell": {"command": command}}]})
    )
    registered = cluster.schedctl("dags", "register", str(path))
    assert registered.returncode == 0, registered.stderr
    assert cluster.schedctl("dags", "unpause", dag_id).returncode == 0


def _task_state(cluster: RunningCluster, run: str) -> str:
    shown = cluster.schedctl("-o", "json", "runs", "get", run)
    assert shown.returncode == 0, shown.stderr
    return str(json.loads(shown.stdout)["task_instances"][0]["state"])


def test_latest_is_the_newest_run_wherever_a_run_is_named(
    module_cluster: RunningCluster, tmp_path: Path
) -> None:
    _register(module_cluster, tmp_path, "naming_latest", 'echo "run $SCHEDD_RUN_ID"')
    for run_id in ("r1", "r2"):
        done = module_cluster.schedctl("runs", "trigger", "naming_latest", "--run-id", run_id, "--wait")
        assert done.returncode == 0, done.stderr

    logs = module_cluster.schedctl("tasks", "logs", "naming_latest/@latest", "t")
    assert logs.returncode == 0, logs.stderr
    assert "run r2" in logs.stdout
    explained = module_cluster.schedctl("explain", "naming_latest/@latest", "t")
    assert explained.returncode == 0 and explained.stdout.startswith("t: success"), explained.stderr
    result = module_cluster.schedctl("tasks", "result", "naming_latest/@latest", "t")
    assert result.returncode == 3 and "stored no result" in result.stderr, result.stderr

    marked = module_cluster.schedctl("tasks", "mark-failed", "naming_latest/@latest", "t")
    assert marked.returncode == 0, marked.stderr
    assert "naming_latest/@latest is dags/naming_latest/runs/r2" in marked.stderr
    assert "dags/naming_latest/runs/r2/tasks/t: failed" in marked.stdout
    assert _task_state(module_cluster, "naming_latest/r1") == "success", "the older run is left alone"

    cleared = module_cluster.schedctl("tasks", "clear", "naming_latest/@latest", "t")
    assert cleared.returncode == 0 and "cleared: t" in cleared.stdout, cleared.stderr
    assert "is dags/naming_latest/runs/r2" in cleared.stderr
    watched = module_cluster.schedctl("runs", "get", "naming_latest/@latest", "--watch", timeout=120)
    assert watched.returncode == 0, watched.stderr
    assert _task_state(module_cluster, "naming_latest/r2") == "success"


def test_cancel_latest_cancels_the_newest_run(module_cluster: RunningCluster, tmp_path: Path) -> None:
    _register(module_cluster, tmp_path, "naming_cancel", "sleep 60")
    started = module_cluster.schedctl("runs", "trigger", "naming_cancel", "--run-id", "long")
    assert started.returncode == 0, started.stderr
    cancelled = module_cluster.schedctl("-o", "json", "runs", "cancel", "naming_cancel/@latest")
    assert cancelled.returncode == 0, cancelled.stderr
    assert "naming_cancel/@latest is dags/naming_cancel/runs/long" in cancelled.stderr
    run = json.loads(cancelled.stdout)
    assert run["name"] == "dags/naming_cancel/runs/long" and run["state"] == "failed"


def test_the_api_resolves_latest_in_write_calls(module_cluster: RunningCluster, tmp_path: Path) -> None:
    _register(module_cluster, tmp_path, "naming_grpc", "true")
    for run_id in ("g1", "g2"):
        done = module_cluster.schedctl("runs", "trigger", "naming_grpc", "--run-id", run_id, "--wait")
        assert done.returncode == 0, done.stderr
    with grpc.insecure_channel(module_cluster.api_address) as channel:
        runs = api_pb2_grpc.RunServiceStub(channel)
        marked = runs.SetTaskInstanceState(
            api_pb2.SetTaskInstanceStateRequest(
                name="dags/naming_grpc/runs/@latest/tasks/t", state=pb.TASK_STATE_FAILED
            ),
            timeout=30,
        )
        assert marked.name == "dags/naming_grpc/runs/g2/tasks/t"
        cleared = runs.ClearTaskInstances(
            api_pb2.ClearTaskInstancesRequest(parent="dags/naming_grpc/runs/@latest", only_failed=True),
            timeout=30,
        )
        assert list(cleared.cleared_task_ids) == ["t"]
        with pytest.raises(grpc.RpcError) as refused:
            runs.CancelRun(api_pb2.CancelRunRequest(name="dags/naming_nothing/runs/@latest"), timeout=30)
        assert refused.value.code() == grpc.StatusCode.NOT_FOUND
    assert _task_state(module_cluster, "naming_grpc/g1") == "success"
