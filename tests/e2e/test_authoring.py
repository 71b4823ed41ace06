"""DAGs written the Airflow 3 way run on real workers: TaskFlow values passed as arguments (keys of
multiple outputs too), task groups, and a teardown that runs after its work failed.

Each DAG is an example file registered with ``schedctl dags register`` (the SDK compiles it in the
schedctl process) and triggered with ``schedctl runs trigger --wait``; states and stored return
values are read back from PostgreSQL.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.services import RunningCluster

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]

TASKS = """
SELECT ti.task_id, ti.state, ti.result, ti.max_tries, r.state AS run_state
FROM task_instances ti JOIN dag_runs r ON r.id = ti.run_pk
WHERE r.dag_id = $1 AND r.run_id = $2
"""


def tasks_of(cluster: RunningCluster, dag_id: str, run_id: str) -> dict[str, dict[str, Any]]:
    rows = cluster.fetch(TASKS, dag_id, run_id)
    return {
        r["task_id"]: {**r, "result": json.loads(r["result"]) if r["result"] is not None else None}
        for r in rows
    }


def register(cluster: RunningCluster, example: str) -> None:
    done = cluster.schedctl("dags", "register", str(REPO / "examples" / example))
    assert done.returncode == 0, done.stderr


def test_taskflow_values_keys_and_groups_reach_the_tasks_on_workers(module_cluster: RunningCluster) -> None:
    register(module_cluster, "taskflow_groups.py")
    run = module_cluster.schedctl(
        "runs", "trigger", "taskflow_groups", "--run-id", "r1", "--wait", timeout=180
    )
    assert run.returncode == 0, run.stdout + run.stderr
    tis = tasks_of(module_cluster, "taskflow_groups", "r1")
    assert {t: v["state"] for t, v in tis.items()} == dict.fromkeys(
        [
            "start",
            "region_eu.fetch_orders",
            "region_eu.summarise",
            "region_us.fetch_orders",
            "region_us.summarise",
            "report",
            "done",
        ],
        "success",
    )
    # literals ("eu", count=3) reached fetch_orders; its list reached summarise; summarise's dict keys
    # reached report inside a dict argument, next to a literal keyword argument
    assert tis["region_eu.fetch_orders"]["result"] == [{"region": "eu", "amount": a} for a in (10, 20, 30)]
    assert tis["region_eu.summarise"]["result"] == {"count": 3, "total": 60}
    assert tis["region_us.summarise"]["result"] == {"count": 2, "total": 30}
    assert tis["report"]["result"] == "eu=60, us=30"
    # the group's default_args gave its tasks their retries; the others have none
    assert tis["region_eu.summarise"]["max_tries"] == 3 and tis["report"]["max_tries"] == 1
    logs = module_cluster.schedctl("tasks", "logs", "taskflow_groups/r1", "report")
    assert "eu=60, us=30 (from the example)" in logs.stdout, logs.stderr


def test_a_teardown_runs_after_its_work_failed_and_the_run_fails(module_cluster: RunningCluster) -> None:
    register(module_cluster, "setup_teardown.py")
    failing = module_cluster.schedctl(
        "runs",
        "trigger",
        "setup_teardown",
        "--run-id",
        "fails",
        "--conf",
        '{"fail": true}',
        "--wait",
        timeout=180,
    )
    assert failing.returncode == 1, failing.stdout + failing.stderr
    tis = tasks_of(module_cluster, "setup_teardown", "fails")
    assert {t: v["state"] for t, v in tis.items()} == {
        "create_cluster": "success",
        "run_job": "failed",
        "delete_cluster": "success",  # it ran although the work failed: its setup succeeded
    }
    assert tis["run_job"]["run_state"] == "failed"  # the work's failure decides the run, not the teardown
    cluster_dir = tis["create_cluster"]["result"]
    assert tis["delete_cluster"]["result"] == f"deleted {cluster_dir}"  # the setup's value reached it
    assert not Path(cluster_dir).exists()

    passing = module_cluster.schedctl(
        "runs", "trigger", "setup_teardown", "--run-id", "passes", "--wait", timeout=180
    )
    assert passing.returncode == 0, passing.stdout + passing.stderr
    tis = tasks_of(module_cluster, "setup_teardown", "passes")
    assert {t: v["state"] for t, v in tis.items()} == dict.fromkeys(tis, "success")
    assert tis["run_job"]["result"] == 42 and tis["run_job"]["run_state"] == "success"


def _sh(task_id: str, command: str, *upstream: str, **options: Any) -> dict[str, Any]:
    return {"task_id": task_id, "upstream": list(upstream), "shell": {"command": command}, **options}


#: (rule, upstream ids, the state Airflow 3 gives the task) with ok=success, bad/bad2=failed,
#: x=success and y/z=skipped (a branch task followed only x).
NEW_RULE_CASES = [
    ("one_done", ("ok", "bad"), "success"),
    ("one_done", ("x", "y"), "success"),
    ("one_done", ("y", "z"), "skipped"),
    ("all_skipped", ("ok", "bad"), "skipped"),
    ("all_skipped", ("x", "y"), "skipped"),
    ("all_skipped", ("y", "z"), "success"),
    ("all_done_min_one_success", ("ok", "bad"), "success"),
    ("all_done_min_one_success", ("x", "y"), "skipped"),
    ("all_done_min_one_success", ("bad", "bad2"), "upstream_failed"),
]


def test_the_new_trigger_rules_decide_as_airflow_3_does_through_the_services(
    module_cluster: RunningCluster, tmp_path: Path
) -> None:
    tasks = [
        _sh("ok", "true"),
        _sh("bad", "exit 1"),
        _sh("bad2", "exit 1"),
        {"task_id": "br", "python": {"target": "tests.e2e.semantics_tasks:choose"}, "branch": True},
        _sh("x", "true", "br"),
        _sh("y", "true", "br"),
        _sh("z", "true", "br"),
    ]
    for i, (rule, upstream, _) in enumerate(NEW_RULE_CASES):
        tasks.append(_sh(f"case{i}", "true", *upstream, trigger_rule=f"TRIGGER_RULE_{rule.upper()}"))
    spec = tmp_path / "new_rules.json"
    spec.write_text(
        json.dumps({"dag_id": "new_rules", "param_schemas": {"follow": {"required": True}}, "tasks": tasks})
    )
    assert module_cluster.schedctl("dags", "register", str(spec)).returncode == 0
    run = module_cluster.schedctl(
        "runs", "trigger", "new_rules", "--run-id", "r1", "--conf", '{"follow": "x"}', "--wait", timeout=180
    )
    assert run.returncode == 1, run.stdout + run.stderr  # a leaf is upstream_failed
    tis = tasks_of(module_cluster, "new_rules", "r1")
    assert [tis[t]["state"] for t in ("ok", "bad", "x", "y", "z")] == [
        "success",
        "failed",
        "success",
        "skipped",
        "skipped",
    ]
    assert {f"case{i}": tis[f"case{i}"]["state"] for i in range(len(NEW_RULE_CASES))} == {
        f"case{i}": expected for i, (_, _, expected) in enumerate(NEW_RULE_CASES)
    }
