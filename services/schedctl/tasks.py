"""``schedctl tasks`` and ``schedctl explain``: logs, clear, mark, and why a task is not running.

Each command takes a task instance as TASK, ``TASK[N]`` or ``TASK --map-index N`` for instance N of a
mapped task (``schedctl.task_keys``)."""

from __future__ import annotations

import json
import sys
import uuid
from typing import Annotated

import grpc
import typer
from rich.markup import escape

from schedctl import output
from schedctl.cli import (
    EXIT_NOT_FOUND,
    Format,
    OutputOption,
    app,
    call,
    fail,
    report,
    run_name,
    show,
    state,
    use_format,
)
from schedctl.instance_rows import key_of
from schedctl.task_keys import MapIndexesOption, MapIndexOption, task_key, task_keys
from schedd.v1 import api_pb2
from schedd.v1 import resources_pb2 as pb
from schedd_rpc import convert

tasks_app = typer.Typer(help="Inspect task instances.", no_args_is_help=True)
app.add_typer(tasks_app, name="tasks")


@tasks_app.command("logs")
def tasks_logs(
    run: Annotated[str, typer.Argument(help="DAG/RUN_ID or dags/DAG/runs/RUN_ID")],
    task: Annotated[str, typer.Argument(help="the task (TASK[N]: instance N of a mapped task)")],
    try_number: Annotated[
        int, typer.Option("--try", help="the attempt's try number; default the latest")
    ] = 0,
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="keep printing until the attempt ends")
    ] = False,
    map_index: MapIndexOption = None,
) -> None:
    """Print the captured output of a task's attempt, and how it failed if it did. With -f, wait
    for a task that has not started yet (or a mapped task's instance not made yet) and follow its
    output until the attempt ends."""
    key = task_key(task, map_index)
    name = f"{run_name(run)}/tasks/{key}"
    request = api_pb2.GetTaskLogsRequest(name=name, try_number=try_number)
    try:
        resp = state.client.call(state.client.runs.GetTaskLogs, request)
    except grpc.RpcError as exc:
        if not (follow and exc.code() == grpc.StatusCode.NOT_FOUND and _may_still_start(run, key)):
            report(exc)
        output.err_console.print(f"waiting for {key} to start", highlight=False)
    else:
        sys.stdout.write(resp.data)
        sys.stdout.flush()
        request.offset = resp.next_offset
        request.try_number = resp.try_number
        if not follow:
            if resp.complete:
                _say_how_it_ended(run, key, resp.try_number)
            return
    last = None
    try:
        for last in state.client.watch_task_logs(request):
            sys.stdout.write(last.data)
            sys.stdout.flush()
    except grpc.RpcError as exc:
        report(exc)
    if last is not None and last.complete:
        _say_how_it_ended(run, key, last.try_number)


def _task(run: str, key: str) -> tuple[pb.DagRun, pb.TaskInstance | None]:
    found = call(state.client.runs.GetRun, api_pb2.GetRunRequest(name=run_name(run)))
    assert isinstance(found, pb.DagRun)
    return found, next((t for t in found.task_instances if key_of(t) == key), None)


def _may_still_start(run: str, key: str) -> bool:
    """Whether the task instance has yet to run in a run that has not ended (the api says whether
    it can exist at all)."""
    found, ti = _task(run, key)
    if found.state in (pb.RUN_STATE_SUCCESS, pb.RUN_STATE_FAILED):
        return False
    if ti is None and any(t.task_id == key and t.map_index >= 0 for t in found.task_instances):
        return False  # a mapped task's plain id, once it is expanded: the api's error says so
    return ti is None or ti.try_number == 0


def _say_how_it_ended(run: str, key: str, try_number: int) -> None:
    """On standard error: why the latest attempt failed (an import error, an exit code, a timeout)."""
    _, ti = _task(run, key)
    if ti is None or ti.try_number != try_number or not ti.error:
        return
    if ti.state in (pb.TASK_STATE_FAILED, pb.TASK_STATE_UP_FOR_RETRY, pb.TASK_STATE_UPSTREAM_FAILED):
        state_text = output.state_name(pb.TaskState, ti.state, "TASK_STATE_")
        output.err_console.print(f"{key} try {try_number} {state_text}: {ti.error}", highlight=False)


