"""A fix reaches a failed run: clear, mark and a backfill's reruns with ``run_on_latest_version``
move the run to the DAG's current version, each try records the version it ran, ``dags versions``
marks the current one, and registering an older spec again says the DAG moved back to it."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.cli_steps import RUN_DEADLINE, as_json, ok, register, tasks_of, wait_run_ended
from tests.fixtures.services import RunningCluster
from tests.polling import wait_until

pytestmark = pytest.mark.e2e


def chain(dag_id: str, b_command: str, *, extra: bool = False, **options: Any) -> dict[str, Any]:
    """``a >> b`` (``>> c`` with ``extra``): ``a`` succeeds, ``b`` runs ``b_command``."""
    tasks = [
        {"task_id": "a", "shell": {"command": "true"}},
        {"task_id": "b", "shell": {"command": b_command}, "upstream": ["a"]},
    ]
    if extra:
        tasks.append({"task_id": "c", "shell": {"command": "true"}, "upstream": ["b"]})
    return {"dag_id": dag_id, "tasks": tasks, **options}


def version_hash(printed: str) -> str:
    """The version a ``dags register`` line names (``... version HASH``)."""
    found = re.search(r"version ([0-9a-f]+)", printed)
    assert found is not None, printed
    return found.group(1)


def failed_run(cluster: RunningCluster, tmp_path: Path, dag_id: str, **options: Any) -> tuple[str, str]:
    """Register a DAG whose task b fails, run it to failure; returns the run and the version hash."""
    v1 = version_hash(register(cluster, tmp_path, chain(dag_id, "exit 3", extra=True, **options)))
    ok(cluster, "runs", "trigger", dag_id, "--run-id", "r1")
    run = wait_run_ended(cluster, f"{dag_id}/r1")
    assert run["state"] == "failed", run
    return f"{dag_id}/r1", v1


def test_clearing_on_the_latest_version_runs_the_fix_and_records_who_ran_what(
    module_cluster: RunningCluster, tmp_path: Path
) -> None:
    run, v1 = failed_run(module_cluster, tmp_path, "latest_clear")
    v2 = version_hash(register(module_cluster, tmp_path, chain("latest_clear", "true", extra=True)))
    assert v2 != v1
    # A plain clear runs the run's own version again: the old code fails again.
    ok(module_cluster, "tasks", "clear", run, "b", "--downstream")
    again = wait_run_ended(module_cluster, run)
    assert again["state"] == "failed" and again["dag_version"] == v1
    assert tasks_of(again)["b"]["dag_version"] == v1

    cleared = ok(module_cluster, "tasks", "clear", run, "b", "--downstream", "--latest-version")
    assert f"the run is on version {v2}" in cleared
    fixed = wait_run_ended(module_cluster, run)
    assert fixed["state"] == "success", fixed
    tasks = tasks_of(fixed)
    assert fixed["dag_version"] == v2
    assert (tasks["a"]["dag_version"], tasks["b"]["dag_version"], tasks["c"]["dag_version"]) == (v1, v2, v2)
    table = ok(module_cluster, "runs", "get", run)
    assert "ran an earlier version: a" in table
    wide = ok(module_cluster, "-o", "wide", "runs", "get", run)
    assert v1 in wide and v2 in wide
    attempts = module_cluster.fetch(
        "SELECT ti.task_id, a.try_number, v.version_hash FROM task_attempts a "
        "JOIN task_instances ti ON ti.id = a.ti_id JOIN dag_runs r ON r.id = ti.run_pk "
        "JOIN dag_versions v ON v.id = a.dag_version_id WHERE r.dag_id = 'latest_clear' AND ti.task_id = 'b' "
        "ORDER BY a.try_number"
    )
    assert [(a["try_number"], a["version_hash"]) for a in attempts] == [(1, v1), (2, v1), (3, v2)]


def test_marking_on_the_latest_version_runs_what_follows_on_it(
    module_cluster: RunningCluster, tmp_path: Path
) -> None:
    run, v1 = failed_run(module_cluster, tmp_path, "latest_mark")
    fixed = chain("latest_mark", "exit 3", extra=True)
    fixed["tasks"][2]["shell"]["command"] = "echo fixed-c"
    v2 = version_hash(register(module_cluster, tmp_path, fixed))
    ok(module_cluster, "tasks", "mark-success", run, "b", "--latest-version")
    done = wait_run_ended(module_cluster, run)
    assert done["state"] == "success", done
    tasks = tasks_of(done)
    assert tasks["c"]["dag_version"] == v2 and tasks["b"]["dag_version"] == v1
    logs = ok(module_cluster, "tasks", "logs", run, "c")
    assert "fixed-c" in logs


def test_a_task_the_new_version_drops_is_removed_and_one_it_adds_runs(
    module_cluster: RunningCluster, tmp_path: Path
) -> None:
    run, _ = failed_run(module_cluster, tmp_path, "latest_shape")
    reshaped = {
        "dag_id": "latest_shape",
        "tasks": [
            {"task_id": "a", "shell": {"command": "true"}},
            {"task_id": "b", "shell": {"command": "true"}, "upstream": ["a"]},
            {"task_id": "d", "shell": {"command": "true"}, "upstream": ["b"]},
        ],
    }
    register(module_cluster, tmp_path, reshaped)
    ok(module_cluster, "tasks", "clear", run, "b", "--latest-version")
    done = wait_run_ended(module_cluster, run)
    tasks = tasks_of(done)
    assert done["state"] == "success", done
    assert tasks["d"]["state"] == "success"
    # c (upstream_failed, a finished state) keeps its history; the new version's planner ignores it.
    assert tasks["c"]["state"] == "upstream_failed"


def test_a_clear_naming_a_task_the_current_version_lacks_is_refused_and_changes_nothing(
    module_cluster: RunningCluster, tmp_path: Path
) -> None:
    run, v1 = failed_run(module_cluster, tmp_path, "latest_refused")
    register(
        module_cluster,
        tmp_path,
        {"dag_id": "latest_refused", "tasks": [{"task_id": "a", "shell": {"command": "true"}}]},
    )
    refused = module_cluster.schedctl("tasks", "clear", run, "b", "--latest-version")
    assert refused.returncode != 0
    assert "task_ids[0]" in refused.stderr and "b" in refused.stderr
    after = as_json(module_cluster, "runs", "get", run)
    assert after["dag_version"] == v1 and after["state"] == "failed"


def backfill(cluster: RunningCluster, dag_id: str, *args: str) -> dict[str, Any]:
    """Create a backfill and wait for it to end; returns it (JSON)."""
    created = as_json(cluster, "backfill", "create", dag_id, *args)
    name = created["name"]
    wait_until(
        f"{name} to end",
        lambda: as_json(cluster, "backfill", "get", name)["state"] in ("succeeded", "failed", "cancelled"),
        RUN_DEADLINE,
        interval=0.1,
    )
    found: dict[str, Any] = as_json(cluster, "backfill", "get", name)
    return found


def test_a_backfill_reruns_failed_runs_on_the_latest_version_with_its_conf(
    module_cluster: RunningCluster, tmp_path: Path
) -> None:
    daily: dict[str, Any] = {
        "schedule": "@daily",
        "start_date": "2024-01-01T00:00:00Z",
        "catchup": False,
        "params": {"who": "nobody"},
    }
    v1 = version_hash(register(module_cluster, tmp_path, chain("latest_backfill", "exit 3", **daily)))
    window = ["--start", "2024-01-01T00:00:00Z", "--end", "2024-01-02T00:00:00Z"]
    assert backfill(module_cluster, "latest_backfill", *window)["state"] == "failed"
    v2 = version_hash(register(module_cluster, tmp_path, chain("latest_backfill", "true", **daily)))
    assert v2 != v1
    again = backfill(
        module_cluster, "latest_backfill", *window, "--reprocess", "rerun_failed", "--latest-version"
    )
    assert again["state"] == "succeeded" and again["run_on_latest_version"] is True, again
    runs = as_json(module_cluster, "runs", "list", "latest_backfill", "--type", "backfill")
    assert len(runs) == 2
    for listed in runs:
        assert listed["state"] == "success" and listed["dag_version"] == v2, listed
    with_conf = backfill(
        module_cluster,
        "latest_backfill",
        "--start",
        "2024-01-05T00:00:00Z",
        "--end",
        "2024-01-05T00:00:00Z",
        "--conf",
        '{"who": "backfiller"}',
    )
    assert with_conf["conf"] == {"who": "backfiller"} and with_conf["state"] == "succeeded"
    made = module_cluster.fetch(
        "SELECT conf::text AS conf FROM dag_runs WHERE dag_id = 'latest_backfill' "
        "AND logical_date = '2024-01-05T00:00:00Z'"
    )
    assert [json.loads(r["conf"]) for r in made] == [{"who": "backfiller"}]
    refused = module_cluster.schedctl(
        "backfill", "create", "latest_backfill", *window, "--conf", '{"nobody": 1}'
    )
    assert refused.returncode != 0 and "backfill.conf.nobody" in refused.stderr


def test_versions_mark_the_current_one_and_old_code_again_moves_it_back(
    module_cluster: RunningCluster, tmp_path: Path
) -> None:
    first = register(module_cluster, tmp_path, chain("latest_back", "echo one"))
    v1 = version_hash(first)
    assert "is new" in first
    v2 = version_hash(register(module_cluster, tmp_path, chain("latest_back", "echo two")))
    back = register(module_cluster, tmp_path, chain("latest_back", "echo one"))
    assert f"current version moved back from {v2} to version {v1}" in back
    listed = as_json(module_cluster, "dags", "versions", "latest_back")
    assert [(v["version_hash"], v.get("current", False)) for v in listed] == [(v2, False), (v1, True)]
    table = ok(module_cluster, "dags", "versions", "latest_back")
    marks = {h: "*" in line for line in table.splitlines() for h in (v1, v2) if h in line}
    assert marks == {v1: True, v2: False}, table
    same = register(module_cluster, tmp_path, chain("latest_back", "echo one"))
    assert f"unchanged, version {v1}" in same
