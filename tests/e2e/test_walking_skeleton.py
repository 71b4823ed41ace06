"""The walking skeleton end to end: schedctl -> api -> PostgreSQL -> scheduler -> registry -> workers.

Everything runs as real processes (``module_cluster``); the ordering guarantees are
checked from the database, where each attempt records when it was claimed, started
and ended.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from subprocess import CompletedProcess
from typing import Any

import pytest
import yaml

from tests.fixtures.services import RunningCluster

pytestmark = pytest.mark.e2e

ATTEMPTS_QUERY = """
SELECT ti.task_id, ti.state, ti.try_number, ti.exit_code AS ti_exit_code,
       ta.attempt_id, ta.state AS attempt_state, ta.worker_id, ta.exit_code,
       ta.claimed_at, ta.started_at, ta.ended_at
FROM task_instances ti
JOIN dag_runs r ON r.id = ti.run_pk
LEFT JOIN task_attempts ta ON ta.ti_id = ti.id
WHERE r.dag_id = $1 AND r.run_id = $2
ORDER BY ti.task_id, ta.claimed_at
"""


def write_spec(directory: Path, spec: dict[str, Any], name: str | None = None) -> Path:
    path = directory / (name or f"{spec['dag_id']}.yaml")
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def diamond_spec(dag_id: str, *, join_command: str = "echo d") -> dict[str, Any]:
    """a -> b, a -> c, (b, c) -> d, with sleeps so that an ordering mistake would show."""
    return {
        "dag_id": dag_id,
        "description": "e2e diamond",
        "tasks": [
            {"task_id": "a", "shell": {"command": "echo a; sleep 0.3"}},
            {"task_id": "b", "upstream": ["a"], "shell": {"command": "echo b; sleep 0.2"}},
            {"task_id": "c", "upstream": ["a"], "shell": {"command": "echo c; sleep 0.3"}},
            {"task_id": "d", "upstream": ["b", "c"], "shell": {"command": join_command}},
        ],
    }


def attempts_by_task(env: RunningCluster, dag_id: str, run_id: str) -> dict[str, list[dict[str, Any]]]:
    result: dict[str, list[dict[str, Any]]] = {}
    for row in env.fetch(ATTEMPTS_QUERY, dag_id, run_id):
        attempts = result.setdefault(row["task_id"], [])
        if row["attempt_id"] is not None:
            attempts.append(row)
    return result


def run_row(env: RunningCluster, dag_id: str, run_id: str) -> dict[str, Any]:
    rows = env.fetch(
        "SELECT state, started_at, ended_at FROM dag_runs WHERE dag_id = $1 AND run_id = $2", dag_id, run_id
    )
    assert len(rows) == 1, f"expected one dag_runs row for {dag_id}/{run_id}, got {rows}"
    return rows[0]


def trigger_and_wait(env: RunningCluster, dag_id: str, run_id: str, *options: str) -> CompletedProcess[str]:
    """``schedctl [OPTIONS] runs trigger DAG --run-id RUN --wait`` (bounded: 60 s)."""
    args = ("runs", "trigger", dag_id, "--run-id", run_id, "--wait", "--wait-timeout", "60")
    return env.schedctl(*options, *args)


def register(env: RunningCluster, path: Path) -> str:
    result = env.schedctl("dags", "register", str(path))
    assert result.returncode == 0, f"register failed: {result.stdout}{result.stderr}"
    return result.stdout


def test_diamond_runs_in_dependency_order(module_cluster: RunningCluster, tmp_path: Path) -> None:
    env = module_cluster
    register(env, write_spec(tmp_path, diamond_spec("e2e_diamond")))

    result = trigger_and_wait(env, "e2e_diamond", "r1")
    assert result.returncode == 0, f"run did not succeed: {result.stdout}{result.stderr}"
    assert "success" in result.stdout

    assert run_row(env, "e2e_diamond", "r1")["state"] == "success"
    attempts = attempts_by_task(env, "e2e_diamond", "r1")
    assert sorted(attempts) == ["a", "b", "c", "d"]
    for task_id, rows in attempts.items():
        assert len(rows) == 1, f"{task_id} ran {len(rows)} attempts: {rows}"
        (row,) = rows
        assert row["state"] == "success", row
        assert row["attempt_state"] == "success", row
        assert row["try_number"] == 1, row
        assert row["exit_code"] == 0, row
        assert row["claimed_at"] is not None and row["started_at"] is not None and row["ended_at"] is not None
        assert row["claimed_at"] <= row["started_at"] <= row["ended_at"], row

    a, b, c, d = (attempts[t][0] for t in "abcd")

    def after(later: dict[str, Any], *earlier: dict[str, Any]) -> None:
        finished: datetime = max(e["ended_at"] for e in earlier)
        names = ", ".join(e["task_id"] for e in earlier)
        assert later["claimed_at"] >= finished, f"{later['task_id']} was claimed before {names} ended"
        assert later["started_at"] >= finished, f"{later['task_id']} started before {names} ended"

    after(b, a)
    after(c, a)
    after(d, b, c)
    assert b["attempt_state"] == c["attempt_state"] == "success"
    env.assert_healthy()


def test_failing_task_fails_the_run_and_its_downstream(
    module_cluster: RunningCluster, tmp_path: Path
) -> None:
    env = module_cluster
    spec = {
        "dag_id": "e2e_fail_mid",
        "tasks": [
            {"task_id": "a", "shell": {"command": "echo a"}},
            {"task_id": "b", "upstream": ["a"], "shell": {"command": "echo failing; exit 3"}},
            {"task_id": "c", "upstream": ["b"], "shell": {"command": "echo never"}},
            {"task_id": "side", "upstream": ["a"], "shell": {"command": "echo side"}},
        ],
    }
    register(env, write_spec(tmp_path, spec))

    result = trigger_and_wait(env, "e2e_fail_mid", "f1")
    assert result.returncode == 1, f"expected exit 1 for a failed run: {result.stdout}{result.stderr}"
    assert "failed" in result.stdout

    assert run_row(env, "e2e_fail_mid", "f1")["state"] == "failed"
    attempts = attempts_by_task(env, "e2e_fail_mid", "f1")
    states = {t: env.fetchval(_TI_STATE, "e2e_fail_mid", "f1", t) for t in attempts}
    assert states == {"a": "success", "b": "failed", "c": "upstream_failed", "side": "success"}
    assert len(attempts["b"]) == 1
    assert attempts["b"][0]["exit_code"] == 3
    assert attempts["b"][0]["ti_exit_code"] == 3
    assert attempts["c"] == [], "a task downstream of a failure must never be attempted"

    got = env.schedctl("-o", "json", "runs", "get", "e2e_fail_mid/f1")
    assert got.returncode == 0, got.stderr
    run = json.loads(got.stdout)
    assert run["state"] == "failed"
    assert {t["task_id"]: t["state"] for t in run["task_instances"]}["c"] == "upstream_failed"
    env.assert_healthy()


_TI_STATE = """
SELECT ti.state FROM task_instances ti JOIN dag_runs r ON r.id = ti.run_pk
WHERE r.dag_id = $1 AND r.run_id = $2 AND ti.task_id = $3
"""


def test_json_output_of_runs_get(module_cluster: RunningCluster, tmp_path: Path) -> None:
    env = module_cluster
    register(env, write_spec(tmp_path, diamond_spec("e2e_json")))
    triggered = trigger_and_wait(env, "e2e_json", "j1", "-o", "json")
    assert triggered.returncode == 0, triggered.stdout + triggered.stderr
    assert json.loads(triggered.stdout)["state"] == "success"

    for ref in ("e2e_json/j1", "dags/e2e_json/runs/j1"):
        got = env.schedctl("-o", "json", "runs", "get", ref)
        assert got.returncode == 0, got.stderr
        run = json.loads(got.stdout)
        assert run["name"] == "dags/e2e_json/runs/j1"
        assert run["dag_id"] == "e2e_json" and run["run_id"] == "j1"
        assert run["state"] == "success"
        tasks = {t["task_id"]: t for t in run["task_instances"]}
        assert {k: t["state"] for k, t in tasks.items()} == dict.fromkeys("abcd", "success")
        assert all(t["try_number"] == 1 and t["worker_id"].startswith("worker-") for t in tasks.values())


def test_reregistering_is_idempotent_and_a_change_makes_a_version(
    module_cluster: RunningCluster, tmp_path: Path
) -> None:
    env = module_cluster
    first = register(env, write_spec(tmp_path, diamond_spec("e2e_versions")))
    assert "registered new version" in first
    hash1 = first.split()[-1]

    again = register(env, write_spec(tmp_path, diamond_spec("e2e_versions"), "again.yaml"))
    assert "unchanged" in again and again.split()[-1] == hash1

    reordered = diamond_spec("e2e_versions")
    reordered["tasks"][3]["upstream"] = ["c", "b"]  # same meaning: upstream order does not matter
    same = register(env, write_spec(tmp_path, reordered, "reordered.yaml"))
    assert "unchanged" in same and same.split()[-1] == hash1

    changed = register(env, write_spec(tmp_path, diamond_spec("e2e_versions", join_command="echo new d")))
    assert "registered new version" in changed
    hash2 = changed.split()[-1]
    assert hash2 != hash1

    versions = env.fetchval("SELECT count(*) FROM dag_versions WHERE dag_id = $1", "e2e_versions")
    assert versions == 2

    table = env.schedctl("dags", "list")
    assert table.returncode == 0, table.stderr
    line = next((ln for ln in table.stdout.splitlines() if "e2e_versions" in ln), None)
    assert line is not None, table.stdout
    assert hash2 in line

    listed = env.schedctl("-o", "json", "dags", "list")
    assert listed.returncode == 0, listed.stderr
    dags = {d["dag_id"]: d for d in json.loads(listed.stdout)}
    assert dags["e2e_versions"]["latest_version"] == hash2
    assert [t["shell"]["command"] for t in dags["e2e_versions"]["spec"]["tasks"]][-1] == "echo new d"


def test_attempt_records_when_the_worker_started_it(module_cluster: RunningCluster, tmp_path: Path) -> None:
    env = module_cluster
    spec = {"dag_id": "e2e_started_at", "tasks": [{"task_id": "t", "shell": {"command": "sleep 0.2"}}]}
    register(env, write_spec(tmp_path, spec))
    result = trigger_and_wait(env, "e2e_started_at", "s1")
    assert result.returncode == 0, result.stdout + result.stderr
    (row,) = attempts_by_task(env, "e2e_started_at", "s1")["t"]
    # The worker starts the command only after the claim committed and the assignment reached it.
    assert row["started_at"] > row["claimed_at"], row


def test_workers_and_schedulers_come_and_go(module_cluster: RunningCluster, tmp_path: Path) -> None:
    """The Cluster helpers later chaos tests rely on: add, pause, kill workers; hand leadership over."""
    env = module_cluster
    cl = env.cluster
    assert cl.processes and all(p.alive for p in cl.processes)
    assert sorted(cl.workers) == ["worker-1", "worker-2"]
    token, holder = cl.fence()
    assert token > 0 and holder in cl.schedulers
    assert cl.leader() is cl.schedulers[holder]

    extra = cl.add_worker()  # returns once connected
    assert extra.name == "worker-3" and extra.alive
    assert env.fetchval("SELECT state FROM workers WHERE worker_id = $1", "worker-3") == "active"
    extra.pause()
    assert extra.paused and extra.alive
    extra.resume()
    assert not extra.paused
    assert cl.kill_worker("worker-3") == -9
    assert not extra.alive and extra not in cl.dead()

    standby = cl.add_scheduler()
    assert standby.alive and cl.leader() is cl.schedulers[holder]
    assert cl.stop_scheduler(holder) == 0  # a graceful stop resigns: the standby takes over at once
    new_token, new_leader = cl.wait_for_leader(above=token, timeout=20)
    assert new_leader is standby and new_token > token
    shown = env.schedctl("-o", "json", "leader")
    assert shown.returncode == 0, shown.stdout + shown.stderr
    status = json.loads(shown.stdout)
    standby_id = next(i for i, p in cl.schedulers.items() if p is standby)
    assert status["elected"] is True and status["leader"]["identity"] == standby_id, status
    assert int(status["token"]) == int(status["fence_token"]) == new_token, status

    register(env, write_spec(tmp_path, diamond_spec("e2e_after_handover")))
    result = trigger_and_wait(env, "e2e_after_handover", "h1")
    assert result.returncode == 0, result.stdout + result.stderr
    assert not cl.dead(), cl.dead()
