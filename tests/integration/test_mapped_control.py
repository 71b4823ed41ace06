"""A mapped task's instances through the api's reads and manual control, against the real store: each
instance is named ``task_id[i]``; a plain task id clears every instance; a mapped task's plain id
names nothing once it is expanded; malformed keys are INVALID_ARGUMENT naming the field.

The rows are made as the scheduler makes them (the placeholder replaced by instances 0..2), by SQL.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from google.protobuf import struct_pb2

from schedd.v1 import api_pb2, resources_pb2 as pb
from schedd_api.servicer import RunServicer
from schedd_core.clock import SystemClock
from schedd_core.errors import InvalidArgument, NotFound
from schedd_core.spec import validate_spec
from schedd_core.states import TaskState
from schedd_store import control, explaining, logs, runs
from schedd_store.database import Engine
from schedd_store.instance_lookup import NotStartedYet
from schedd_store.named_sql import Statement
from tests.polling import wait_until_async

from .helpers import registered_run

pytestmark = pytest.mark.integration

RUN = "dags/fan/runs/r1"


def _fan_spec() -> pb.DagSpec:
    """src -> process (mapped over x = [1, 2, 3]) -> done."""
    values = struct_pb2.Value(
        list_value=struct_pb2.ListValue(values=[struct_pb2.Value(number_value=n) for n in (1, 2, 3)])
    )
    spec = pb.DagSpec(
        dag_id="fan",
        tasks=[
            pb.TaskSpec(task_id="src", python=pb.PythonCallable(target="work:src")),
            pb.TaskSpec(
                task_id="process",
                upstream=["src"],
                python=pb.PythonCallable(target="work:process"),
                mapping=pb.TaskMapping(
                    expand=[pb.MappedArgument(name="x", values=pb.Argument(literal=values))]
                ),
            ),
            pb.TaskSpec(task_id="done", upstream=["process"], shell=pb.ShellCommand(command="true")),
        ],
    )
    validate_spec(spec)
    return spec


async def _sql(engine: Engine, statement: str, **params: Any) -> list[Any]:
    async with engine.begin() as conn:
        result = await conn.execute(Statement(statement), params)
        return result.all()


async def _instance(
    engine: Engine,
    run_pk: int,
    task_id: str,
    map_index: int,
    state: str,
    *,
    out: str = "",
    result: str | None = None,
) -> None:
    """One task instance; with ``out``, a finished first attempt that printed it."""
    tried = bool(out)
    [row] = await _sql(
        engine,
        "INSERT INTO task_instances (run_pk, dag_id, logical_date, task_id, map_index, state, try_number, "
        "attempt_id, ended_at, result) SELECT r.id, r.dag_id, r.logical_date, :task_id, :map_index, :state, "
        ":tries, CASE WHEN :tried THEN gen_random_uuid() END, CASE WHEN :tried THEN now() END, "
        "CAST(:result AS jsonb) FROM dag_runs r WHERE r.id = :run_pk RETURNING id, attempt_id",
        run_pk=run_pk,
        task_id=task_id,
        map_index=map_index,
        state=state,
        tries=1 if tried else 0,
        tried=tried,
        result=result,
    )
    if tried:
        await _sql(
            engine,
            "INSERT INTO task_attempts (attempt_id, ti_id, try_number, worker_id, state) "
            "VALUES (:attempt, :ti, 1, 'w', :state)",
            attempt=row.attempt_id,
            ti=row.id,
            state="success" if state == "success" else "failed",
        )
        await _sql(
            engine,
            "INSERT INTO task_logs (ti_id, try_number, attempt_id, byte_offset, data) "
            "VALUES (:ti, 1, :attempt, 0, :out)",
            ti=row.id,
            attempt=row.attempt_id,
            out=out,
        )


@pytest.fixture
async def expanded(engine: Engine) -> int:
    """Run r1 of ``fan``: src succeeded, process expanded into 3 instances (1 failed), done
    upstream_failed; the run failed."""
    run = await registered_run(engine, _fan_spec())
    await _instance(engine, run.pk, "src", -1, "success", out="listed\n", result="[1, 2, 3]")
    await _instance(engine, run.pk, "done", -1, "upstream_failed")
    for i, state in enumerate(("success", "failed", "success")):
        await _instance(engine, run.pk, "process", i, state, out=f"item {i}\n", result=f'"r{i}"')
    await _sql(engine, "UPDATE dag_runs SET state = 'failed', ended_at = now() WHERE id = :pk", pk=run.pk)
    return run.pk


def _servicer(engine: Engine) -> RunServicer:
    return RunServicer(engine, SystemClock())


async def _states(engine: Engine) -> dict[str, str]:
    run = await runs.get_run(engine, "fan", "r1")
    return {t.key: t.state for t in run.task_instances}


async def test_a_run_lists_each_instance_at_its_task_s_place(engine: Engine, expanded: int) -> None:
    message = await _servicer(engine).GetRun(api_pb2.GetRunRequest(name=RUN), None)
    shown = [(t.name.rsplit("/", 1)[1], t.task_id, t.map_index) for t in message.task_instances]
    assert shown == [
        ("src", "src", -1),
        ("process[0]", "process", 0),
        ("process[1]", "process", 1),
        ("process[2]", "process", 2),
        ("done", "done", -1),
    ]
    assert message.task_instances[1].name == f"{RUN}/tasks/process[0]"


async def test_result_logs_and_explain_by_key(engine: Engine, expanded: int) -> None:
    servicer = _servicer(engine)
    result = await servicer.GetTaskResult(
        api_pb2.GetTaskResultRequest(name=f"{RUN}/tasks/process[2]"),
        None,
    )
    assert result.name == f"{RUN}/tasks/process[2]/result"
    assert result.has_value and result.value.string_value == "r2"
    for i in range(3):
        found = await logs.read_logs(
            engine, dag_id="fan", run_id="r1", task_key=f"process[{i}]", try_number=0, offset=0, max_bytes=100
        )
        assert (found.data, found.complete) == (f"item {i}\n", True)
    state, why = await explaining.explain_task(engine, "fan", "r1", "process[1]")
    assert state is TaskState.FAILED and "clear it to run it again" in why[0]
    assert (await runs.task_result(engine, "fan", "r1", "src")).value == [1, 2, 3]


async def test_a_mapped_task_s_plain_id_names_nothing_once_expanded(engine: Engine, expanded: int) -> None:
    expected = (
        "task 'process' is mapped: name one of its instances, 'process[0]' to 'process[2]' (3 instances)"
    )
    with pytest.raises(NotFound, match=r"is mapped: name one of its instances") as caught:
        await runs.task_result(engine, "fan", "r1", "process")
    assert str(caught.value) == expected
    for lookup in (
        explaining.explain_task(engine, "fan", "r1", "process"),
        control.set_state(engine, "fan", "r1", "process", TaskState.SUCCESS),
        logs.read_logs(
            engine, dag_id="fan", run_id="r1", task_key="process", try_number=0, offset=0, max_bytes=9
        ),
    ):
        with pytest.raises(NotFound) as caught:
            await lookup
        assert str(caught.value) == expected and not isinstance(caught.value, NotStartedYet)
    with pytest.raises(NotFound, match=r"has no instance 3: 'process\[0\]' to 'process\[2\]'"):
        await runs.task_result(engine, "fan", "r1", "process[3]")
    with pytest.raises(NotFound, match=r"task 'src' is not mapped"):
        await runs.task_result(engine, "fan", "r1", "src[0]")
    with pytest.raises(NotFound, match=r"has no task 'ghost'"):
        await runs.task_result(engine, "fan", "r1", "ghost[0]")


async def test_watching_the_plain_id_of_an_expanded_task_ends_at_once(engine: Engine, expanded: int) -> None:
    await _sql(engine, "UPDATE dag_runs SET state = 'running', ended_at = NULL WHERE id = :pk", pk=expanded)
    stream = _servicer(engine).WatchTaskLogs(
        api_pb2.GetTaskLogsRequest(name=f"{RUN}/tasks/process"),
        None,
    )
    with pytest.raises(NotFound, match="is mapped"):
        await asyncio.wait_for(anext(stream), timeout=5)


async def test_watching_an_instance_waits_for_the_expansion(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = await registered_run(engine, _fan_spec())
    await _sql(engine, "UPDATE dag_runs SET state = 'running' WHERE id = :pk", pk=run.pk)
    await _instance(engine, run.pk, "process", -1, "none")
    with pytest.raises(NotStartedYet, match="has not been expanded yet"):
        await runs.task_result(engine, "fan", "r1", "process[0]")
    stream = _servicer(engine).WatchTaskLogs(
        api_pb2.GetTaskLogsRequest(name=f"{RUN}/tasks/process[0]"),
        None,
    )
    # The stream looks at the run each time it finds no instance to read: two looks mean it found
    # none, waited, and found none again.
    looks = 0
    get_run = runs.get_run

    async def counted(*args: Any, **kwargs: Any) -> Any:
        nonlocal looks
        looks += 1
        return await get_run(*args, **kwargs)

    monkeypatch.setattr(runs, "get_run", counted)
    first = asyncio.ensure_future(anext(stream))
    await wait_until_async("the stream to look for the instance twice", lambda: looks >= 2, 10)
    assert not first.done(), "the stream waits while the task is not expanded"
    await _sql(engine, "DELETE FROM task_instances WHERE run_pk = :pk AND map_index = -1", pk=run.pk)
    await _instance(engine, run.pk, "process", 0, "success", out="zero\n")
    logs_seen = await asyncio.wait_for(first, timeout=5)
    assert logs_seen.data == "zero\n"


async def test_clearing_one_instance_or_the_whole_task(engine: Engine, expanded: int) -> None:
    assert await control.clear(
        engine, "fan", "r1", ["process[1]"], downstream=False, upstream=False, only_failed=False
    ) == ["process[1]"]
    states = await _states(engine)
    assert (states["process[0]"], states["process[1]"], states["process[2]"]) == (
        "success",
        "none",
        "success",
    )
    assert (await runs.get_run(engine, "fan", "r1")).state == "running", "the run runs again"
    cleared = await control.clear(
        engine, "fan", "r1", ["process"], downstream=True, upstream=False, only_failed=False
    )
    assert cleared == ["done", "process[0]", "process[2]"], "the instance in state none has nothing to clear"
    assert set((await _states(engine)).values()) == {"none", "success"}
    assert (await _states(engine))["src"] == "success"


async def test_clearing_an_instance_with_its_upstream_or_downstream_clears_those_tasks(
    engine: Engine, expanded: int
) -> None:
    cleared = await control.clear(
        engine, "fan", "r1", ["process[2]"], downstream=False, upstream=True, only_failed=False
    )
    assert cleared == ["process[2]", "src"]
    response = await _servicer(engine).ClearTaskInstances(
        api_pb2.ClearTaskInstancesRequest(parent=RUN, task_ids=["process[1]"], include_downstream=True),
        None,
    )
    assert list(response.cleared_task_ids) == ["done", "process[1]"]


async def test_marking_one_instance(engine: Engine, expanded: int) -> None:
    marked = await _servicer(engine).SetTaskInstanceState(
        api_pb2.SetTaskInstanceStateRequest(name=f"{RUN}/tasks/process[1]", state=pb.TASK_STATE_SUCCESS),
        None,
    )
    assert (marked.name, marked.task_id, marked.map_index) == (f"{RUN}/tasks/process[1]", "process", 1)
    assert marked.state == pb.TASK_STATE_SUCCESS
    states = await _states(engine)
    assert states["done"] == "none", "the task downstream that gave up is evaluated again"
    assert (states["process[0]"], states["process[2]"]) == ("success", "success")
    await control.set_state(engine, "fan", "r1", "process[0]", TaskState.FAILED)
    assert (await _states(engine))["process[0]"] == "failed"


@pytest.mark.parametrize(
    "key", ["process[x]", "process[01]", "process[-1]", "process[]", "process[1]x", "[1]"]
)
async def test_malformed_keys_are_invalid_arguments(engine: Engine, expanded: int, key: str) -> None:
    servicer = _servicer(engine)
    with pytest.raises(InvalidArgument) as caught:
        await servicer.GetTaskResult(api_pb2.GetTaskResultRequest(name=f"{RUN}/tasks/{key}"), None)
    assert caught.value.field == "name"
    with pytest.raises(InvalidArgument) as caught:
        await servicer.ClearTaskInstances(
            api_pb2.ClearTaskInstancesRequest(parent=RUN, task_ids=["src", key]),
            None,
        )
    assert caught.value.field == "task_ids[1]"


async def test_a_map_index_on_a_task_that_is_not_mapped_is_refused_by_clear(
    engine: Engine, expanded: int
) -> None:
    with pytest.raises(InvalidArgument, match=r"task 'src' is not mapped") as caught:
        await control.clear(
            engine, "fan", "r1", ["done", "src[0]"], downstream=False, upstream=False, only_failed=False
        )
    assert caught.value.field == "task_ids[1]"
    with pytest.raises(InvalidArgument, match=r"has no task 'ghost'") as caught:
        await control.clear(
            engine, "fan", "r1", ["ghost[0]"], downstream=False, upstream=False, only_failed=False
        )
    assert caught.value.field == "task_ids[0]"
