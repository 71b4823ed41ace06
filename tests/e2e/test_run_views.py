"""GetRun and WatchRun in a view: FULL (every task instance) or SUMMARY (how many are in each
state, read at a cost that does not grow with the run), and ``runs trigger --wait`` following a run
in its summary."""

from __future__ import annotations

import json
from pathlib import Path

import grpc
import pytest

from schedd.v1 import api_pb2, api_pb2_grpc, resources_pb2 as pb
from tests.fixtures.services import RunningCluster

pytestmark = pytest.mark.e2e

DAG = "run_views"


def _counts(run: pb.DagRun) -> dict[int, int]:
    found: dict[int, int] = {}
    for t in run.task_instances:
        found[t.state] = found.get(t.state, 0) + 1
    return found


def test_a_summary_counts_what_the_full_view_lists(cluster: RunningCluster, tmp_path: Path) -> None:
    tasks = [{"task_id": f"ok{i}", "shell": {"command": "true"}} for i in range(3)]
    tasks += [
        {"task_id": "bad", "shell": {"command": "exit 3"}},
        {"task_id": "after_bad", "upstream": ["bad"], "shell": {"command": "true"}},
    ]
    path = tmp_path / f"{DAG}.json"
    path.write_text(json.dumps({"dag_id": DAG, "tasks": tasks}))
    assert cluster.schedctl("dags", "register", str(path), "--unpause").returncode == 0
    done = cluster.schedctl("runs", "trigger", DAG, "--run-id", "r1", "--wait", "--wait-timeout", "120")
    # --wait follows the summary, then shows the whole run: every task in the table
    assert done.returncode != 0 and "5 of 5 task instances done" in done.stderr, done.stderr
    assert all(str(t["task_id"]) in done.stdout for t in tasks), done.stdout
    name = f"dags/{DAG}/runs/r1"
    with grpc.insecure_channel(cluster.api_address) as channel:
        runs = api_pb2_grpc.RunServiceStub(channel)
        full = runs.GetRun(api_pb2.GetRunRequest(name=name), timeout=30)
        summary = runs.GetRun(api_pb2.GetRunRequest(name=name, view=api_pb2.RUN_VIEW_SUMMARY), timeout=30)
        (watched,) = list(
            runs.WatchRun(api_pb2.GetRunRequest(name=name, view=api_pb2.RUN_VIEW_SUMMARY), timeout=30)
        )
    assert len(full.task_instances) == 5 and not full.task_state_counts
    assert not summary.task_instances and summary.state == full.state == pb.RUN_STATE_FAILED
    assert {c.state: c.count for c in summary.task_state_counts} == _counts(full)
    assert watched == summary


def test_a_view_there_is_none_of_is_refused_naming_the_field(cluster: RunningCluster) -> None:
    request = api_pb2.GetRunRequest(name="dags/any/runs/r1", view=7)  # type: ignore[arg-type]
    with grpc.insecure_channel(cluster.api_address) as channel:
        runs = api_pb2_grpc.RunServiceStub(channel)
        for call in (
            lambda: runs.GetRun(request, timeout=30),
            lambda: list(runs.WatchRun(request, timeout=30)),
        ):
            with pytest.raises(grpc.RpcError) as refused:
                call()
            assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert "view" in (refused.value.details() or "")
