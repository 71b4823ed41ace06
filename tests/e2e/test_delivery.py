"""Delivery end to end: task logs through schedctl, Python tasks (return values, params, errors),
the environment of an attempt, and the same DAG under each executor (distributed, local,
sequential).

Everything runs as real processes. Python tasks name callables of ``tests.chaos.noop_tasks``,
which workers import because services run with the repository root as working directory.
"""

from __future__ import annotations

import itertools
import json
import os
import secrets
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from schedd_devstack import LocalEtcd
from schedd_devstack.postgres import create_database, drop_database, with_database
from schedd_devstack.services import Cluster
from schedd_devstack.stack import make_base_dir
from tests.fixtures.services import RunningCluster, schedctl
from tests.polling import wait_until

pytestmark = pytest.mark.e2e

REPO_ROOT = Path(__file__).resolve().parents[2]
TASKS = "tests.chaos.noop_tasks"
#: Liveness bound (seconds) for runs, logs and fail-overs: generous on purpose.
LIVENESS = 60.0

ATTEMPTS = """
SELECT ti.task_id, a.attempt_id::text AS attempt_id, a.try_number, a.worker_id, a.state,
       a.started_at, a.ended_at
FROM task_attempts a
JOIN task_instances ti ON ti.id = a.ti_id
JOIN dag_runs r ON r.id = ti.run_pk
WHERE r.dag_id = $1 AND r.run_id = $2
ORDER BY a.try_number, a.started_at
"""

TASK_ROWS = """
SELECT ti.task_id, ti.state, ti.try_number, ti.attempt_id::text AS attempt_id, ti.worker_id, ti.result,
       ti.error
FROM task_instances ti JOIN dag_runs r ON r.id = ti.run_pk
WHERE r.dag_id = $1 AND r.run_id = $2
"""


@pytest.fixture(scope="module")
def delivery_cluster(
    database_url: str, etcd_endpoints: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningCluster]:
    """Like ``module_cluster`` (a default cluster on a database of this module's own), with the
    services in the repository root (for ``tests.chaos.noop_tasks``)."""
    name = f"t_{secrets.token_hex(8)}"
    create_database(database_url, name)
    url = with_database(database_url, name)
    log_dir = tmp_path_factory.mktemp("delivery")
    cluster = Cluster(
        url,
        etcd_endpoints,
        log_dir,
        cwd=REPO_ROOT,
    )
    try:
        began = time.monotonic()
        cluster.start()
        yield RunningCluster(cluster, url, log_dir, time.monotonic() - began)
    finally:
        cluster.stop()
        cluster.release_election()
        drop_database(database_url, name)


# -- helpers ------------------------------------------------------------------------------------------


def register(api: str, directory: Path, spec: dict[str, Any]) -> None:
    path = directory / f"{spec['dag_id']}.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    result = schedctl(api, "dags", "register", str(path))
    assert result.returncode == 0, result.stdout + result.stderr


