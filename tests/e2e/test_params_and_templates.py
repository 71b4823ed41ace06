"""Typed params checked when a run is triggered, and templated shell commands rendered on the worker
with the run's context — through schedctl and a real cluster."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.services import RunningCluster

pytestmark = pytest.mark.e2e

LIVENESS = 60.0

TYPED = {
    "dag_id": "typed_params",
    "params": {"rows": 10},
    "param_schemas": {
        "rows": {"type": "integer", "minimum": 1},
        "table": {"type": "string", "required": True},
    },
    "tasks": [
        {
            "task_id": "load",
            "shell": {
                "command": "echo rows={{ params.rows }} table={{ params.table | shell_quote }} "
                "ds={{ ds }} run={{ run_id }} try={{ try_number }}"
            },
        },
        {"task_id": "unknown", "shell": {"command": "echo {{ no_such_name }}"}},
    ],
}


def register(cluster: RunningCluster, tmp_path: Path, spec: dict[str, Any]) -> Any:
    path = tmp_path / f"{spec['dag_id']}.json"
    path.write_text(json.dumps(spec))
    return cluster.schedctl("dags", "register", str(path))


def test_a_conf_that_breaks_a_param_schema_is_refused_and_makes_no_run(
    module_cluster: RunningCluster, tmp_path: Path
) -> None:
    assert register(module_cluster, tmp_path, TYPED).returncode == 0
    missing = module_cluster.schedctl("runs", "trigger", "typed_params", "--run-id", "no_table")
    assert missing.returncode == 2 and "conf.table" in missing.stderr and "required" in missing.stderr
    wrong = module_cluster.schedctl(
        "runs", "trigger", "typed_params", "--run-id", "bad", "--conf", '{"table": "t", "rows": "many"}'
    )
    assert wrong.returncode == 2 and "conf.rows" in wrong.stderr and "integer" in wrong.stderr
    small = module_cluster.schedctl(
        "runs", "trigger", "typed_params", "--run-id", "small", "--conf", '{"table": "t", "rows": 0}'
    )
    assert small.returncode == 2 and "conf.rows" in small.stderr and "minimum" in small.stderr
    count = module_cluster.fetchval("SELECT count(*) FROM dag_runs WHERE dag_id = 'typed_params'")
    assert count == 0


def test_a_templated_command_is_rendered_with_the_runs_context(
    module_cluster: RunningCluster, tmp_path: Path
) -> None:
    assert register(module_cluster, tmp_path, TYPED).returncode == 0
    done = module_cluster.schedctl(
        "runs",
        "trigger",
        "typed_params",
        "--run-id",
        "r1",
        "--logical-date",
        "2026-03-04T05:06:07+00:00",
        "--conf",
        '{"table": "my table", "rows": 3}',
        "--wait",
        timeout=LIVENESS,
    )
    assert done.returncode == 1, done.stderr  # the task naming an unknown variable fails
    logs = module_cluster.schedctl("tasks", "logs", "typed_params/r1", "load")
    assert logs.returncode == 0
    assert "rows=3 table=my table ds=2026-03-04 run=r1 try=1" in logs.stdout
    assert "[schedd] rendered command: echo rows=3 table='my table' ds=2026-03-04" in logs.stdout
    run = json.loads(module_cluster.schedctl("-o", "json", "runs", "get", "typed_params/r1").stdout)
    unknown = next(t for t in run["task_instances"] if t["task_id"] == "unknown")
    assert unknown["state"] == "failed" and "no_such_name" in unknown["error"]


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"param_schemas": {"rows": {"type": "no-such-type"}}}, "spec.param_schemas.rows"),
        (
            {"params": {"rows": -1}, "param_schemas": {"rows": {"type": "integer", "minimum": 0}}},
            "spec.params.rows",
        ),
        ({"param_schemas": {"rows": {"required": "yes"}}}, "spec.param_schemas.rows.required"),
        (
            {
                "schedule": "@daily",
                "start_date": "2026-01-01T00:00:00Z",
                "param_schemas": {"x": {"required": True}},
            },
            "spec.param_schemas.x",
        ),
        (
            {"tasks": [{"task_id": "t", "shell": {"command": "echo {{ params.rows"}}]},
            "spec.tasks[0].shell.command",
        ),
    ],
)
def test_bad_schemas_defaults_and_templates_are_refused_at_registration(
    module_cluster: RunningCluster, tmp_path: Path, change: dict[str, Any], field: str
) -> None:
    spec = {"dag_id": "bad_params", "tasks": [{"task_id": "t", "shell": {"command": "true"}}], **change}
    refused = register(module_cluster, tmp_path, spec)
    assert refused.returncode == 2 and field in refused.stderr, refused.stderr
    assert module_cluster.schedctl("dags", "get", "bad_params").returncode == 3
