"""Following progress without polling: ``RunService.WatchRun`` streams a run until its final state,
``runs get --watch`` and ``runs trigger --wait`` end with the run's state and exit code, and
``tasks logs -f`` waits for a task that has not started, follows it, and says how it failed."""

from __future__ import annotations

import itertools
import json
import select
import subprocess
import sys
from pathlib import Path

import grpc
import pytest

from schedd.v1 import api_pb2, api_pb2_grpc, resources_pb2 as pb
from tests.fixtures.services import RunningCluster

pytestmark = pytest.mark.e2e


def register(cluster: RunningCluster, tmp_path: Path, spec: dict[str, object]) -> None:
    path = tmp_path / f"{spec['dag_id']}.json"
    path.write_text(json.dumps(spec))
    assert cluster.schedctl("dags", "register", str(path)).returncode == 0


def first_stderr_line(process: subprocess.Popen[str], timeout: float) -> str:
    """The first line ``process`` writes to standard error, waited for at most ``timeout`` seconds."""
    assert process.stderr is not None
    ready = select.select([process.stderr], [], [], timeout)[0]
    assert ready, f"nothing on standard error within {timeout:g}s"
    return process.stderr.readline()


def test_watch_run_streams_until_the_final_state(module_cluster: RunningCluster, tmp_path: Path) -> None:
    register(
        module_cluster,
        tmp_path,
        {
            "dag_id": "watch_two",
            "tasks": [
                {"task_id": "a", "shell": {"command": "sleep 0.5"}},
                {"task_id": "b", "upstream": ["a"], "shell": {"command": "sleep 0.5"}},
            ],
        },
    )
    assert module_cluster.schedctl("runs", "trigger", "watch_two", "--run-id", "r1").returncode == 0
    with grpc.insecure_channel(module_cluster.api_address) as channel:
        stub = api_pb2_grpc.RunServiceStub(channel)
        seen = list(stub.WatchRun(api_pb2.GetRunRequest(name="dags/watch_two/runs/r1"), timeout=60))
        assert seen[-1].state == pb.RUN_STATE_SUCCESS
        assert len(seen) >= 2, "the run's changes, not only its end"
        assert all(a.SerializeToString() != b.SerializeToString() for a, b in itertools.pairwise(seen))
        with pytest.raises(grpc.RpcError) as missing:
            list(stub.WatchRun(api_pb2.GetRunRequest(name="dags/watch_two/runs/nope"), timeout=30))
        assert missing.value.code() == grpc.StatusCode.NOT_FOUND


def test_runs_get_watch_ends_with_the_runs_exit_code(module_cluster: RunningCluster, tmp_path: Path) -> None:
    register(
        module_cluster,
        tmp_path,
        {"dag_id": "watch_fail", "tasks": [{"task_id": "t", "shell": {"command": "exit 3"}}]},
    )
    assert module_cluster.schedctl("runs", "trigger", "watch_fail", "--run-id", "r1").returncode == 0
    watched = module_cluster.schedctl("runs", "get", "watch_fail/r1", "--watch")
    assert watched.returncode == 1, watched.stderr
    assert "failed" in watched.stdout and "exit code 3" in watched.stdout
    waited = module_cluster.schedctl("runs", "trigger", "watch_fail", "--run-id", "r2", "--wait")
    assert waited.returncode == 1 and "dags/watch_fail/runs/r2: failed" in waited.stderr


def test_logs_follow_waits_for_the_task_and_says_how_it_failed(
    module_cluster: RunningCluster, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    register(
        module_cluster,
        tmp_path,
        {
            "dag_id": "watch_logs",
            "tasks": [
                # Holds second back until the follower said it waits (a busy machine can take
                # longer to start schedctl than any fixed sleep).
                {"task_id": "first", "shell": {"command": f"while [ ! -e {gate} ]; do sleep 0.05; done"}},
                {
                    "task_id": "second",
                    "upstream": ["first"],
                    "shell": {"command": "echo from-second; exit 4"},
                },
            ],
        },
    )
    assert module_cluster.schedctl("runs", "trigger", "watch_logs", "--run-id", "r1").returncode == 0
    follow = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "schedctl.main",
            "--api",
            module_cluster.api_address,
            "tasks",
            "logs",
            "watch_logs/r1",
            "second",
            "-f",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        said = first_stderr_line(follow, timeout=90)
        gate.touch()
        out, err = follow.communicate(timeout=90)
    finally:
        follow.kill()
    assert "waiting for second to start" in said
    assert follow.returncode == 1, err  # the task failed
    assert "from-second" in out
    assert "second try 1 failed" in err and "exit code 4" in err
    done = module_cluster.schedctl("tasks", "logs", "watch_logs/r1", "nope", "-f")
    assert done.returncode == 3  # a task the run will never have: not found, no waiting
