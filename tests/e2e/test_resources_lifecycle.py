"""Deleting DAGs, runs and pools; a task's stored result; runs in the order asked for; task logs as a
stream; and retried actions that do nothing twice — through a real api and schedctl."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import grpc
import pytest

from schedd.v1 import api_pb2, api_pb2_grpc, resources_pb2 as pb
from schedd_rpc import convert
from tests.fixtures.services import RunningCluster

pytestmark = pytest.mark.e2e

TASKS = "tests.chaos.noop_tasks"
LIVENESS = 60.0


def register(cluster: RunningCluster, tmp_path: Path, spec: dict[str, Any]) -> None:
    path = tmp_path / f"{spec['dag_id']}.json"
    path.write_text(json.dumps(spec))
    done = cluster.schedctl("dags", "register", str(path))
    assert done.returncode == 0, done.stderr


def wait_for_run(cluster: RunningCluster, ref: str) -> dict[str, Any]:
    """The run once it has ended (``runs get --watch`` returns then)."""
    watched = cluster.schedctl("runs", "get", ref, "--watch", timeout=LIVENESS)
    assert watched.returncode in (0, 1), watched.stderr
    got = cluster.schedctl("-o", "json", "runs", "get", ref)
    data: dict[str, Any] = json.loads(got.stdout)
    return data


def rows(cluster: RunningCluster, query: str, *args: object) -> int:
    return int(cluster.fetchval(query, *args))


def test_delete_dag_removes_its_history_and_refuses_while_runs_are_active(
    module_cluster: RunningCluster, tmp_path: Path
) -> None:
    spec = {"dag_id": "del_dag", "tasks": [{"task_id": "t", "shell": {"command": "echo hi"}}]}
    register(module_cluster, tmp_path, spec)
    assert module_cluster.schedctl("runs", "trigger", "del_dag", "--run-id", "r1", "--wait").returncode == 0
    # A run that waits (paused DAG) keeps the DAG from being deleted, and nothing is deleted.
    assert module_cluster.schedctl("dags", "pause", "del_dag").returncode == 0
    assert module_cluster.schedctl("runs", "trigger", "del_dag", "--run-id", "r2").returncode == 0
    refused = module_cluster.schedctl("dags", "delete", "del_dag", "--yes")
    assert refused.returncode == 2 and "FAILED_PRECONDITION" in refused.stderr
    assert "1 runs queued or running" in refused.stderr
    assert rows(module_cluster, "SELECT count(*) FROM dag_runs WHERE dag_id = 'del_dag'") == 2
    # Without --yes and without a terminal, schedctl asks for --yes.
    unconfirmed = module_cluster.schedctl("dags", "delete", "del_dag")
    assert unconfirmed.returncode == 2 and "--yes" in unconfirmed.stderr
    assert module_cluster.schedctl("runs", "cancel", "del_dag/r2").returncode == 0

    with grpc.insecure_channel(module_cluster.api_address) as channel:
        dags = api_pb2_grpc.DagServiceStub(channel)
        request = api_pb2.DeleteDagRequest(name="dags/del_dag", request_id=str(uuid.uuid4()))
        dags.DeleteDag(request, timeout=30)
        dags.DeleteDag(request, timeout=30)  # a retry of a deletion that succeeded succeeds again
        with pytest.raises(grpc.RpcError) as again:
            dags.DeleteDag(api_pb2.DeleteDagRequest(name="dags/del_dag"), timeout=30)
        assert again.value.code() == grpc.StatusCode.NOT_FOUND
    for table in ("dags", "dag_versions", "dag_runs", "task_instances"):
        assert rows(module_cluster, f"SELECT count(*) FROM {table} WHERE dag_id = 'del_dag'") == 0, table
    # The same id can be registered again and runs from scratch.
    register(module_cluster, tmp_path, spec)
    assert module_cluster.schedctl("runs", "trigger", "del_dag", "--run-id", "r1", "--wait").returncode == 0
    module_cluster.assert_healthy()


def test_delete_run_only_when_finished(module_cluster: RunningCluster, tmp_path: Path) -> None:
    register(
        module_cluster,
        tmp_path,
        {"dag_id": "del_run", "tasks": [{"task_id": "t", "shell": {"command": "sleep 30"}}]},
    )
    assert module_cluster.schedctl("runs", "trigger", "del_run", "--run-id", "r1").returncode == 0
    refused = module_cluster.schedctl("runs", "delete", "del_run/r1", "--yes")
    assert refused.returncode == 2 and "cancel it" in refused.stderr
    assert module_cluster.schedctl("runs", "cancel", "del_run/r1").returncode == 0
    deleted = module_cluster.schedctl("runs", "delete", "del_run/r1", "--yes")
    assert deleted.returncode == 0, deleted.stderr
    assert module_cluster.schedctl("runs", "get", "del_run/r1").returncode == 3
    assert rows(module_cluster, "SELECT count(*) FROM task_instances WHERE dag_id = 'del_run'") == 0
    assert module_cluster.schedctl("runs", "delete", "del_run/r1", "--yes").returncode == 3


def test_delete_pool_refused_while_named_or_used(module_cluster: RunningCluster, tmp_path: Path) -> None:
    assert module_cluster.schedctl("pools", "set", "del_pool", "2").returncode == 0
    assert module_cluster.schedctl("pools", "set", "spare_pool", "1").returncode == 0
    register(
        module_cluster,
        tmp_path,
        {
            "dag_id": "del_pool_dag",
            "tasks": [{"task_id": "t", "pool": "del_pool", "shell": {"command": "true"}}],
        },
    )
    named = module_cluster.schedctl("pools", "delete", "del_pool", "--yes")
    assert named.returncode == 2 and "'del_pool_dag'" in named.stderr
    default = module_cluster.schedctl("pools", "delete", "default_pool", "--yes")
    assert default.returncode == 2 and "cannot be deleted" in default.stderr
    assert module_cluster.schedctl("pools", "delete", "spare_pool", "--yes").returncode == 0
    listed = json.loads(module_cluster.schedctl("-o", "json", "pools", "list").stdout)
    assert "spare_pool" not in {p["pool"] for p in listed} and "del_pool" in {p["pool"] for p in listed}
    assert module_cluster.schedctl("pools", "delete", "spare_pool", "--yes").returncode == 3


def test_task_result_through_the_api_and_schedctl(module_cluster: RunningCluster, tmp_path: Path) -> None:
    register(
        module_cluster,
        tmp_path,
        {
            "dag_id": "result_dag",
            "tasks": [
                {"task_id": "produce", "python": {"target": f"{TASKS}:produce"}, "params": {"base": 21}},
                {"task_id": "shell", "shell": {"command": "true"}},
            ],
        },
    )
    assert (
        module_cluster.schedctl("runs", "trigger", "result_dag", "--run-id", "r1", "--wait").returncode == 0
    )
    with grpc.insecure_channel(module_cluster.api_address) as channel:
        runs = api_pb2_grpc.RunServiceStub(channel)
        got = runs.GetTaskResult(
            api_pb2.GetTaskResultRequest(name="dags/result_dag/runs/r1/tasks/produce"), timeout=30
        )
        assert got.has_value and got.state == pb.TASK_STATE_SUCCESS and got.try_number == 1
        value = convert.from_value(got.value)
        assert value["doubled"] == 42 and value["items"] == [21, 22]
        none = runs.GetTaskResult(
            api_pb2.GetTaskResultRequest(name="dags/result_dag/runs/r1/tasks/shell"), timeout=30
        )
        assert not none.has_value
        with pytest.raises(grpc.RpcError) as missing:
            runs.GetTaskResult(
                api_pb2.GetTaskResultRequest(name="dags/result_dag/runs/r1/tasks/x"), timeout=30
            )
        assert missing.value.code() == grpc.StatusCode.NOT_FOUND
    shown = module_cluster.schedctl("tasks", "result", "result_dag/r1", "produce")
    assert shown.returncode == 0 and json.loads(shown.stdout)["doubled"] == 42
    assert module_cluster.schedctl("tasks", "result", "result_dag/r1", "shell").returncode == 3


def test_runs_listed_in_the_order_asked_each_exactly_once(
    module_cluster: RunningCluster, tmp_path: Path
) -> None:
    register(
        module_cluster,
        tmp_path,
        {"dag_id": "order_dag", "tasks": [{"task_id": "t", "shell": {"command": "true"}}]},
    )
    assert module_cluster.schedctl("dags", "pause", "order_dag").returncode == 0  # the runs stay queued
    # Created in one order, with logical dates in another.
    days = [5, 1, 4, 2, 3]
    for day in days:
        date = f"2026-01-0{day}T00:00:00+00:00"
        made = module_cluster.schedctl(
            "runs", "trigger", "order_dag", "--run-id", f"d{day}", "--logical-date", date
        )
        assert made.returncode == 0, made.stderr
    with grpc.insecure_channel(module_cluster.api_address) as channel:
        runs = api_pb2_grpc.RunServiceStub(channel)

        def listed(order: str) -> list[str]:
            found: list[str] = []
            request = api_pb2.ListRunsRequest(parent="dags/order_dag", order_by=order, page_size=2)
            while True:
                resp = runs.ListRuns(request, timeout=30)
                found += [r.run_id for r in resp.runs]
                if not resp.next_page_token:
                    return found
                request.page_token = resp.next_page_token

        assert listed("") == [f"d{d}" for d in reversed(days)]
        assert listed("create_time") == [f"d{d}" for d in days]
        assert listed("logical_date") == ["d1", "d2", "d3", "d4", "d5"]
        assert listed("logical_date   desc") == ["d5", "d4", "d3", "d2", "d1"]
        with pytest.raises(grpc.RpcError) as bad:
            runs.ListRuns(api_pb2.ListRunsRequest(parent="dags/order_dag", order_by="run_id"), timeout=30)
        assert bad.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "order_by" in (
            bad.value.details() or ""
        )
        token = runs.ListRuns(
            api_pb2.ListRunsRequest(parent="dags/order_dag", order_by="logical_date", page_size=1), timeout=30
        ).next_page_token
        with pytest.raises(grpc.RpcError) as mixed:
            runs.ListRuns(
                api_pb2.ListRunsRequest(parent="dags/order_dag", page_token=token + "x"), timeout=30
            )
        assert mixed.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    shown = module_cluster.schedctl("-o", "name", "runs", "list", "order_dag", "--order-by", "logical_date")
    assert shown.stdout.split() == [f"dags/order_dag/runs/d{d}" for d in (1, 2, 3, 4, 5)]


def test_watch_task_logs_waits_follows_and_ends(module_cluster: RunningCluster, tmp_path: Path) -> None:
    register(
        module_cluster,
        tmp_path,
        {
            "dag_id": "log_stream",
            "tasks": [
                {"task_id": "first", "shell": {"command": "sleep 1"}},
                {
                    "task_id": "second",
                    "upstream": ["first"],
                    "shell": {"command": "echo one; sleep 1; echo two"},
                },
            ],
        },
    )
    assert module_cluster.schedctl("runs", "trigger", "log_stream", "--run-id", "r1").returncode == 0
    with grpc.insecure_channel(module_cluster.api_address) as channel:
        runs = api_pb2_grpc.RunServiceStub(channel)
        request = api_pb2.GetTaskLogsRequest(name="dags/log_stream/runs/r1/tasks/second")
        messages = list(runs.WatchTaskLogs(request, timeout=LIVENESS))
        text = "".join(m.data for m in messages)
        # Each line starts with the time it was written and a space.
        assert [line.split(" ", 1)[1] for line in text.splitlines()] == ["one", "two"]
        assert messages[-1].complete and all(not m.complete for m in messages[:-1])
        offsets = [m.next_offset for m in messages]
        assert offsets == sorted(offsets) and offsets[-1] == len(text.encode())
        with pytest.raises(grpc.RpcError) as unknown:
            list(
                runs.WatchTaskLogs(
                    api_pb2.GetTaskLogsRequest(name="dags/log_stream/runs/r1/tasks/x"), timeout=30
                )
            )
        assert unknown.value.code() == grpc.StatusCode.NOT_FOUND


def test_retried_actions_do_nothing_twice(module_cluster: RunningCluster, tmp_path: Path) -> None:
    register(
        module_cluster,
        tmp_path,
        {"dag_id": "retried", "tasks": [{"task_id": "t", "shell": {"command": "echo ran >> /dev/null"}}]},
    )
    assert module_cluster.schedctl("runs", "trigger", "retried", "--run-id", "r1", "--wait").returncode == 0
    with grpc.insecure_channel(module_cluster.api_address) as channel:
        runs = api_pb2_grpc.RunServiceStub(channel)
        clear = api_pb2.ClearTaskInstancesRequest(parent="dags/retried/runs/r1", request_id=str(uuid.uuid4()))
        assert list(runs.ClearTaskInstances(clear, timeout=30).cleared_task_ids) == ["t"]
        wait_for_run(module_cluster, "retried/r1")
        tries = rows(module_cluster, "SELECT try_number FROM task_instances WHERE dag_id = 'retried'")
        # The retry answers as the first call did and clears nothing: the task does not run again.
        assert list(runs.ClearTaskInstances(clear, timeout=30).cleared_task_ids) == ["t"]
        # A clear resets the task instance in its own transaction: had it cleared, this would not read
        # success.
        assert (
            module_cluster.fetchval("SELECT state FROM task_instances WHERE dag_id = 'retried'") == "success"
        )
        assert rows(module_cluster, "SELECT try_number FROM task_instances WHERE dag_id = 'retried'") == tries
        # The same id with another body is refused.
        clear.only_failed = True
        with pytest.raises(grpc.RpcError) as reused:
            runs.ClearTaskInstances(clear, timeout=30)
        assert reused.value.code() == grpc.StatusCode.ALREADY_EXISTS
        # A retried cancel answers with the run instead of FAILED_PRECONDITION.
        assert module_cluster.schedctl("dags", "pause", "retried").returncode == 0
        assert module_cluster.schedctl("runs", "trigger", "retried", "--run-id", "r2").returncode == 0
        cancel = api_pb2.CancelRunRequest(name="dags/retried/runs/r2", request_id=str(uuid.uuid4()))
        assert runs.CancelRun(cancel, timeout=30).state == pb.RUN_STATE_FAILED
        assert runs.CancelRun(cancel, timeout=30).state == pb.RUN_STATE_FAILED
        with pytest.raises(grpc.RpcError) as twice:
            runs.CancelRun(api_pb2.CancelRunRequest(name="dags/retried/runs/r2"), timeout=30)
        assert twice.value.code() == grpc.StatusCode.FAILED_PRECONDITION