@tasks_app.command("result")
def tasks_result(
    run: Annotated[str, typer.Argument(help="DAG/RUN_ID or dags/DAG/runs/RUN_ID")],
    task: Annotated[str, typer.Argument(help="the task (TASK[N]: instance N of a mapped task)")],
    output_format: OutputOption = None,
    map_index: MapIndexOption = None,
) -> None:
    """The value a task returned (as JSON), as its downstream tasks receive it. Exits 3 when the
    task has stored no value (it has not succeeded, or it is not a Python task)."""
    use_format(output_format)
    key = task_key(task, map_index)
    name = f"{run_name(run)}/tasks/{key}"
    resp = call(state.client.runs.GetTaskResult, api_pb2.GetTaskResultRequest(name=name))
    assert isinstance(resp, api_pb2.StoredTaskResult)
    if not resp.has_value and state.format in (Format.table, Format.wide):
        task_state = output.state_name(pb.TaskState, resp.state, "TASK_STATE_")
        fail(EXIT_NOT_FOUND, f"{key} stored no result (it is {task_state})")
    value = convert.from_value(resp.value) if resp.has_value else None
    show(resp, escape(json.dumps(value, indent=2, sort_keys=True)))


@tasks_app.command("clear")
def tasks_clear(
    run: Annotated[str, typer.Argument(help="DAG/RUN_ID or dags/DAG/runs/RUN_ID")],
    tasks: Annotated[
        list[str] | None,
        typer.Argument(help="tasks to clear (every instance of a mapped one; TASK[N]: one); none: all"),
    ] = None,
    downstream: Annotated[bool, typer.Option("--downstream", help="also everything downstream")] = False,
    upstream: Annotated[bool, typer.Option("--upstream", help="also everything upstream")] = False,
    only_failed: Annotated[bool, typer.Option("--only-failed", help="only failed/upstream_failed")] = False,
    output_format: OutputOption = None,
    map_indexes: MapIndexesOption = None,
) -> None:
    """Reset task instances so they run again, with their retries restored. Downstream and upstream
    tasks are cleared with all their instances."""
    use_format(output_format)
    keys = task_keys(tasks or [], map_indexes or [])
    resp = call(
        state.client.runs.ClearTaskInstances,
        api_pb2.ClearTaskInstancesRequest(
            parent=run_name(run),
            task_ids=keys,
            include_downstream=downstream,
            include_upstream=upstream,
            only_failed=only_failed,
            request_id=str(uuid.uuid4()),
        ),
    )
    assert isinstance(resp, api_pb2.ClearTaskInstancesResponse)
    show(resp, "cleared: " + (", ".join(resp.cleared_task_ids) or "nothing"))


def _mark(
    run: str, task: str, map_index: int | None, target: pb.TaskState.ValueType, output_format: Format | None
) -> None:
    use_format(output_format)
    key = task_key(task, map_index)
    resp = call(
        state.client.runs.SetTaskInstanceState,
        api_pb2.SetTaskInstanceStateRequest(
            name=f"{run_name(run)}/tasks/{key}", state=target, request_id=str(uuid.uuid4())
        ),
    )
    assert isinstance(resp, pb.TaskInstance)
    show(resp, f"{resp.name}: {output.state_name(pb.TaskState, resp.state, 'TASK_STATE_')}")


@tasks_app.command("mark-success")
def tasks_mark_success(
    run: Annotated[str, typer.Argument()],
    task: Annotated[str, typer.Argument(help="the task (TASK[N]: instance N of a mapped task)")],
    output_format: OutputOption = None,
    map_index: MapIndexOption = None,
) -> None:
    """Mark a task instance succeeded by hand (a running attempt is stopped)."""
    _mark(run, task, map_index, pb.TASK_STATE_SUCCESS, output_format)


@tasks_app.command("mark-failed")
def tasks_mark_failed(
    run: Annotated[str, typer.Argument()],
    task: Annotated[str, typer.Argument(help="the task (TASK[N]: instance N of a mapped task)")],
    output_format: OutputOption = None,
    map_index: MapIndexOption = None,
) -> None:
    """Mark a task instance failed by hand, without retries (a running attempt is stopped)."""
    _mark(run, task, map_index, pb.TASK_STATE_FAILED, output_format)


@app.command("explain")
def explain(
    run: Annotated[str, typer.Argument(help="DAG/RUN_ID or dags/DAG/runs/RUN_ID")],
    task: Annotated[str, typer.Argument(help="the task (TASK[N]: instance N of a mapped task)")],
    output_format: OutputOption = None,
    map_index: MapIndexOption = None,
) -> None:
    """Why a task is not running yet: upstream tasks, pools, limits, retry time."""
    use_format(output_format)
    key = task_key(task, map_index)
    resp = call(
        state.client.runs.ExplainTaskInstance,
        api_pb2.ExplainTaskInstanceRequest(name=f"{run_name(run)}/tasks/{key}"),
    )
    assert isinstance(resp, api_pb2.Explanation)
    lines = [f"{key}: {output.state_name(pb.TaskState, resp.state, 'TASK_STATE_')}"]
    lines += [f"  - {r}" for r in resp.reasons]
    show(resp, "\n".join(lines))
