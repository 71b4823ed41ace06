"""API conventions on a live api: errors carry ``google.rpc`` details (the field and why, the kind
of error), and a client's deadline is passed down: when it passes, the call's work is abandoned
and its transaction rolled back, so a cancel that timed out cancels nothing."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import asyncpg  # type: ignore[import-untyped, unused-ignore]
import grpc
import pytest
from google.rpc import error_details_pb2  # type: ignore[import-untyped]
from grpc_status import rpc_status  # type: ignore[import-untyped]

from schedd.v1 import api_pb2, api_pb2_grpc
from schedd_devstack.faults import arm
from schedd_devstack.services import Cluster
from tests.fixtures.services import schedctl

pytestmark = pytest.mark.e2e


@pytest.fixture
def faulty(fresh_database_url: str, etcd_endpoints: str, tmp_path: Path) -> Iterator[tuple[Cluster, Path]]:
    faults = tmp_path / "faults"
    with Cluster(
        fresh_database_url,
        etcd_endpoints,
        tmp_path / "logs",
        workers=1,
        service_env={"SCHEDD_FAULTS": str(faults)},
    ) as cluster:
        yield cluster, faults


def run_state_once_unlocked(cluster: Cluster, timeout: float = 30.0) -> str:
    deadline = time.monotonic() + timeout
    while True:
        try:
            return str(cluster.fetchval("SELECT state FROM dag_runs WHERE run_id = 'r1' FOR UPDATE NOWAIT"))
        except asyncpg.exceptions.LockNotAvailableError:
            assert time.monotonic() < deadline, "the cancel's transaction never ended"
            time.sleep(0.02)


def test_errors_carry_the_field_and_the_kind(faulty: tuple[Cluster, Path]) -> None:
    cluster, _ = faulty
    with grpc.insecure_channel(cluster.api_address) as channel:
        runs = api_pb2_grpc.RunServiceStub(channel)
        with pytest.raises(grpc.RpcError) as bad:
            runs.CreateRun(api_pb2.CreateRunRequest(parent="not-a-dag-name"), timeout=30)
        status = rpc_status.from_call(bad.value)
        assert status is not None and status.code == grpc.StatusCode.INVALID_ARGUMENT.value[0]
        info, request = error_details_pb2.ErrorInfo(), error_details_pb2.BadRequest()
        assert status.details[0].Unpack(info) and info.reason == "InvalidArgument"
        assert status.details[1].Unpack(request)
        assert request.field_violations[0].field == "parent"
        assert "is not a DAG name" in request.field_violations[0].description
        with pytest.raises(grpc.RpcError) as missing:
            runs.GetRun(api_pb2.GetRunRequest(name="dags/nope/runs/r1"), timeout=30)
        found = rpc_status.from_call(missing.value)
        assert found is not None and found.details[0].Unpack(info) and info.reason == "NotFound"


def test_a_cancel_whose_deadline_passed_cancels_nothing(faulty: tuple[Cluster, Path], tmp_path: Path) -> None:
    cluster, faults = faulty
    spec = tmp_path / "slow.json"
    spec.write_text(
        json.dumps({"dag_id": "slow", "tasks": [{"task_id": "t", "shell": {"command": "sleep 60"}}]})
    )
    assert schedctl(cluster.api_address, "dags", "register", str(spec)).returncode == 0
    assert schedctl(cluster.api_address, "runs", "trigger", "slow", "--run-id", "r1").returncode == 0
    deadline = time.monotonic() + 60
    while cluster.fetchval("SELECT state FROM task_instances WHERE task_id = 't'") != "running":
        assert time.monotonic() < deadline, "the task never started"
        time.sleep(0.05)
    hit = arm(faults, "control.read", "sleep 2")  # the api stalls with the run locked and read
    with grpc.insecure_channel(cluster.api_address) as channel:
        runs = api_pb2_grpc.RunServiceStub(channel)
        with pytest.raises(grpc.RpcError) as late:
            runs.CancelRun(api_pb2.CancelRunRequest(name="dags/slow/runs/r1"), timeout=1)
        assert late.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        assert hit.exists()
        # Once the stall is over and the cancel's transaction has ended (the run's row lock is
        # free), the run is still running: nothing of the abandoned cancel was committed.
        assert run_state_once_unlocked(cluster) == "running"
        assert cluster.fetchval("SELECT state FROM task_instances WHERE task_id = 't'") == "running"
        runs.CancelRun(api_pb2.CancelRunRequest(name="dags/slow/runs/r1"), timeout=30)
    assert cluster.fetchval("SELECT state FROM dag_runs WHERE run_id = 'r1'") == "failed"
