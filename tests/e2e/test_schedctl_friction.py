"""What a new user trips over first, fixed: ``pools set`` keeps a description it is not given and
says "1 slot"; triggering a paused DAG warns; ``workers drain`` reports the attempts the worker
runs; ``--api`` pointed at a service that is not the api says so."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.fixtures.services import RunningCluster

pytestmark = pytest.mark.e2e


def test_pools_set_keeps_the_description_and_counts_slots_right(module_cluster: RunningCluster) -> None:
    made = module_cluster.schedctl("pools", "set", "friction", "1", "--description", "one at a time")
    assert made.returncode == 0, made.stderr
    assert "pool friction: 1 slot," in made.stdout
    resized = module_cluster.schedctl("pools", "set", "friction", "3")
    assert resized.returncode == 0 and "3 slots" in resized.stdout
    pools = json.loads(module_cluster.schedctl("pools", "list", "-o", "json").stdout)
    assert {p["pool"]: p.get("description") for p in pools}["friction"] == "one at a time"
    cleared = module_cluster.schedctl("pools", "set", "friction", "3", "--description", "")
    assert cleared.returncode == 0
    pools = json.loads(module_cluster.schedctl("pools", "list", "-o", "json").stdout)
    assert {p["pool"]: p.get("description", "") for p in pools}["friction"] == ""


def test_triggering_a_paused_dag_warns(module_cluster: RunningCluster, tmp_path: Path) -> None:
    spec = tmp_path / "paused.json"
    spec.write_text(
        json.dumps({"dag_id": "friction_paused", "tasks": [{"task_id": "t", "shell": {"command": "true"}}]})
    )
    assert module_cluster.schedctl("dags", "register", str(spec)).returncode == 0
    assert module_cluster.schedctl("dags", "pause", "friction_paused").returncode == 0
    result = module_cluster.schedctl("runs", "trigger", "friction_paused", "--run-id", "r1")
    assert result.returncode == 0, result.stderr
    assert "friction_paused is paused" in result.stderr and "unpause" in result.stderr
    unpaused = module_cluster.schedctl("runs", "trigger", "friction_paused", "--run-id", "r2")
    assert "paused" in unpaused.stderr  # still paused: still warned
    assert module_cluster.schedctl("dags", "unpause", "friction_paused").returncode == 0
    quiet = module_cluster.schedctl("runs", "trigger", "friction_paused", "--run-id", "r3")
    assert quiet.returncode == 0 and "paused" not in quiet.stderr


def test_drain_reports_the_attempts_the_worker_runs(module_cluster: RunningCluster, tmp_path: Path) -> None:
    worker = module_cluster.cluster.add_worker(
        "friction-worker", capacity=1, env={"SCHEDD_WORKER_QUEUES": "friction"}
    )
    spec = tmp_path / "slow.json"
    spec.write_text(
        json.dumps(
            {
                "dag_id": "friction_slow",
                "tasks": [{"task_id": "t", "queue": "friction", "shell": {"command": "sleep 30"}}],
            }
        )
    )
    assert module_cluster.schedctl("dags", "register", str(spec)).returncode == 0
    assert module_cluster.schedctl("runs", "trigger", "friction_slow", "--run-id", "r1").returncode == 0
    deadline = time.monotonic() + 60
    while not module_cluster.fetch(
        "SELECT 1 FROM task_instances WHERE worker_id = 'friction-worker' AND state = 'running'"
    ):
        assert time.monotonic() < deadline, "the task never started on friction-worker"
        time.sleep(0.05)
    drained = module_cluster.schedctl("workers", "drain", "friction-worker")
    assert drained.returncode == 0, drained.stderr
    assert "(1 attempt running)" in drained.stdout, drained.stdout
    assert module_cluster.schedctl("runs", "cancel", "friction_slow/r1").returncode == 0
    assert worker.wait(60) is not None


def test_pointing_at_the_registry_says_it_is_not_the_api(module_cluster: RunningCluster) -> None:
    result = module_cluster.schedctl("--api", module_cluster.cluster.registry_address, "dags", "list")
    assert result.returncode == 2, result.stderr
    assert "UNIMPLEMENTED" in result.stderr and "a schedd api?" in result.stderr
