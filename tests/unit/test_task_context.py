"""The task context: parsed from an attempt's environment, passed by name to the task functions that
declare it, and returned by ``get_current_context()`` -- in real warm-pool children."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from schedd.v1 import resources_pb2 as pb
from schedd_core.arguments import ARGUMENTS_ENV
from schedd_core.task_context import (
    CONF_ENV,
    CONTEXT_NAMES,
    NoTaskContext,
    RunningTask,
    TaskContext,
    get_current_context,
)
from schedd_exec.assignments import attempt_env
from schedd_exec.python_pool import PythonPool

T = "tests.unit.context_tasks:"

#: What a registry sends for try 2 of a backfill run's task with a conf.
BACKFILL = {
    "SCHEDD_DAG_ID": "d",
    "SCHEDD_RUN_ID": "backfill__2025-03-04T00.00.00Z",
    "SCHEDD_RUN_TYPE": "backfill",
    "SCHEDD_TASK_ID": "t",
    "SCHEDD_TRY_NUMBER": "2",
    "SCHEDD_ATTEMPT_ID": "a-2",
    "SCHEDD_LOGICAL_DATE": "2025-03-04T00:00:00+00:00",
    "SCHEDD_DATA_INTERVAL_START": "2025-03-04T00:00:00+00:00",
    "SCHEDD_DATA_INTERVAL_END": "2025-03-05T00:00:00+00:00",
    "SCHEDD_IDEMPOTENCY_KEY": "d/backfill__2025-03-04T00.00.00Z/t",
    CONF_ENV: '{"region":"eu"}',
}
#: A manual run's: no data interval, no conf, a logical date with microseconds.
MANUAL = {
    **{k: v for k, v in BACKFILL.items() if "INTERVAL" not in k and k != CONF_ENV},
    "SCHEDD_RUN_ID": "manual__x",
    "SCHEDD_RUN_TYPE": "manual",
    "SCHEDD_TRY_NUMBER": "1",
    "SCHEDD_LOGICAL_DATE": "2025-03-04T05:06:07.000008+00:00",
}


@pytest.fixture(scope="module")
async def pool() -> AsyncIterator[PythonPool]:
    async with PythonPool(1, kill_grace=0.5) as p:
        yield p


async def result(pool: PythonPool, name: str, env: dict[str, str], **params: Any) -> Any:
    out = await pool.run(T + name, env=env, timeout=10, params=params or None)
    assert out.succeeded, out.error
    return json.loads(out.result_json)


# --- the values, from the environment ----------------------------------------------------------------


def test_a_backfill_attempts_context_has_airflows_names_and_types() -> None:
    task = RunningTask.from_environment(BACKFILL, {"rows": 3})
    assert task is not None
    context = task.context()
    assert list(context) == list(CONTEXT_NAMES) == list(TaskContext.__annotations__)
    day = datetime(2025, 3, 4, tzinfo=UTC)
    assert context["logical_date"] == day and context["logical_date"].tzinfo is not None
    assert (context["ds"], context["ds_nodash"]) == ("2025-03-04", "20250304")
    assert (context["ts"], context["ts_nodash"]) == ("2025-03-04T00:00:00+00:00", "20250304T000000")
    assert (context["data_interval_start"], context["data_interval_end"]) == (day, day + timedelta(days=1))
    assert (context["map_index"], context["try_number"], context["params"]) == (-1, 2, {"rows": 3})
    ti = context["ti"]
    assert (ti.dag_id, ti.task_id, ti.run_id, ti.try_number, ti.map_index, ti.attempt_id) == (
        "d",
        "t",
        "backfill__2025-03-04T00.00.00Z",
        2,
        -1,
        "a-2",
    )
    assert ti.idempotency_key == "d/backfill__2025-03-04T00.00.00Z/t"
    run = context["dag_run"]
    assert (run.run_type, run.logical_date, run.data_interval_end) == ("backfill", day, day + timedelta(1))
    assert run.conf == {"region": "eu"}


def test_a_manual_run_has_no_data_interval_and_an_empty_conf() -> None:
    task = RunningTask.from_environment({**MANUAL, "SCHEDD_MAP_INDEX": "4"}, {})
    assert task is not None
    context = task.context()
    assert context["data_interval_start"] is None and context["data_interval_end"] is None
    assert context["dag_run"].conf == {} and context["dag_run"].data_interval_start is None
    assert context["ts"] == "2025-03-04T05:06:07.000008+00:00" and context["ts_nodash"] == "20250304T050607"
    assert context["map_index"] == 4 == context["ti"].map_index


def test_a_logical_date_with_an_offset_is_given_in_utc() -> None:
    task = RunningTask.from_environment({**MANUAL, "SCHEDD_LOGICAL_DATE": "2025-03-04T01:00:00+02:00"}, {})
    assert task is not None
    assert task.value("ds") == "2025-03-03" and task.value("ts") == "2025-03-03T23:00:00+00:00"


def test_an_environment_without_an_attempts_variables_has_no_context() -> None:
    assert RunningTask.from_environment({}, {}) is None
    partial = {k: v for k, v in BACKFILL.items() if k != "SCHEDD_ATTEMPT_ID"}
    assert RunningTask.from_environment(partial, {}) is None
    with pytest.raises(NoTaskContext, match="outside a running task"):
        get_current_context()


def test_the_registry_puts_the_conf_and_the_interval_in_the_attempts_environment() -> None:
    day = datetime(2025, 3, 4, tzinfo=UTC)
    common: dict[str, Any] = {
        "dag_id": "d",
        "run_id": "r",
        "run_type": "backfill",
        "try_number": 2,
        "attempt_id": "a",
        "logical_date": day,
        "idempotency_key": "d/r/t",
    }
    task = pb.TaskSpec(task_id="t", env={"OWN": "x"}, python=pb.PythonCallable(target="m:f"))
    env = attempt_env(task, data_interval=(day, day + timedelta(days=1)), conf={"n": 1}, **common)
    assert env["OWN"] == "x" and json.loads(env[CONF_ENV]) == {"n": 1}
    running = RunningTask.from_environment(env, {})
    assert running is not None and running.value("dag_run").conf == {"n": 1}
    assert running.value("data_interval_end") == day + timedelta(days=1)
    bare = attempt_env(task, data_interval=None, conf={}, **common)
    assert CONF_ENV not in bare and "SCHEDD_DATA_INTERVAL_START" not in bare
    shell = pb.TaskSpec(task_id="t", shell=pb.ShellCommand(command="true"))  # its params: SCHEDD_PARAMS
    assert CONF_ENV not in attempt_env(shell, data_interval=None, conf={"n": 1}, **common)


# --- passed to task functions in a real child ----------------------------------------------------------


async def test_a_task_function_gets_the_context_names_it_declares(pool: PythonPool) -> None:
    got = await result(pool, "airflow_style", BACKFILL, rows=3)
    assert got["ds"] == "2025-03-04"
    assert got["logical_date"] == "2025-03-04T00:00:00+00:00"
    assert got["data_interval_end"] == "2025-03-05T00:00:00+00:00"
    assert got["ti"]["try_number"] == 2 and got["ti"]["attempt_id"] == "a-2"
    assert got["dag_run"]["conf"] == {"region": "eu"} and got["dag_run"]["run_type"] == "backfill"
    assert got["params"] == {"rows": 3}
    manual = await result(pool, "airflow_style", MANUAL)
    assert manual["data_interval_start"] is None and manual["dag_run"]["conf"] == {}


async def test_kwargs_gets_every_name(pool: PythonPool) -> None:
    got = await result(pool, "everything", BACKFILL)
    assert set(got) == {*CONTEXT_NAMES, "context"}
    assert got["context"]["SCHEDD_RUN_TYPE"] == "backfill"  # the SCHEDD_* variables, as before
    assert got["ts_nodash"] == "20250304T000000"


async def test_get_current_context_works_in_the_task_its_threads_and_async_tasks(pool: PythonPool) -> None:
    got = await result(pool, "from_anywhere", BACKFILL)
    assert got == {"ds_nodash": "20250304", "try_number": 2, "thread": "20250304T000000"}
    awaited = await result(pool, "asynchronous", BACKFILL)
    assert awaited == {"ts": "2025-03-04T00:00:00+00:00", "current": "2025-03-04T00:00:00+00:00"}
    # the same child, afterwards, in a call that is no task attempt (as a callback is)
    assert (await result(pool, "outside", {})).startswith("NoTaskContext: get_current_context() was called")


async def test_call_arguments_come_first_and_only_missing_names_are_filled(pool: PythonPool) -> None:
    positional = {**BACKFILL, ARGUMENTS_ENV: json.dumps({"args": [{"literal": [1, 2]}]})}
    assert await result(pool, "args_first", positional) == {
        "rows": [1, 2],
        "ds": "2025-03-04",
        "map_index": -1,
    }
    given = {
        **BACKFILL,
        ARGUMENTS_ENV: json.dumps(
            {"args": [{"literal": []}], "kwargs": {"ds": {"literal": "mine"}, "map_index": {"literal": 1}}}
        ),
    }
    assert await result(pool, "args_first", given) == {"rows": [], "ds": "mine", "map_index": 1}


async def test_a_parameter_nothing_gives_fails_the_attempt_naming_it(pool: PythonPool) -> None:
    out = await pool.run(T + "misspelt", env=BACKFILL, timeout=10)
    assert not out.succeeded and not out.retryable
    assert "misspelt() has the parameter 'dss', which nothing gives" in out.error
    assert "not a name of the task context (params, context, dag_id, task_id, run_id, logical_date, ds" in (
        out.error
    )
    required = await pool.run(T + "args_first", env=BACKFILL, timeout=10)
    assert not required.succeeded and "the parameter 'rows'" in required.error
    callback = await pool.run(T + "misspelt", env={}, timeout=10)
    assert "the parameter 'ds'" in callback.error
    assert "not a task attempt, so it gets no task context (only params, context)" in callback.error
