"""Steps e2e tests take through schedctl against a running cluster: register a spec, run schedctl
expecting success, read JSON, wait for a condition or a run's end (each wait bounded)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from tests.fixtures.services import RunningCluster
from tests.polling import wait_until

#: How long a short run of no-op shell tasks may take on a busy machine.
RUN_DEADLINE = 120.0


def ok(cluster: RunningCluster, *args: str) -> str:
    """schedctl's standard output; the test fails (showing both streams) on a non-zero exit."""
    done = cluster.schedctl(*args)
    assert done.returncode == 0, f"schedctl {' '.join(args)}: {done.stdout}{done.stderr}"
    return done.stdout


def as_json(cluster: RunningCluster, *args: str) -> Any:
    return json.loads(ok(cluster, "-o", "json", *args))


def register(cluster: RunningCluster, tmp_path: Path, spec: dict[str, Any], *options: str) -> str:
    """Register ``spec`` (written as JSON); returns what schedctl printed, standard output then
    standard error."""
    path = tmp_path / f"{spec['dag_id']}-{time.monotonic_ns()}.json"
    path.write_text(json.dumps(spec))
    done = cluster.schedctl("dags", "register", str(path), *options)
    assert done.returncode == 0, f"schedctl dags register: {done.stdout}{done.stderr}"
    return done.stdout + done.stderr


def run_state(cluster: RunningCluster, run: str) -> str:
    return str(as_json(cluster, "runs", "get", run).get("state", ""))


def runs_of(cluster: RunningCluster, dag_id: str) -> int:
    """How many runs the DAG has (read from the database)."""
    return int(cluster.fetchval("SELECT count(*) FROM dag_runs WHERE dag_id = $1", dag_id))


def wait_run_ended(cluster: RunningCluster, run: str, timeout: float = RUN_DEADLINE) -> dict[str, Any]:
    """The run (``DAG/RUN_ID``) as JSON once it succeeded or failed."""
    wait_until(
        f"run {run} to end", lambda: run_state(cluster, run) in ("success", "failed"), timeout, interval=0.1
    )
    found: dict[str, Any] = as_json(cluster, "runs", "get", run)
    return found


def tasks_of(run: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """A run's task instances (JSON) by task id."""
    return {t["task_id"]: t for t in run.get("task_instances", [])}
