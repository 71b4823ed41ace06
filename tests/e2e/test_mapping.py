"""Dynamic task mapping through the real services (scheduler, registry, workers, PostgreSQL).

Every DAG is a spec registered with ``schedctl``: ``numbers`` returns ``range(n)`` for the run's conf
``n``, a mapped task expands over it (one task instance per element, map index 0..n-1), and a reduce
receives the mapped results as one list in map-index order. What happened is read back from
PostgreSQL; waits poll with generous bounds and no assertion is about speed.
"""

from __future__ import annotations

import json
import secrets
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_semantics import REPO, max_overlap
from tests.fixtures.services import RunningCluster

pytestmark = pytest.mark.e2e

TASKS = "tests.e2e.mapping_tasks"

INSTANCES = """
SELECT ti.task_id, ti.map_index, ti.task_key, ti.state, ti.try_number, ti.result, ti.error
FROM task_instances ti JOIN dag_runs r ON r.id = ti.run_pk
WHERE r.dag_id = $1 AND r.run_id = $2 ORDER BY ti.task_id, ti.map_index
"""


def python(task_id: str, function: str, *upstream: str, **options: Any) -> dict[str, Any]:
    return {
        "task_id": task_id,
        "upstream": list(upstream),
        "python": {"target": f"{TASKS}:{function}"},
        **options,
    }


def over(source: str, name: str = "x", key: str | None = None) -> dict[str, Any]:
    ref: dict[str, Any] = {"task_id": source}
    if key is not None:
        ref["key"] = key
    return {"name": name, "values": {"result": ref}}


def result_of(source: str) -> dict[str, Any]:
    return {"result": {"task_id": source}}


def fan_out_spec(dag_id: str, **mapped_options: Any) -> dict[str, Any]:
    """numbers -> square (mapped over numbers, offset=0 partial) -> total(values=square's results)."""
    return {
        "dag_id": dag_id,
        "param_schemas": {"n": {"type": "integer", "required": True}},
        "tasks": [
            python("numbers", "numbers"),
            python(
                "square",
                "square",
                "numbers",
                python={"target": f"{TASKS}:square", "kwargs": {"offset": {"literal": 0}}},
                mapping={"expand": [over("numbers")]},
                **mapped_options,
            ),
            python(
                "total",
                "total",
                "square",
                python={"target": f"{TASKS}:total", "kwargs": {"values": result_of("square")}},
            ),
        ],
    }


def register(cluster: RunningCluster, tmp_path: Path, spec: dict[str, Any]) -> None:
    path = tmp_path / f"{spec['dag_id']}-{secrets.token_hex(3)}.json"
    path.write_text(json.dumps(spec))
    done = cluster.schedctl("dags", "register", str(path))
    assert done.returncode == 0, done.stderr


def trigger_and_wait(cluster: RunningCluster, dag_id: str, run_id: str, conf: dict[str, Any]) -> int:
    done = cluster.schedctl(
        "runs", "trigger", dag_id, "--run-id", run_id, "--conf", json.dumps(conf), "--wait", timeout=300
    )
    return done.returncode


def instances(cluster: RunningCluster, dag_id: str, run_id: str) -> list[dict[str, Any]]:
    rows = cluster.fetch(INSTANCES, dag_id, run_id)
    return [{**r, "result": None if r["result"] is None else json.loads(r["result"])} for r in rows]


