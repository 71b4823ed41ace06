"""A DAG's life as an Airflow user expects it: a paused DAG's run whose tasks are done still ends,
a cancelled run says it was cancelled, and ``dags delete --cancel-runs`` deletes a DAG with runs in
flight in one call. (A new DAG starting paused: ``test_paused_at_creation.py``.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.cli_steps import RUN_DEADLINE, as_json, ok, register, run_state, runs_of, wait_run_ended
from tests.fixtures.services import RunningCluster
from tests.polling import wait_until

pytestmark = pytest.mark.e2e


def test_a_paused_dags_run_ends_when_its_tasks_are_done(
    module_cluster: RunningCluster, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    spec = {
        "dag_id": "life_pause_end",
        "tasks": [{"task_id": "wait", "shell": {"command": f"while [ ! -e {gate} ]; do sleep 0.1; done"}}],
    }
    register(module_cluster, tmp_path, spec)
    ok(module_cluster, "runs", "trigger", "life_pause_end", "--run-id", "r1")
    wait_until(
        "the task to run",
        lambda: (
            as_json(module_cluster, "runs", "get", "life_pause_end/r1")["task_instances"][0]["state"]
            == "running"
        ),
        RUN_DEADLINE,
        interval=0.1,
    )
    ok(module_cluster, "dags", "pause", "life_pause_end")
    gate.touch()
    done = wait_run_ended(module_cluster, "life_pause_end/r1")
    assert done["state"] == "success", done


def test_a_cancelled_run_says_cancelled(module_cluster: RunningCluster, tmp_path: Path) -> None:
    register(
        module_cluster,
        tmp_path,
        {"dag_id": "life_cancel", "tasks": [{"task_id": "t", "shell": {"command": "sleep 60"}}]},
    )
    ok(module_cluster, "runs", "trigger", "life_cancel", "--run-id", "r1")
    ok(module_cluster, "runs", "cancel", "life_cancel/r1")
    run = as_json(module_cluster, "runs", "get", "life_cancel/r1")
    assert run["state"] == "failed" and run["cancelled"] is True
    assert "cancelled" in ok(module_cluster, "runs", "get", "life_cancel/r1").splitlines()[0]
    listed = ok(module_cluster, "runs", "list", "life_cancel")
    assert "cancelled" in listed and "failed" not in listed
    # Cleared, it runs again and is no longer cancelled.
    ok(module_cluster, "tasks", "clear", "life_cancel/r1")
    assert as_json(module_cluster, "runs", "get", "life_cancel/r1")["cancelled"] is False
    ok(module_cluster, "runs", "cancel", "life_cancel/r1")


def test_deleting_a_dag_can_cancel_its_runs_in_the_same_call(
    module_cluster: RunningCluster, tmp_path: Path
) -> None:
    register(
        module_cluster,
        tmp_path,
        {"dag_id": "life_delete", "tasks": [{"task_id": "t", "shell": {"command": "sleep 60"}}]},
    )
    for run_id in ("r1", "r2"):
        ok(module_cluster, "runs", "trigger", "life_delete", "--run-id", run_id)
    wait_until(
        "a task to run",
        lambda: run_state(module_cluster, "life_delete/r1") == "running",
        RUN_DEADLINE,
        interval=0.1,
    )
    refused = module_cluster.schedctl("dags", "delete", "life_delete", "--yes")
    assert refused.returncode != 0 and "runs queued or running" in refused.stderr
    assert runs_of(module_cluster, "life_delete") == 2
    unconfirmed = module_cluster.schedctl("dags", "delete", "life_delete", "--cancel-runs")
    assert unconfirmed.returncode != 0 and "--yes" in unconfirmed.stderr
    ok(module_cluster, "dags", "delete", "life_delete", "--cancel-runs", "--yes")
    assert runs_of(module_cluster, "life_delete") == 0
    gone = module_cluster.schedctl("dags", "get", "life_delete")
    assert gone.returncode != 0
    # The worker that ran the deleted run's attempt is told to stop it: no task keeps its slot.
    wait_until(
        "the deleted run's attempt to stop",
        lambda: int(module_cluster.fetchval("SELECT COALESCE(sum(running), 0) FROM workers")) == 0,
        RUN_DEADLINE,
        interval=0.1,
    )
