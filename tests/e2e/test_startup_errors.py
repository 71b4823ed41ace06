"""Services started against PostgreSQL or etcd that cannot be reached fail fast with a clear message."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from schedd_devstack.ports import free_port

pytestmark = pytest.mark.e2e


def _run_scheduler(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "schedd_scheduler.main"],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_scheduler_without_etcd(database_url: str) -> None:
    result = _run_scheduler(
        {"SCHEDD_DATABASE_URL": database_url, "SCHEDD_ETCD_ENDPOINTS": f"127.0.0.1:{free_port()}"}
    )
    assert result.returncode == 2, result.stderr
    assert "etcd unreachable" in result.stderr
    assert "Traceback" not in result.stderr


def test_scheduler_without_postgresql(etcd_endpoints: str) -> None:
    url = f"postgresql+asyncpg://schedd@127.0.0.1:{free_port()}/schedd"
    result = _run_scheduler({"SCHEDD_DATABASE_URL": url, "SCHEDD_ETCD_ENDPOINTS": etcd_endpoints})
    assert result.returncode == 2, result.stderr
    assert "PostgreSQL is unreachable" in result.stderr
    assert "Traceback" not in result.stderr


def test_scheduler_rejects_lease_timing_that_cannot_work(database_url: str, etcd_endpoints: str) -> None:
    result = _run_scheduler(
        {
            "SCHEDD_DATABASE_URL": database_url,
            "SCHEDD_ETCD_ENDPOINTS": etcd_endpoints,
            "SCHEDD_LEASE_TTL": "2",
            "SCHEDD_RENEW_DEADLINE": "3",
        }
    )
    assert result.returncode == 2, result.stderr
    assert "ttl > renew_deadline > retry_period" in result.stderr


def test_api_answers_unavailable_while_postgresql_is_down() -> None:
    import time

    import grpc

    from schedd.v1 import api_pb2, api_pb2_grpc

    address = f"127.0.0.1:{free_port()}"
    url = f"postgresql+asyncpg://schedd@127.0.0.1:{free_port()}/schedd"
    proc = subprocess.Popen(
        [sys.executable, "-m", "schedd_api.main"],
        env={**os.environ, "SCHEDD_DATABASE_URL": url, "SCHEDD_API_LISTEN": address, "SCHEDD_AUTH": "none"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        with grpc.insecure_channel(address) as channel:
            grpc.channel_ready_future(channel).result(timeout=30)
            stub = api_pb2_grpc.DagServiceStub(channel)
            deadline = time.monotonic() + 30
            with pytest.raises(grpc.RpcError) as err:
                stub.ListDags(api_pb2.ListDagsRequest(), timeout=max(1.0, deadline - time.monotonic()))
            assert err.value.code() == grpc.StatusCode.UNAVAILABLE
            assert "database" in (err.value.details() or "")
    finally:
        proc.terminate()
        proc.wait(timeout=15)


def _run(module: str, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_worker_refuses_a_kill_grace_longer_than_its_lease_margin() -> None:
    """A task stopped when the lease lapses must be dead before etcd can expire the lease."""
    result = _run(
        "schedd_worker.main",
        "--etcd-endpoints",
        f"127.0.0.1:{free_port()}",
        "--lease-ttl",
        "5",
        "--kill-grace",
        "5",
    )
    assert result.returncode == 2, result.stderr
    assert "--kill-grace" in result.stderr and "margin" in result.stderr
    assert "Traceback" not in result.stderr


def test_registry_refuses_windows_that_cannot_work(database_url: str) -> None:
    result = _run(
        "schedd_registry.main",
        env={
            "SCHEDD_DATABASE_URL": database_url,
            "SCHEDD_HEARTBEAT_INTERVAL": "2",
            "SCHEDD_ZOMBIE_THRESHOLD": "4",
        },
    )
    assert result.returncode == 2, result.stderr
    assert "silence limit" in result.stderr
    assert "Traceback" not in result.stderr
