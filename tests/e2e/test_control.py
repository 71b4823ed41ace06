"""Manual control through ``schedctl`` against the real services: pause and unpause, cancel, clear, mark,
explain (table and ``-o json``), and bad input rejected by schedctl (exit 2, the field named) and by the
gRPC api (its status code).

Outcomes are read back from PostgreSQL. The cluster is this module's own (see ``test_semantics``).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import json_format

from schedd.v1 import api_pb2, api_pb2_grpc, resources_pb2 as pb
from tests.e2e.test_semantics import NEVER, Env, gated, pid_alive, semantics_env, sh

pytestmark = pytest.mark.e2e

EXIT_REJECTED = 2
EXIT_NOT_FOUND = 3
RPC_TIMEOUT = 30.0


@pytest.fixture(scope="module")
def env(database_url: str, etcd_endpoints: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    with semantics_env(database_url, etcd_endpoints, tmp_path_factory) as e:
        yield e


@dataclass
class Api:
    dags: Any
    runs: Any


@pytest.fixture(scope="module")
def api(env: Env) -> Iterator[Api]:
    with grpc.insecure_channel(env.cluster.api_address) as channel:
        yield Api(api_pb2_grpc.DagServiceStub(channel), api_pb2_grpc.RunServiceStub(channel))


def explain(env: Env, run: str, task_id: str) -> tuple[str, list[str]]:
    """``schedctl -o json explain``: (state, reasons); also checks the table form says the same."""
    out = env.ok_json("explain", run, task_id)
    state, reasons = out["state"], out.get("reasons", [])
    table = env.ok("explain", run, task_id)
    assert table.splitlines()[0] == f"{task_id}: {state.removeprefix('TASK_STATE_').lower()}", table
    countdown = re.compile(r"in \d+\.\ds")  # a retry's countdown moves between the two calls
    for reason in reasons:
        assert countdown.sub("in Ns", f"  - {reason}") in countdown.sub("in Ns", table), table
    return state, reasons


def rejected(env: Env, *args: str, code: int = EXIT_REJECTED) -> str:
    """Run schedctl, expecting exit ``code`` (2: rejected) and a one-line error; returns the error text."""
    result = env.ctl(*args)
    assert result.returncode == code, (
        f"exit {result.returncode}, expected {code}:\n{result.stdout}{result.stderr}"
    )
    assert "Traceback" not in result.stderr, result.stderr
    return result.stderr


def rpc_error(call: Any, request: Any) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as info:
        call(request, timeout=RPC_TIMEOUT)
    return info.value


# --- pause ------------------------------------------------------------------------------------------


def test_pause_stops_new_tasks_and_unpause_resumes(env: Env) -> None:
    gate = env.work / "pause.gate"
    env.register(
        {
            "dag_id": "ctl_pause",
            "tasks": [sh("a", gated(gate)), sh("b", "true", "a"), sh("c", "true", "b")],
        }
    )
    env.trigger("ctl_pause", "r1")
    env.wait_state("ctl_pause", "r1", "a", "running")
    assert env.ok_json("dags", "pause", "ctl_pause")["paused"] is True
    assert "dag ctl_pause paused" in env.ok("dags", "pause", "ctl_pause")  # idempotent
    env.trigger("ctl_pause", "r2")
    gate.touch()

    # The running task finishes; nothing new is scheduled for either run.
    env.wait_state("ctl_pause", "r1", "a", "success")
    env.barrier()
    assert env.states("ctl_pause", "r1") == {"a": "success", "b": "none", "c": "none"}
    assert env.run("ctl_pause", "r1")["state"] == "running"
    assert env.run("ctl_pause", "r2")["state"] == "queued"
    assert env.attempts("ctl_pause", "r2") == []
    state, reasons = explain(env, "ctl_pause/r1", "b")
    assert state == "none"
    assert reasons == ["its DAG is paused"]

    before_unpause = env.cluster.fetchval("SELECT now()")
    assert env.ok_json("dags", "unpause", "ctl_pause").get("paused", False) is False
    for run_id in ("r1", "r2"):
        assert env.wait_run("ctl_pause", run_id)["state"] == "success"
    b = {a["task_id"]: a for a in env.attempts("ctl_pause", "r1")}["b"]
    assert b["claimed_at"] >= before_unpause


# --- cancel -----------------------------------------------------------------------------------------


def test_cancel_stops_a_running_run(env: Env) -> None:
    pid_file = env.work / "cancel.pid"
    env.register(
        {
            "dag_id": "ctl_cancel",
            "tasks": [sh("slow", f"echo $$ > {pid_file}; exec sleep 30"), sh("after", "true", "slow")],
        }
    )
    env.trigger("ctl_cancel", "r1")
    env.wait_for("the slow task's pid", lambda: pid_file.exists() and pid_file.read_text().strip())
    pid = int(pid_file.read_text())
    env.wait_state("ctl_cancel", "r1", "slow", "running")

    run = env.ok_json("runs", "cancel", "ctl_cancel/r1")
    assert run["state"] == "failed"
    assert {t["task_id"]: t["state"] for t in run["task_instances"]} == {
        "slow": "failed",
        "after": "skipped",
    }
    tis = env.tis("ctl_cancel", "r1")
    assert tis["slow"]["error"] == "the run was cancelled"
    (attempt,) = env.attempts("ctl_cancel", "r1", "slow")
    assert attempt["state"] == "failed"
    env.wait_for(f"the cancelled task's process {pid} to end", lambda: not pid_alive(pid))

    err = rejected(env, "runs", "cancel", "ctl_cancel/r1")
    assert "FAILED_PRECONDITION" in err and "already failed" in err
    env.barrier()  # the scheduler, told about the run, leaves it failed
    assert env.run("ctl_cancel", "r1")["state"] == "failed"
    assert env.states("ctl_cancel", "r1") == {"slow": "failed", "after": "skipped"}


# --- clear ------------------------------------------------------------------------------------------


def _clear_dag(env: Env) -> None:
    env.register_once(
        {
            "dag_id": "ctl_clear",
            "param_schemas": {"marker": {"type": "string", "required": True}},
            "tasks": [
                {"task_id": "flaky", "python": {"target": "tests.e2e.semantics_tasks:fail_once"}},
                sh("after", "true", "flaky"),
                sh("other", "true"),
            ],
        }
    )


def _tries(env: Env, run_id: str) -> dict[str, list[str]]:
    result: dict[str, list[str]] = {}
    for a in env.attempts("ctl_clear", run_id):
        result.setdefault(a["task_id"], []).append(a["state"])
    return result


def test_clear_a_failed_task_with_its_downstream_reruns_them(env: Env) -> None:
    _clear_dag(env)
    env.trigger("ctl_clear", "r1", {"marker": str(env.work / "clear-r1")})
    assert env.wait_run("ctl_clear", "r1")["state"] == "failed"
    assert env.states("ctl_clear", "r1") == {
        "flaky": "failed",
        "after": "upstream_failed",
        "other": "success",
    }

    cleared = env.ok_json("tasks", "clear", "ctl_clear/r1", "flaky", "--downstream")
    assert cleared["cleared_task_ids"] == ["after", "flaky"]
    assert env.wait_run("ctl_clear", "r1")["state"] == "success"
    tis = env.tis("ctl_clear", "r1")
    assert {t: r["state"] for t, r in tis.items()} == {
        "flaky": "success",
        "after": "success",
        "other": "success",
    }
    assert (tis["flaky"]["try_number"], tis["flaky"]["max_tries"]) == (2, 2), "a clear restores the retries"
    assert _tries(env, "r1") == {"flaky": ["failed", "success"], "after": ["success"], "other": ["success"]}

    # --upstream from the leaf: both run again (the marker exists now, so flaky succeeds).
    out = env.ok("tasks", "clear", "ctl_clear/r1", "after", "--upstream")
    assert "cleared: after, flaky" in out
    assert env.wait_run("ctl_clear", "r1")["state"] == "success"
    assert _tries(env, "r1") == {
        "flaky": ["failed", "success", "success"],
        "after": ["success", "success"],
        "other": ["success"],
    }


def test_clear_only_failed_leaves_the_successful_tasks_alone(env: Env) -> None:
    _clear_dag(env)
    env.trigger("ctl_clear", "r2", {"marker": str(env.work / "clear-r2")})
    assert env.wait_run("ctl_clear", "r2")["state"] == "failed"
    assert env.ok_json("tasks", "clear", "ctl_clear/r2", "--only-failed")["cleared_task_ids"] == [
        "after",
        "flaky",
    ]
    assert env.wait_run("ctl_clear", "r2")["state"] == "success"
    assert _tries(env, "r2") == {"flaky": ["failed", "success"], "after": ["success"], "other": ["success"]}
    # Nothing failed any more: clearing only failed tasks clears nothing and leaves the run finished.
    assert "cleared: nothing" in env.ok("tasks", "clear", "ctl_clear/r2", "--only-failed")
    assert env.run("ctl_clear", "r2")["state"] == "success"


# --- mark -------------------------------------------------------------------------------------------


def test_explain_retry_time_then_mark_success_runs_the_downstream(env: Env) -> None:
    env.register(
        {
            "dag_id": "ctl_retry",
            "tasks": [sh("flaky", "exit 1", retries=1, retry_delay="3600s"), sh("after", "true", "flaky")],
        }
    )
    env.trigger("ctl_retry", "r1")
    env.wait_for(
        "flaky to wait for its retry",
        lambda: (
            (row := env.tis("ctl_retry", "r1").get("flaky")) is not None
            and row["state"] == "up_for_retry"
            and row["next_retry_at"] is not None
        ),
    )
    state, reasons = explain(env, "ctl_retry/r1", "flaky")
    assert state == "up_for_retry"
    match = re.fullmatch(r"try 1 of 2 failed; it retries in (\d+\.\d)s \((.+)\)", reasons[0])
    assert match, reasons
    assert 3000 < float(match.group(1)) <= 3600
    state, reasons = explain(env, "ctl_retry/r1", "after")
    assert (state, reasons) == (
        "none",
        ["trigger rule all_success is not met yet; waiting for upstream flaky (up_for_retry)"],
    )

    marked = env.ok_json("tasks", "mark-success", "ctl_retry/r1", "flaky")
    assert marked["state"] == "success"
    assert env.wait_run("ctl_retry", "r1")["state"] == "success"
    assert env.states("ctl_retry", "r1") == {"flaky": "success", "after": "success"}
    assert [a["try_number"] for a in env.attempts("ctl_retry", "r1", "flaky")] == [1]


def test_mark_success_of_a_failed_task_runs_its_downstream(env: Env) -> None:
    env.register({"dag_id": "ctl_mark", "tasks": [sh("bad", "exit 1"), sh("after", "true", "bad")]})
    env.trigger("ctl_mark", "r1")
    assert env.wait_run("ctl_mark", "r1")["state"] == "failed"
    assert env.states("ctl_mark", "r1") == {"bad": "failed", "after": "upstream_failed"}
    env.ok("tasks", "mark-success", "ctl_mark/r1", "bad")
    run = env.wait_run("ctl_mark", "r1")  # reopened by the mark; finished again by the scheduler
    assert env.states("ctl_mark", "r1") == {"bad": "success", "after": "success"}
    assert run["state"] == "success"


def test_mark_failed_stops_a_running_task_and_fails_the_run(env: Env) -> None:
    pid_file = env.work / "markfail.pid"
    env.register(
        {
            "dag_id": "ctl_markfail",
            "tasks": [
                sh("slow", f"echo $$ > {pid_file}; exec sleep 30", retries=3, retry_delay="1s"),
                sh("after", "true", "slow"),
            ],
        }
    )
    env.trigger("ctl_markfail", "r1")
    env.wait_for("the slow task's pid", lambda: pid_file.exists() and pid_file.read_text().strip())
    pid = int(pid_file.read_text())
    env.wait_state("ctl_markfail", "r1", "slow", "running")
    out = env.ok("tasks", "mark-failed", "ctl_markfail/r1", "slow")
    assert "dags/ctl_markfail/runs/r1/tasks/slow: failed" in out
    # Marked failed by hand: no retry, whatever its retries.
    assert env.wait_run("ctl_markfail", "r1")["state"] == "failed"
    tis = env.tis("ctl_markfail", "r1")
    assert (tis["slow"]["state"], tis["after"]["state"]) == ("failed", "upstream_failed")
    assert tis["slow"]["error"] == "marked failed by hand"
    env.wait_for(f"the marked task's process {pid} to end", lambda: not pid_alive(pid))
    assert [a["state"] for a in env.attempts("ctl_markfail", "r1", "slow")] == ["failed"]


# --- explain ----------------------------------------------------------------------------------------


def test_explain_waiting_on_upstream_and_on_a_full_pool(env: Env) -> None:
    env.pool("ctl_one", 1)
    env.register(
        {
            "dag_id": "ctl_explain",
            "tasks": [
                sh("a", "sleep 30"),
                sh("b", "true", "a"),
                sh("x", "sleep 30", pool="ctl_one"),
                sh("y", "sleep 30", pool="ctl_one"),
            ],
        }
    )
    env.trigger("ctl_explain", "r1")
    env.wait_state("ctl_explain", "r1", "a", "running")

    def split() -> dict[str, str] | None:
        s = env.states("ctl_explain", "r1")
        return s if sorted([s["x"], s["y"]]) == ["running", "scheduled"] else None

    states = env.wait_for("one of x, y to run and the other to wait", split)
    running, waiting = ("x", "y") if states["x"] == "running" else ("y", "x")

    assert explain(env, "ctl_explain/r1", "b") == (
        "none",
        ["trigger rule all_success is not met yet; waiting for upstream a (running)"],
    )
    assert explain(env, "ctl_explain/r1", waiting) == (
        "scheduled",
        ["pool 'ctl_one' is full: 1 of 1 slots taken, it needs 1"],
    )
    assert explain(env, "ctl_explain/r1", running) == ("running", ["it is running"])

    env.ok("runs", "cancel", "ctl_explain/r1")
    state, reasons = explain(env, "ctl_explain/r1", "b")
    assert state == "skipped"
    assert reasons == ["it is finished (skipped); clear it to run it again"]


def test_explain_a_run_waiting_for_max_active_runs(env: Env) -> None:
    env.register({"dag_id": "ctl_mar", "max_active_runs": 1, "tasks": [sh("t", "sleep 30")]})
    env.trigger("ctl_mar", "r1")
    env.trigger("ctl_mar", "r2")
    try:
        env.wait_state("ctl_mar", "r1", "t", "running")
        env.barrier()  # r2's notification has been handled: it stays queued
        assert env.run("ctl_mar", "r2")["state"] == "queued"
        state, reasons = explain(env, "ctl_mar/r2", "t")
        assert state == "none"
        assert any("max_active_runs=1" in r for r in reasons), reasons
    finally:
        for run_id in ("r1", "r2"):
            if env.run("ctl_mar", run_id)["state"] not in ("success", "failed"):
                env.ok("runs", "cancel", f"ctl_mar/{run_id}")


def test_cancelling_the_active_run_lets_the_queued_run_start(env: Env) -> None:
    env.register({"dag_id": "ctl_mar_cancel", "max_active_runs": 1, "tasks": [sh("t", "sleep 30")]})
    env.trigger("ctl_mar_cancel", "r1")
    env.trigger("ctl_mar_cancel", "r2")
    env.wait_state("ctl_mar_cancel", "r1", "t", "running")
    assert env.run("ctl_mar_cancel", "r2")["state"] == "queued"
    env.ok("runs", "cancel", "ctl_mar_cancel/r1")
    try:
        env.wait_state("ctl_mar_cancel", "r2", "t", "running", timeout=NEVER)
    finally:
        env.ok("runs", "cancel", "ctl_mar_cancel/r2")


# --- bad input --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BadOption:
    options: dict[str, Any]
    field: str
    problem: str


BAD_OPTIONS = {
    "negative retries": BadOption({"retries": -1}, "spec.tasks[0].retries", "must not be negative"),
    "negative retry_delay": BadOption(
        {"retry_delay": "-1s"}, "spec.tasks[0].retry_delay", "must not be negative"
    ),
    "zero execution_timeout": BadOption(
        {"execution_timeout": "0s"}, "spec.tasks[0].execution_timeout", "must be positive"
    ),
    "unknown pool": BadOption({"pool": "no_such_pool"}, "spec.tasks[0].pool", "unknown pool 'no_such_pool'"),
    "branch on a shell task": BadOption(
        {"branch": True}, "spec.tasks[0].branch", "a branch task must be a Python task"
    ),
    "negative max_active_instances": BadOption(
        {"max_active_instances": -2}, "spec.tasks[0].max_active_instances", "must not be negative"
    ),
    "negative pool_slots": BadOption({"pool_slots": -1}, "spec.tasks[0].pool_slots", "must not be negative"),
}


def _bad_spec(dag_id: str, bad: BadOption) -> dict[str, Any]:
    return {"dag_id": dag_id, "tasks": [sh("a", "true", **bad.options), sh("b", "true", "a")]}


@pytest.mark.parametrize("case", list(BAD_OPTIONS), ids=list(BAD_OPTIONS))
def test_bad_task_option_is_rejected_by_schedctl_and_the_api(
    env: Env, api: Api, tmp_path: Path, case: str
) -> None:
    bad = BAD_OPTIONS[case]
    dag_id = "ctl_bad_" + re.sub(r"\W", "_", case)
    spec = _bad_spec(dag_id, bad)
    path = tmp_path / "bad.json"
    path.write_text(json_format.MessageToJson(json_format.ParseDict(spec, pb.DagSpec())))
    err = rejected(env, "dags", "register", str(path))
    assert f"INVALID_ARGUMENT: {bad.field}: " in err, err
    assert bad.problem in err, err

    request = api_pb2.RegisterDagRequest(
        spec=json_format.ParseDict(spec, pb.DagSpec()), request_id=str(uuid.uuid4())
    )
    error = rpc_error(api.dags.RegisterDag, request)
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, error
    assert error.details().startswith(f"{bad.field}: "), error.details()
    assert bad.problem in error.details()
    assert env.cluster.fetch("SELECT dag_id FROM dags WHERE dag_id = $1", dag_id) == []


@pytest.fixture(scope="module")
def base_run(env: Env) -> str:
    """A finished run of a two-task DAG: ``ctl_base/r1``."""
    env.register({"dag_id": "ctl_base", "tasks": [sh("a", "true"), sh("b", "true", "a")]})
    env.trigger("ctl_base", "r1")
    assert env.wait_run("ctl_base", "r1")["state"] == "success"
    return "ctl_base/r1"


def _untouched(env: Env) -> Any:
    return (
        env.run("ctl_base", "r1"),
        env.cluster.fetch(
            "SELECT ti.task_id, ti.state, ti.try_number, ti.ended_at FROM task_instances ti "
            "JOIN dag_runs r ON r.id = ti.run_pk WHERE r.dag_id = 'ctl_base' ORDER BY ti.task_id"
        ),
    )


def test_clear_of_an_unknown_task_is_rejected(env: Env, api: Api, base_run: str) -> None:
    before = _untouched(env)
    err = rejected(env, "tasks", "clear", base_run, "ghost", "--downstream")
    assert "INVALID_ARGUMENT: task_ids[0]: dag 'ctl_base' has no task 'ghost'" in err, err
    request = api_pb2.ClearTaskInstancesRequest(parent="dags/ctl_base/runs/r1", task_ids=["a", "ghost"])
    error = rpc_error(api.runs.ClearTaskInstances, request)
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, error
    assert error.details() == "task_ids[1]: dag 'ctl_base' has no task 'ghost'"
    assert _untouched(env) == before, "a rejected clear must change nothing (not even task 'a')"


def test_mark_with_a_bad_state_is_rejected(env: Env, api: Api, base_run: str) -> None:
    before = _untouched(env)
    for state in (pb.TASK_STATE_RUNNING, pb.TASK_STATE_SKIPPED, pb.TASK_STATE_UNSPECIFIED):
        request = api_pb2.SetTaskInstanceStateRequest(name="dags/ctl_base/runs/r1/tasks/a", state=state)
        error = rpc_error(api.runs.SetTaskInstanceState, request)
        assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, (state, error)
        assert error.details().startswith("state: must be TASK_STATE_SUCCESS or TASK_STATE_FAILED")
    # schedctl only has mark-success and mark-failed: anything else is a usage error (exit 2).
    err = rejected(env, "tasks", "mark-running", base_run, "a")
    assert "No such command" in err, err
    # A task the DAG does not have.
    err = rejected(env, "tasks", "mark-success", base_run, "ghost", code=EXIT_NOT_FOUND)
    assert "NOT_FOUND" in err and "'ghost'" in err, err
    assert _untouched(env) == before


def test_explain_of_an_unknown_run_is_not_found(env: Env, api: Api, base_run: str) -> None:
    err = rejected(env, "explain", "ctl_base/never", "a", code=EXIT_NOT_FOUND)
    assert "NOT_FOUND" in err and "'never'" in err, err
    error = rpc_error(
        api.runs.ExplainTaskInstance,
        api_pb2.ExplainTaskInstanceRequest(name="dags/ctl_base/runs/never/tasks/a"),
    )
    assert error.code() == grpc.StatusCode.NOT_FOUND, error


def test_explain_of_an_unknown_task_is_not_found(env: Env, api: Api, base_run: str) -> None:
    error = rpc_error(
        api.runs.ExplainTaskInstance,
        api_pb2.ExplainTaskInstanceRequest(name="dags/ctl_base/runs/r1/tasks/ghost"),
    )
    assert error.code() == grpc.StatusCode.NOT_FOUND, error
    assert "'ghost'" in error.details()
    err = rejected(env, "explain", base_run, "ghost", code=EXIT_NOT_FOUND)
    assert "NOT_FOUND" in err, err
