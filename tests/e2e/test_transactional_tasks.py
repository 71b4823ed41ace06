"""A transactional Python task through real workers: its writes and its success commit together, it
runs as the task role (no right on schedd's tables), its success callback fires once, and no task
sees schedd's own settings."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from schedd_devstack.services import Cluster

pytestmark = pytest.mark.e2e

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def cluster(fresh_database_url: str, etcd_endpoints: str, tmp_path: Path) -> Iterator[Cluster]:
    events = tmp_path / "events.jsonl"
    with Cluster(
        fresh_database_url,
        etcd_endpoints,
        tmp_path / "logs",
        workers=1,
        cwd=REPO_ROOT,
        # The success callbacks (run by the worker's warm Python children) find the file through it.
        worker_env={"TX_EVENTS_FILE": str(events), "SCHEDD_TASK_ENV_ALLOW": "TX_EVENTS_FILE"},
    ) as c:
        # The user's table, and the rights the user gives the task role on it.
        c.fetch("CREATE TABLE tx_demo (key text PRIMARY KEY, attempt text NOT NULL)")
        c.fetch("GRANT SELECT, INSERT ON tx_demo TO schedd_tasks")
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


def register(cluster: Cluster, tmp_path: Path, dag_id: str, target: str, **task: object) -> None:
    spec = {
        "dag_id": dag_id,
        "tasks": [{"task_id": "t", "transactional": True, "python": {"target": target}, **task}],
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


def test_task_code_cannot_change_schedds_tables(cluster: Cluster, tmp_path: Path) -> None:
    register(cluster, tmp_path, "tx_sneaky", "tests.integration.tx_tasks:touch_scheduler_table")
    result = schedctl(
        cluster, "runs", "trigger", "tx_sneaky", "--run-id", "r1", "--wait", "--wait-timeout", "60"
    )
    assert result.returncode == 1, result.stdout + result.stderr
    error = cluster.fetchval("SELECT error FROM task_instances WHERE dag_id = 'tx_sneaky'")
    assert "permission denied for table task_instances" in error, error


def test_the_success_callback_of_a_transactional_task_fires_once(cluster: Cluster, tmp_path: Path) -> None:
    register(
        cluster,
        tmp_path,
        "tx_cb",
        "tests.integration.tx_tasks:write_row",
        on_success=[{"python": {"target": "tests.integration.tx_tasks:record_success"}}],
    )
    result = schedctl(cluster, "runs", "trigger", "tx_cb", "--run-id", "r1", "--wait", "--wait-timeout", "60")
    assert result.returncode == 0, result.stdout + result.stderr
    events_file = tmp_path / "events.jsonl"
    deadline = time.monotonic() + 30
    while not (events_file.exists() and events_file.read_text().strip()):
        assert time.monotonic() < deadline, "the success callback never ran"
        time.sleep(0.1)
    outbox = cluster.fetch("SELECT payload, delivered_at FROM outbox WHERE topic = 'task_callback'")
    assert len(outbox) == 1 and json.loads(outbox[0]["payload"])["event"] == "success", outbox
    deadline = time.monotonic() + 30
    while cluster.fetchval("SELECT delivered_at FROM outbox WHERE topic = 'task_callback'") is None:
        assert time.monotonic() < deadline, "the callback was never marked delivered"
        time.sleep(0.1)
    events = [json.loads(line) for line in events_file.read_text().splitlines()]
    assert [(e["event"], e["task_id"]) for e in events] == [("success", "t")]


def test_no_task_sees_schedds_own_settings(cluster: Cluster, tmp_path: Path) -> None:
    spec = {
        "dag_id": "env_check",
        "tasks": [
            {"task_id": "sh", "shell": {"command": "env | grep '^SCHEDD_' | cut -d= -f1 | sort"}},
            {"task_id": "py", "python": {"target": "tests.integration.tx_tasks:schedd_settings"}},
        ],
    }
    path = tmp_path / "env_check.json"
    path.write_text(json.dumps(spec))
    assert schedctl(cluster, "dags", "register", str(path)).returncode == 0
    result = schedctl(
        cluster, "runs", "trigger", "env_check", "--run-id", "r1", "--wait", "--wait-timeout", "60"
    )
    assert result.returncode == 0, result.stdout + result.stderr
    shell_output = schedctl(cluster, "tasks", "logs", "env_check/r1", "sh", "--no-timestamps").stdout.split()
    python_result = json.loads(
        cluster.fetchval(
            "SELECT result::text FROM task_instances WHERE dag_id = 'env_check' AND task_id = 'py'"
        )
    )
    per_attempt = {
        "SCHEDD_ATTEMPT_ID",
        "SCHEDD_DAG_ID",
        "SCHEDD_IDEMPOTENCY_KEY",
        "SCHEDD_LOGICAL_DATE",
        "SCHEDD_RUN_ID",
        "SCHEDD_RUN_TYPE",
        "SCHEDD_DATA_INTERVAL_START",
        "SCHEDD_DATA_INTERVAL_END",
        "SCHEDD_TASK_ID",
        "SCHEDD_TRY_NUMBER",
        "SCHEDD_RUN_CONF",
    }
    for seen in (set(shell_output), set(python_result)):
        assert seen <= per_attempt | {"SCHEDD_PARAMS", "SCHEDD_UPSTREAM_RESULTS"}, seen
        assert "SCHEDD_TASK_DATABASE_URL" not in seen and "SCHEDD_DATABASE_URL" not in seen
