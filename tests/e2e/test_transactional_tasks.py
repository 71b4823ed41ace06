"""A transactional Python task through real workers: its writes and its success commit together."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from schedd_devstack.services import Cluster

pytestmark = pytest.mark.e2e

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def cluster(fresh_database_url: str, etcd_endpoints: str, tmp_path: Path) -> Iterator[Cluster]:
    with Cluster(fresh_database_url, etcd_endpoints, tmp_path / "logs", workers=1, cwd=REPO_ROOT) as c:
        c.fetch("CREATE TABLE tx_demo (key text PRIMARY KEY, attempt text NOT NULL)")
        yield c
    c.release_election()


def schedctl(cluster: Cluster, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "schedctl.main", "--api", cluster.api_address, *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=REPO_ROOT,
    )


def register(cluster: Cluster, tmp_path: Path, dag_id: str, target: str) -> None:
    spec = {
        "dag_id": dag_id,
        "tasks": [{"task_id": "t", "transactional": True, "python": {"target": target}}],
    }
    path = tmp_path / f"{dag_id}.json"
    path.write_text(json.dumps(spec))
    result = schedctl(cluster, "dags", "register", str(path))
    assert result.returncode == 0, result.stderr


def test_the_row_and_the_success_commit_together(cluster: Cluster, tmp_path: Path) -> None:
    register(cluster, tmp_path, "tx_ok", "tests.integration.tx_tasks:write_row")
    result = schedctl(cluster, "runs", "trigger", "tx_ok", "--run-id", "r1", "--wait", "--wait-timeout", "60")
    assert result.returncode == 0, result.stdout + result.stderr
    rows = cluster.fetch("SELECT key, attempt FROM tx_demo")
    attempt = cluster.fetchval(
        "SELECT ti.attempt_id::text FROM task_instances ti JOIN dag_runs r ON r.id = ti.run_pk "
        "WHERE r.dag_id = 'tx_ok'"
    )
    assert rows == [{"key": "tx_ok/r1/t", "attempt": attempt}]


def test_a_failing_transactional_task_leaves_nothing(cluster: Cluster, tmp_path: Path) -> None:
    register(cluster, tmp_path, "tx_fail", "tests.integration.tx_tasks:write_then_fail")
    result = schedctl(
        cluster, "runs", "trigger", "tx_fail", "--run-id", "r1", "--wait", "--wait-timeout", "60"
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert cluster.fetch("SELECT key FROM tx_demo") == []
    error = cluster.fetchval("SELECT error FROM task_instances WHERE dag_id = 'tx_fail'")
    assert "failing after writing" in error


def test_transactional_shell_task_is_rejected(cluster: Cluster, tmp_path: Path) -> None:
    spec = {
        "dag_id": "tx_bad",
        "tasks": [{"task_id": "t", "transactional": True, "shell": {"command": "true"}}],
    }
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(spec))
    result = schedctl(cluster, "dags", "register", str(path))
    assert result.returncode == 2
    assert "spec.tasks[0].transactional" in result.stderr