def by_key(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {r["task_key"]: r for r in rows}


@pytest.mark.parametrize("n", [0, 1, 500])
def test_a_mapped_task_makes_one_instance_per_element_and_the_reduce_gets_them_in_order(
    module_cluster: RunningCluster, tmp_path: Path, n: int
) -> None:
    dag_id = "mapped_fan_out"
    if n == 0:
        register(module_cluster, tmp_path, fan_out_spec(dag_id))
    code = trigger_and_wait(module_cluster, dag_id, f"n{n}", {"n": n})
    assert code == 0
    rows = instances(module_cluster, dag_id, f"n{n}")
    mapped = [r for r in rows if r["task_id"] == "square"]
    total = by_key(rows)["total"]
    if n == 0:
        # nothing to map over: the mapped task is skipped as one task instance, and so is its reduce
        assert [(r["map_index"], r["state"]) for r in mapped] == [(-1, "skipped")]
        assert total["state"] == "skipped"
        return
    assert [r["map_index"] for r in mapped] == list(range(n))
    assert {r["state"] for r in mapped} == {"success"} and {r["try_number"] for r in mapped} == {1}
    assert [r["result"] for r in mapped] == [x * x for x in range(n)]
    assert total["state"] == "success"
    assert total["result"] == {
        "count": n,
        "sum": sum(x * x for x in range(n)),
        "head": [x * x for x in range(n)][:5],
    }


def test_a_failing_element_is_retried_alone(module_cluster: RunningCluster, tmp_path: Path) -> None:
    dag_id = "mapped_retry"
    spec = {
        "dag_id": dag_id,
        "param_schemas": {"n": {"type": "integer", "required": True}},
        "tasks": [
            python("numbers", "numbers"),
            python(
                "flaky",
                "fails_once_for",
                "numbers",
                python={
                    "target": f"{TASKS}:fails_once_for",
                    "kwargs": {"bad": {"literal": 3}, "marker_dir": {"literal": str(tmp_path)}},
                },
                mapping={"expand": [over("numbers")]},
                retries=2,
                retry_delay="0.1s",
            ),
            python(
                "total",
                "total",
                "flaky",
                python={"target": f"{TASKS}:total", "kwargs": {"values": result_of("flaky")}},
            ),
        ],
    }
    register(module_cluster, tmp_path, spec)
    assert trigger_and_wait(module_cluster, dag_id, "r1", {"n": 6}) == 0
    rows = by_key(instances(module_cluster, dag_id, "r1"))
    tries = {key: r["try_number"] for key, r in rows.items() if key.startswith("flaky[")}
    assert tries == {f"flaky[{i}]": (2 if i == 3 else 1) for i in range(6)}
    attempts = module_cluster.fetch(
        "SELECT ti.task_key, a.try_number, a.state FROM task_attempts a "
        "JOIN task_instances ti ON ti.id = a.ti_id JOIN dag_runs r ON r.id = ti.run_pk "
        "WHERE r.dag_id = $1 AND r.run_id = 'r1' AND ti.task_id = 'flaky' "
        "ORDER BY ti.map_index, a.try_number",
        dag_id,
    )
    assert [
        (a["task_key"], a["try_number"], a["state"]) for a in attempts if a["task_key"] == "flaky[3]"
    ] == [
        ("flaky[3]", 1, "failed"),
        ("flaky[3]", 2, "success"),
    ]
    assert len(attempts) == 7  # one attempt per element, and one retry of element 3
    assert rows["total"]["result"] == {"count": 6, "sum": 15, "head": [0, 1, 2, 3, 4]}


def test_literal_lists_expand_into_their_cartesian_product(
    module_cluster: RunningCluster, tmp_path: Path
) -> None:
    dag_id = "mapped_literals"
    literal = {"letter": ["a", "b"], "number": [1, 2, 3]}
    spec = {
        "dag_id": dag_id,
        "tasks": [
            python(
                "pair",
                "pair",
                mapping={"expand": [{"name": k, "values": {"literal": v}} for k, v in literal.items()]},
            ),
            python(
                "joined",
                "joined",
                "pair",
                python={"target": f"{TASKS}:joined", "kwargs": {"values": result_of("pair")}},
            ),
        ],
    }
    register(module_cluster, tmp_path, spec)
    assert trigger_and_wait(module_cluster, dag_id, "r1", {}) == 0
    rows = by_key(instances(module_cluster, dag_id, "r1"))
    assert [rows[f"pair[{i}]"]["result"] for i in range(6)] == ["a1", "a2", "a3", "b1", "b2", "b3"]
    assert rows["joined"]["result"] == "a1,a2,a3,b1,b2,b3"


def test_a_mapped_task_that_cannot_expand_fails_with_the_reason_and_runs_nothing(
    module_cluster: RunningCluster, tmp_path: Path
) -> None:
    dag_id = "mapped_too_long"
    register(module_cluster, tmp_path, fan_out_spec(dag_id))
    assert trigger_and_wait(module_cluster, dag_id, "big", {"n": 1025}) != 0
    rows = by_key(instances(module_cluster, dag_id, "big"))
    assert rows["square"]["state"] == "failed" and rows["square"]["map_index"] == -1
    assert "more than 1024" in rows["square"]["error"]
    assert rows["total"]["state"] == "upstream_failed"
    assert not [key for key in rows if key.startswith("square[")]
    dag_bad = "mapped_not_a_list"
    spec = {
        "dag_id": dag_bad,
        "tasks": [
            python("numbers", "not_a_list"),
            python("square", "square", "numbers", mapping={"expand": [over("numbers")]}),
        ],
    }
    register(module_cluster, tmp_path, spec)
    assert trigger_and_wait(module_cluster, dag_bad, "r1", {}) != 0
    square = by_key(instances(module_cluster, dag_bad, "r1"))["square"]
    assert square["state"] == "failed" and "not a list" in square["error"]


def test_each_instance_knows_its_map_index_and_has_its_own_idempotency_key(
    module_cluster: RunningCluster, tmp_path: Path
) -> None:
    dag_id = "mapped_identity"
    spec = {
        "dag_id": dag_id,
        "tasks": [
            python("who", "identity", mapping={"expand": [{"name": "x", "values": {"literal": [7, 8, 9]}}]})
        ],
    }
    register(module_cluster, tmp_path, spec)
    assert trigger_and_wait(module_cluster, dag_id, "r1", {}) == 0
    rows = by_key(instances(module_cluster, dag_id, "r1"))
    assert [rows[f"who[{i}]"]["result"] for i in range(3)] == [
        {"key": f"{dag_id}/r1/who[{i}]", "map_index": str(i)} for i in range(3)
    ]


def test_max_active_instances_counts_every_instance_of_a_mapped_task(
    module_cluster: RunningCluster, tmp_path: Path
) -> None:
    dag_id = "mapped_limited"
    spec = {
        "dag_id": dag_id,
        "tasks": [
            python(
                "slow",
                "hold",
                python={"target": f"{TASKS}:hold", "kwargs": {"seconds": {"literal": 0.3}}},
                mapping={"expand": [{"name": "x", "values": {"literal": list(range(6))}}]},
                max_active_instances=2,
            )
        ],
    }
    register(module_cluster, tmp_path, spec)
    assert trigger_and_wait(module_cluster, dag_id, "r1", {}) == 0
    spans = module_cluster.fetch(
        "SELECT a.started_at, a.ended_at FROM task_attempts a JOIN task_instances ti ON ti.id = a.ti_id "
        "JOIN dag_runs r ON r.id = ti.run_pk WHERE r.dag_id = $1 AND r.run_id = 'r1'",
        dag_id,
    )
    assert len(spans) == 6
    assert max_overlap([(s["started_at"], s["ended_at"]) for s in spans]) == 2


def test_the_mapping_example_runs_on_workers(module_cluster: RunningCluster) -> None:
    done = module_cluster.schedctl("dags", "register", str(REPO / "examples" / "mapping.py"))
    assert done.returncode == 0, done.stderr
    assert trigger_and_wait(module_cluster, "mapping", "r1", {}) == 0
    rows = by_key(instances(module_cluster, "mapping", "r1"))
    assert [rows[f"count_rows[{i}]"]["result"] for i in range(3)] == [120, 80, 45]
    assert rows["summarise"]["result"] == 245
    assert [rows[f"notify[{i}]"]["result"] for i in range(2)] == [
        "email: 245 rows loaded",
        "chat: 245 rows loaded",
    ]


def test_a_reduce_over_instances_that_stored_nothing_gets_a_list_of_none(
    module_cluster: RunningCluster, tmp_path: Path
) -> None:
    dag_id = "mapped_nothing"
    spec = {
        "dag_id": dag_id,
        "tasks": [
            python("quiet", "nothing", mapping={"expand": [{"name": "x", "values": {"literal": [1, 2]}}]}),
            python(
                "seen",
                "described",
                "quiet",
                python={"target": f"{TASKS}:described", "kwargs": {"values": result_of("quiet")}},
            ),
        ],
    }
    register(module_cluster, tmp_path, spec)
    assert trigger_and_wait(module_cluster, dag_id, "r1", {}) == 0
    assert by_key(instances(module_cluster, dag_id, "r1"))["seen"]["result"] == "[None, None]"
