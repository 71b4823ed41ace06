"""schedctl with a mapped task through the real services: instances shown and named as ``task_id[i]``
(or ``task_id --map-index i``), the plain id of an expanded task refused with a hint, one instance
cleared and run again alone."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.fixtures.services import RunningCluster

pytestmark = pytest.mark.e2e

TASKS = "tests.e2e.mapping_tasks"
RUN = "map_ctl/r1"


def _register(cluster: RunningCluster, tmp_path: Path) -> None:
    """numbers -> square, mapped over numbers' result (range(n) for the run's conf n)."""
    spec = {
        "dag_id": "map_ctl",
        "param_schemas": {"n": {"type": "integer", "required": True}},
        "tasks": [
            {"task_id": "numbers", "python": {"target": f"{TASKS}:numbers"}},
            {
                "task_id": "square",
                "upstream": ["numbers"],
                "python": {"target": f"{TASKS}:square"},
                "mapping": {"expand": [{"name": "x", "values": {"result": {"task_id": "numbers"}}}]},
            },
        ],
    }
    path = tmp_path / "map_ctl.json"
    path.write_text(json.dumps(spec))
    done = cluster.schedctl("dags", "register", str(path))
    assert done.returncode == 0, done.stderr


def test_schedctl_names_and_controls_mapped_instances(module_cluster: RunningCluster, tmp_path: Path) -> None:
    ctl = module_cluster.schedctl
    _register(module_cluster, tmp_path)
    done = ctl("runs", "trigger", "map_ctl", "--run-id", "r1", "--conf", '{"n": 3}', "--wait", timeout=300)
    assert done.returncode == 0, done.stderr
    table = ctl("runs", "get", RUN).stdout
    assert all(f"square[{i}]" in table for i in range(3)), table
    shown = json.loads(ctl("-o", "json", "runs", "get", RUN).stdout)["task_instances"]
    assert [(t["task_id"], t["map_index"]) for t in shown] == [("numbers", -1)] + [
        ("square", i) for i in range(3)
    ]

    assert ctl("tasks", "result", RUN, "square", "--map-index", "2").stdout.strip() == "4"
    assert ctl("tasks", "result", RUN, "square[1]").stdout.strip() == "1"
    plain = ctl("tasks", "result", RUN, "square")
    assert plain.returncode == 3 and "is mapped: name one of its instances, 'square[0]'" in plain.stderr
    assert ctl("tasks", "logs", RUN, "square", "-m", "0").returncode == 0
    bad = ctl("explain", RUN, "square[01]")
    assert bad.returncode == 2 and "must be a task id or TASK[N]" in bad.stderr

    cleared = ctl("tasks", "clear", RUN, "square[1]")
    assert cleared.returncode == 0 and "cleared: square[1]" in cleared.stdout, cleared.stderr
    waited = ctl("runs", "get", RUN, "--watch", timeout=300)
    assert waited.returncode == 0, waited.stderr
    tries = {
        r["task_key"]: r["try_number"]
        for r in module_cluster.fetch(
            "SELECT ti.task_key, ti.try_number FROM task_instances ti JOIN dag_runs r ON r.id = ti.run_pk "
            "WHERE r.dag_id = 'map_ctl'"
        )
    }
    assert tries == {"numbers": 1, "square[0]": 1, "square[1]": 2, "square[2]": 1}
    marked = ctl("tasks", "mark-failed", RUN, "square", "--map-index", "2")
    assert marked.returncode == 0 and "dags/map_ctl/runs/r1/tasks/square[2]: failed" in marked.stdout
