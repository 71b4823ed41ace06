"""Manual control against live claims: a cancel or a mark is slowed on purpose right after it read
the task instances (a fault point), and a worker connects inside that window and asks for work.
Nothing the user ended may start or keep running: the control transaction locks what it read, so
the worker's claim passes those task instances by."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
import yaml

from schedd.v1 import api_pb2, api_pb2_grpc, resources_pb2 as pb
from schedd_devstack.faults import arm
from schedd_devstack.services import Cluster
from tests.chaos.invariants import marked_dag, read_marks
from tests.fixtures.services import schedctl as run_schedctl
from tests.polling import wait_until

pytestmark = [pytest.mark.chaos, pytest.mark.e2e]

WINDOW = 5.0
TASKS: dict[str, list[str]] = {f"t{i}": [] for i in range(6)}


@pytest.fixture
def cluster(fresh_database_url: str, etcd_endpoints: str, tmp_path: Path) -> Iterator[Cluster]:
    cluster = Cluster(
        fresh_database_url,
        etcd_endpoints,
        tmp_path / "logs",
        workers=0,
        service_env={"SCHEDD_FAULTS": str(tmp_path / "faults"), "SCHEDD_HEARTBEAT_INTERVAL": "0.5"},
    )
    cluster.start()
    yield cluster
    cluster.stop()
    cluster.release_election()


def queued(cluster: Cluster, run_id: str) -> int:
    return int(
        cluster.fetchval(
            "SELECT count(*) FROM task_instances ti JOIN dag_runs r ON r.id = ti.run_pk "
            "WHERE r.run_id = $1 AND ti.state = 'queued'",
            run_id,
        )
    )


def during_the_window(cluster: Cluster, tmp_path: Path, call: Callable[[], Any]) -> None:
    """Run ``call`` with its control transaction held open after its read, and connect a worker with
    free slots meanwhile."""
    hit = arm(tmp_path / "faults", "control.read", f"sleep {WINDOW}")
    errors: list[BaseException] = []

    def run() -> None:
        try:
            call()
        except BaseException as exc:  # reported by the test thread
            errors.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    wait_until("the control call to read the task instances", hit.exists, 30)
    cluster.add_worker(capacity=8)
    thread.join(60)
    assert not thread.is_alive(), "the control call did not return"
    assert not errors, errors


def a_later_run_started(cluster: Cluster, marks: Path, run_id: str) -> None:
    """Trigger another run of the DAG and wait for one of its tasks to start: the worker has claimed
    and started everything queued before it, so whatever it claimed in the window has started too."""
    result = run_schedctl(cluster.api_address, "runs", "trigger", "race", "--run-id", run_id)
    assert result.returncode == 0, result.stderr
    wait_until(f"a task of {run_id} to start", lambda: any(r == run_id for r, _ in read_marks(marks)), 60)


def register(cluster: Cluster, tmp_path: Path, marks: Path) -> None:
    path = tmp_path / "dag.yaml"
    path.write_text(yaml.safe_dump(marked_dag("race", TASKS, marks, 8.0), sort_keys=False))
    result = run_schedctl(cluster.api_address, "dags", "register", str(path))
    assert result.returncode == 0, result.stderr
    result = run_schedctl(cluster.api_address, "runs", "trigger", "race", "--run-id", "r1")
    assert result.returncode == 0, result.stderr
    wait_until("every task to be queued", lambda: queued(cluster, "r1") == len(TASKS), 30)


def test_a_cancel_racing_a_claim_leaves_nothing_running(cluster: Cluster, tmp_path: Path) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    register(cluster, tmp_path, marks)
    with grpc.insecure_channel(cluster.api_address) as channel:
        runs = api_pb2_grpc.RunServiceStub(channel)
        during_the_window(
            cluster,
            tmp_path,
            lambda: runs.CancelRun(api_pb2.CancelRunRequest(name="dags/race/runs/r1"), timeout=60),
        )
    states = {r["state"] for r in cluster.fetch("SELECT state FROM task_instances WHERE dag_id = 'race'")}
    assert states == {"skipped"}, states
    a_later_run_started(cluster, marks, "r2")
    ran = sorted(key for key in read_marks(marks) if key[0] == "r1")
    assert not ran, f"tasks of a cancelled run ran: {ran}"


@pytest.mark.parametrize("state", [pb.TASK_STATE_SUCCESS, pb.TASK_STATE_FAILED])
def test_a_mark_racing_a_claim_leaves_nothing_running(
    cluster: Cluster, tmp_path: Path, state: pb.TaskState.ValueType
) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    register(cluster, tmp_path, marks)
    with grpc.insecure_channel(cluster.api_address) as channel:
        runs = api_pb2_grpc.RunServiceStub(channel)
        request = api_pb2.SetTaskInstanceStateRequest(name="dags/race/runs/r1/tasks/t0", state=state)
        during_the_window(cluster, tmp_path, lambda: runs.SetTaskInstanceState(request, timeout=60))
    # The other tasks run; the marked one, queued when it was marked, never starts.
    wait_until("the other tasks to start", lambda: len(read_marks(marks)) >= len(TASKS) - 1, 60)
    a_later_run_started(cluster, marks, "r2")
    assert ("r1", "t0") not in read_marks(marks), "the task marked while queued ran anyway"
    assert (
        cluster.fetchval("SELECT state FROM task_instances WHERE dag_id = 'race' AND task_id = 't0'")
        == pb.TaskState.Name(state).removeprefix("TASK_STATE_").lower()
    )