def trigger_and_wait(api: str, dag_id: str, run_id: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return schedctl(
        api, "runs", "trigger", dag_id, "--run-id", run_id, "--wait", "--wait-timeout", str(LIVENESS), *extra
    )


def run_json(api: str, dag_id: str, run_id: str) -> dict[str, Any]:
    result = schedctl(api, "runs", "get", f"{dag_id}/{run_id}", "-o", "json")
    assert result.returncode == 0, result.stderr
    value: dict[str, Any] = json.loads(result.stdout)
    return value


def task_rows(
    fetch: Callable[..., list[dict[str, Any]]], dag_id: str, run_id: str
) -> dict[str, dict[str, Any]]:
    rows = {r["task_id"]: r for r in fetch(TASK_ROWS, dag_id, run_id)}
    for row in rows.values():
        # asyncpg hands jsonb over as text
        row["result"] = json.loads(row["result"]) if isinstance(row["result"], str) else row["result"]
    return rows


def logs(api: str, run: str, task_id: str, *options: str) -> subprocess.CompletedProcess[str]:
    """``tasks logs``, the output as the task wrote it (no line times)."""
    return schedctl(api, "tasks", "logs", run, task_id, "--no-timestamps", *options)


def wait_for_logs(api: str, run: str, task_id: str, expected: str, *options: str) -> None:
    """Output is stored apart from the result, so it may land a moment after the run finished."""
    seen: list[subprocess.CompletedProcess[str]] = []

    def complete() -> bool:
        seen.append(logs(api, run, task_id, *options))
        return seen[-1].returncode == 0 and seen[-1].stdout == expected

    try:
        wait_until(f"the logs of {run} {task_id} {' '.join(options)}", complete, 15, interval=0.2)
    except AssertionError:
        last = seen[-1]
        raise AssertionError(
            f"logs: exit {last.returncode}, stdout {last.stdout!r}, stderr {last.stderr!r}"
        ) from None


# -- logs ---------------------------------------------------------------------------------------------


def test_logs_print_the_multiline_output_of_a_shell_task(
    delivery_cluster: RunningCluster, tmp_path: Path
) -> None:
    api = delivery_cluster.api_address
    command = (
        "printf 'first line\\nsecond line\\n'; echo 'to stderr' >&2; "
        "printf '  indented\\n\\nlast, no newline'"
    )
    register(
        api, tmp_path, {"dag_id": "logs_multi", "tasks": [{"task_id": "talk", "shell": {"command": command}}]}
    )
    result = trigger_and_wait(api, "logs_multi", "r1")
    assert result.returncode == 0, result.stdout + result.stderr

    expected = "first line\nsecond line\nto stderr\n  indented\n\nlast, no newline"
    wait_for_logs(api, "logs_multi/r1", "talk", expected)
    long_form = logs(api, "dags/logs_multi/runs/r1", "talk", "--try", "1")
    assert (long_form.returncode, long_form.stdout) == (0, expected), long_form


def test_logs_of_each_try_of_a_task_retried_after_its_worker_died(
    delivery_cluster: RunningCluster, tmp_path: Path
) -> None:
    api = delivery_cluster.api_address
    cluster = delivery_cluster.cluster
    command = (
        'echo "output of try $SCHEDD_TRY_NUMBER"; '
        # try 1 kills its worker (our parent) after a moment, so the output reaches the registry
        'if [ "$SCHEDD_TRY_NUMBER" = 1 ]; then sleep 1; kill -9 $PPID; sleep 10; fi'
    )
    register(
        api, tmp_path, {"dag_id": "logs_retried", "tasks": [{"task_id": "t", "shell": {"command": command}}]}
    )
    try:
        result = trigger_and_wait(api, "logs_retried", "r1")
        assert result.returncode == 0, result.stdout + result.stderr
    finally:
        for worker_id, proc in list(cluster.workers.items()):
            if not proc.alive and not proc.stopped:
                cluster.add_worker(worker_id)  # restore the shared cluster
    attempts = delivery_cluster.fetch(ATTEMPTS, "logs_retried", "r1")
    assert [(a["try_number"], a["state"]) for a in attempts] == [(1, "lost"), (2, "success")], attempts

    wait_for_logs(api, "logs_retried/r1", "t", "output of try 1\n", "--try", "1")
    wait_for_logs(api, "logs_retried/r1", "t", "output of try 2\n", "--try", "2")
    wait_for_logs(api, "logs_retried/r1", "t", "output of try 2\n")  # the latest by default
    missing = logs(api, "logs_retried/r1", "t", "--try", "3")
    assert missing.returncode == 3 and "try 3" in missing.stderr, missing  # not found


def test_logs_of_each_try_of_a_task_retried_after_it_failed(
    delivery_cluster: RunningCluster, tmp_path: Path
) -> None:
    api = delivery_cluster.api_address
    task = {
        "task_id": "flaky",
        "retries": 2,
        "retry_delay": "0.1s",
        "shell": {"command": 'echo "try $SCHEDD_TRY_NUMBER"; [ "$SCHEDD_TRY_NUMBER" -ge 2 ]'},
    }
    register(api, tmp_path, {"dag_id": "logs_failed_once", "tasks": [task]})
    result = trigger_and_wait(api, "logs_failed_once", "r1")
    rows = task_rows(delivery_cluster.fetch, "logs_failed_once", "r1")
    assert result.returncode == 0, f"{result.stdout}{result.stderr}{rows}"
    assert (rows["flaky"]["state"], rows["flaky"]["try_number"]) == ("success", 2), rows
    attempts = delivery_cluster.fetch(ATTEMPTS, "logs_failed_once", "r1")
    assert [(a["try_number"], a["state"]) for a in attempts] == [(1, "failed"), (2, "success")], attempts
    failure = "[schedd] try 1 failed: exit code 1\n"  # how the try ended, at the end of its log
    wait_for_logs(api, "logs_failed_once/r1", "flaky", "try 1\n" + failure, "--try", "1")
    wait_for_logs(api, "logs_failed_once/r1", "flaky", "try 2\n")


def test_logs_follow_prints_lines_as_they_come_and_exits_when_the_task_ends(
    delivery_cluster: RunningCluster, tmp_path: Path
) -> None:
    api = delivery_cluster.api_address
    command = 'for i in 1 2 3 4 5 6; do echo "tick $i"; sleep 0.8; done'  # long enough for schedctl to start
    register(
        api,
        tmp_path,
        {"dag_id": "logs_follow", "tasks": [{"task_id": "ticker", "shell": {"command": command}}]},
    )
    result = schedctl(api, "runs", "trigger", "logs_follow", "--run-id", "r1")
    assert result.returncode == 0, result.stderr

    def state() -> str:
        return str(task_rows(delivery_cluster.fetch, "logs_follow", "r1").get("ticker", {}).get("state"))

    wait_until("the ticker to run", lambda: state() == "running", LIVENESS)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCHEDD_")}
    env.update({"COLUMNS": "400", "NO_COLOR": "1", "PYTHONUNBUFFERED": "1"})
    follower = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "schedctl.main",
            "--api",
            api,
            "tasks",
            "logs",
            "logs_follow/r1",
            "ticker",
            "-f",
            "--no-timestamps",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    arrivals: list[tuple[float, str, str]] = []

    def read() -> None:
        assert follower.stdout is not None
        for line in follower.stdout:
            arrivals.append((time.monotonic(), line.rstrip("\n"), state()))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        code = follower.wait(timeout=LIVENESS)
    finally:
        if follower.poll() is None:
            follower.kill()
            follower.wait()
    reader.join(5)
    stderr = follower.stderr.read() if follower.stderr else ""
    assert code == 0, stderr
    assert [line for _, line, _ in arrivals] == [f"tick {i}" for i in range(1, 7)], (arrivals, stderr)
    assert state() == "success", "the follower exited before the task ended"
    spread = arrivals[-1][0] - arrivals[0][0]
    running_when_seen = sum(s == "running" for _, _, s in arrivals)
    print(f"\nlogs -f: 6 lines over {spread:.2f}s, {running_when_seen} of them while the task ran")
    # The lines arrived while the task ran, not all at once at the end.
    assert running_when_seen >= 3 and spread >= 1.0, arrivals


def test_logs_of_an_unknown_task_or_run_exit_3(delivery_cluster: RunningCluster, tmp_path: Path) -> None:
    api = delivery_cluster.api_address
    register(
        api, tmp_path, {"dag_id": "logs_known", "tasks": [{"task_id": "t", "shell": {"command": "echo hi"}}]}
    )
    assert trigger_and_wait(api, "logs_known", "r1").returncode == 0
    for run, task_id, word in [
        ("logs_known/r1", "no_such_task", "no_such_task"),
        ("logs_known/no_such_run", "t", "no_such_run"),
        ("no_such_dag/r1", "t", "no_such_dag"),
    ]:
        result = logs(api, run, task_id)
        assert result.returncode == 3, (run, task_id, result)  # not found
        assert word in result.stderr and result.stdout == "", result
    assert logs(api, "not-a-run-name", "t").returncode == 2
    assert logs(api, "logs_known/r1", "t", "--try", "2").returncode == 3


# -- Python tasks and the attempt's environment ------------------------------------------------------


def test_python_tasks_pass_values_and_params_and_see_their_identity(
    delivery_cluster: RunningCluster, tmp_path: Path
) -> None:
    api = delivery_cluster.api_address
    spec = {
        "dag_id": "py_values",
        "tasks": [
            {"task_id": "produce", "python": {"target": f"{TASKS}:produce"}, "params": {"base": 21}},
            {
                "task_id": "echo",
                "python": {"target": f"{TASKS}:echo_params"},
                "params": {"greeting": "hi", "from_conf": "no"},
            },
            {"task_id": "consume", "upstream": ["produce", "echo"], "python": {"target": f"{TASKS}:consume"}},
            {"task_id": "env", "python": {"target": f"{TASKS}:schedd_env"}},
            {
                "task_id": "shell_env",
                "shell": {"command": "env | grep '^SCHEDD_' | sort"},
                "params": {"color": "blue"},
            },
        ],
    }
    register(api, tmp_path, spec)
    result = trigger_and_wait(api, "py_values", "r1", "--conf", '{"from_conf": "yes"}')
    assert result.returncode == 0, result.stdout + result.stderr
    rows = task_rows(delivery_cluster.fetch, "py_values", "r1")
    assert {t: r["state"] for t, r in rows.items()} == dict.fromkeys(rows, "success")

    produced = {"doubled": 42, "items": [21, 22], "from": "produce"}
    assert rows["produce"]["result"] == produced
    # params: the task's own, plus the run's conf
    echoed = {"params": {"greeting": "hi", "from_conf": "yes"}}
    assert rows["echo"]["result"] == echoed
    assert rows["consume"]["result"] == {"upstream": {"produce": produced, "echo": echoed}}

    env = rows["env"]["result"]
    assert env["SCHEDD_DAG_ID"] == "py_values" and env["SCHEDD_RUN_ID"] == "r1"
    assert env["SCHEDD_TASK_ID"] == "env" and env["SCHEDD_TRY_NUMBER"] == "1"
    assert env["SCHEDD_ATTEMPT_ID"] == rows["env"]["attempt_id"]
    assert env["SCHEDD_IDEMPOTENCY_KEY"] == "py_values/r1/env"
    datetime.fromisoformat(env["SCHEDD_LOGICAL_DATE"])
    assert "SCHEDD_UPSTREAM_RESULTS" not in env  # no upstream tasks

    wait_until(
        "the shell task's output",
        lambda: "SCHEDD_PARAMS" in logs(api, "py_values/r1", "shell_env").stdout,
        15,
        interval=0.2,
    )
    out = logs(api, "py_values/r1", "shell_env")
    shell_env = dict(line.split("=", 1) for line in out.stdout.splitlines() if "=" in line)
    assert shell_env["SCHEDD_IDEMPOTENCY_KEY"] == "py_values/r1/shell_env"
    assert shell_env["SCHEDD_ATTEMPT_ID"] == rows["shell_env"]["attempt_id"]
    assert (shell_env["SCHEDD_DAG_ID"], shell_env["SCHEDD_RUN_ID"], shell_env["SCHEDD_TASK_ID"]) == (
        "py_values",
        "r1",
        "shell_env",
    )
    assert shell_env["SCHEDD_TRY_NUMBER"] == "1"
    assert json.loads(shell_env["SCHEDD_PARAMS"]) == {"color": "blue", "from_conf": "yes"}


def test_a_python_exception_fails_the_task_with_the_exception_as_its_error(
    delivery_cluster: RunningCluster, tmp_path: Path
) -> None:
    api = delivery_cluster.api_address
    spec = {
        "dag_id": "py_boom",
        "tasks": [
            {"task_id": "boom", "python": {"target": f"{TASKS}:boom"}},
            {"task_id": "after", "upstream": ["boom"], "shell": {"command": "echo never"}},
        ],
    }
    register(api, tmp_path, spec)
    result = trigger_and_wait(api, "py_boom", "r1")
    assert result.returncode == 1, result.stdout + result.stderr
    run = run_json(api, "py_boom", "r1")
    assert run["state"] == "failed"
    tasks = {t["task_id"]: t for t in run["task_instances"]}
    assert tasks["boom"]["state"] == "failed"
    error = tasks["boom"]["error"]
    assert "ValueError: kaboom: this task fails on purpose (42)" in error, error
    assert "noop_tasks.py" in error and "Traceback" in error, error
    assert tasks["after"]["state"] == "upstream_failed"


# -- executors ----------------------------------------------------------------------------------------


def diamond(dag_id: str) -> dict[str, Any]:
    """a -> (b, c) -> d; b and d are Python tasks, d reads b's value."""
    return {
        "dag_id": dag_id,
        "tasks": [
            {"task_id": "a", "shell": {"command": "echo a; sleep 0.3"}},
            {
                "task_id": "b",
                "upstream": ["a"],
                "python": {"target": f"{TASKS}:produce"},
                "params": {"base": 5},
            },
            {"task_id": "c", "upstream": ["a"], "shell": {"command": "echo c; sleep 0.5"}},
            {"task_id": "d", "upstream": ["b", "c"], "python": {"target": f"{TASKS}:consume"}},
        ],
    }


@pytest.fixture
def local_cluster(fresh_database_url: str, tmp_path: Path) -> Iterator[Callable[[str], Cluster]]:
    """``make(kind)``: a cluster whose scheduler runs the tasks itself (``SCHEDD_EXECUTOR=kind``), with
    no registry and no worker, on an etcd of its own (the module's cluster keeps leading on the
    shared one). The etcd is stopped after the cluster."""
    clusters: list[Cluster] = []
    etcds: list[tuple[LocalEtcd, Path]] = []

    def make(kind: str) -> Cluster:
        etcd = LocalEtcd()
        base_dir = make_base_dir("schedd-test-etcd-")
        etcds.append((etcd, base_dir))
        etcd.start(base_dir, durable=False)
        cluster = Cluster(
            fresh_database_url,
            etcd.endpoint,
            tmp_path / f"logs-{kind}",
            registries=0,
            workers=0,
            scheduler_env={"SCHEDD_EXECUTOR": kind},
            cwd=REPO_ROOT,
        )
        clusters.append(cluster)
        cluster.start()
        return cluster

    try:
        yield make
    finally:
        for cluster in clusters:
            cluster.stop()
            cluster.release_election()
        for etcd, base_dir in etcds:
            etcd.stop()
            shutil.rmtree(base_dir, ignore_errors=True)


@pytest.mark.parametrize("executor", ["distributed", "local", "sequential"])
def test_the_diamond_completes_with_each_executor(
    executor: str,
    delivery_cluster: RunningCluster,
    local_cluster: Callable[[str], Cluster],
    tmp_path: Path,
) -> None:
    cluster = delivery_cluster.cluster if executor == "distributed" else local_cluster(executor)
    if executor != "distributed":
        assert cluster.registries == {} and cluster.workers == {}
    dag_id = f"diamond_{executor}"
    register(cluster.api_address, tmp_path, diamond(dag_id))
    began = time.monotonic()
    result = trigger_and_wait(cluster.api_address, dag_id, "r1")
    elapsed = time.monotonic() - began
    assert result.returncode == 0, (
        result.stdout
        + result.stderr
        + "\n"
        + "\n".join(p.describe_failure("log") for p in cluster.processes if p.name.startswith("scheduler"))
    )

    rows = task_rows(cluster.fetch, dag_id, "r1")
    assert {t: r["state"] for t, r in rows.items()} == dict.fromkeys("abcd", "success")
    assert rows["d"]["result"] == {"upstream": {"b": {"doubled": 10, "items": [5, 6], "from": "b"}}}
    attempts = cluster.fetch(ATTEMPTS, dag_id, "r1")
    assert sorted(a["task_id"] for a in attempts) == list("abcd"), attempts
    assert all(a["state"] == "success" and a["try_number"] == 1 for a in attempts), attempts
    workers = {a["worker_id"] for a in attempts}
    if executor == "distributed":
        assert workers <= set(cluster.workers), workers
    else:
        assert workers == {f"local.{next(iter(cluster.schedulers))}"}, workers
    by_task = {a["task_id"]: a for a in attempts}
    assert by_task["a"]["ended_at"] <= min(by_task["b"]["started_at"], by_task["c"]["started_at"])
    assert max(by_task["b"]["ended_at"], by_task["c"]["ended_at"]) <= by_task["d"]["started_at"]
    overlapped = by_task["b"]["started_at"] < by_task["c"]["ended_at"] and (
        by_task["c"]["started_at"] < by_task["b"]["ended_at"]
    )
    if executor == "sequential":
        for earlier, later in itertools.pairwise(attempts):
            assert earlier["ended_at"] <= later["started_at"], f"attempts overlap: {earlier} / {later}"
    print(f"\n{executor} executor: diamond in {elapsed:.2f}s (b and c overlapped: {overlapped})")
