"""``schedctl tasks`` and ``schedctl explain``: logs, clear, mark, and why a task is not running.

Each command takes a task instance as TASK, ``TASK[N]`` or ``TASK --map-index N`` for instance N of a
mapped task (``schedctl.task_keys``)."""

from __future__ import annotations

import json
import uuid
from typing import Annotated

import typer
from rich.markup import escape

from schedctl import output
from schedctl.cli import (
    EXIT_NOT_FOUND,
    RUN_HELP,
    Format,
    OutputOption,
    app,
    call,
    fail,
    resolved_run_name,
    run_name,
    show,
    state,
    use_format,
)
from schedctl.task_keys import MapIndexesOption, MapIndexOption, task_key, task_keys
from schedctl.task_logs import print_task_logs
from schedd.v1 import api_pb2, resources_pb2 as pb
from schedd_rpc import convert

tasks_app = typer.Typer(help="Inspect task instances.", no_args_is_help=True)
app.add_typer(tasks_app, name="tasks")


@tasks_app.command("logs")
def tasks_logs(
    run: Annotated[str, typer.Argument(help=RUN_HELP)],
    task: Annotated[str, typer.Argument(help="the task (TASK[N]: instance N of a mapped task)")],
    try_number: Annotated[
        int, typer.Option("--try", help="the attempt's try number; default the latest")
    ] = 0,
    follow: Annotated[
        bool,
        typer.Option("--follow", "-f", help="follow it through its retries; the exit code says how it ended"),
    ] = False,
    no_timestamps: Annotated[
        bool, typer.Option("--no-timestamps", help="the output as the task wrote it, without line times")
    ] = False,
    map_index: MapIndexOption = None,
    output_format: OutputOption = None,
) -> None:
    """Print the log of a task's try (default the latest that started): its output, each line with
    the UTC time it was written, and how the try failed if it did. With -f, wait for a task that has
    not started yet (or a mapped task's instance not made yet) and follow it through its retries until
    it succeeds or fails for good (with --try: until that try ends); exit 0 when it succeeded, 1 when
    not. The output is printed as it was captured, in every output format.
    """
    use_format(output_format)
    key = task_key(task, map_index)
    print_task_logs(run, key, try_number=try_number, follow=follow, timestamps=not no_timestamps)


@tasks_app.command("result")
def tasks_result(
    run: Annotated[str, typer.Argument(help=RUN_HELP)],
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


LatestVersionOption = Annotated[
    bool,
    typer.Option(
        "--latest-version",
        help="move the run to the DAG's current version first, so what runs again runs the current code",
    ),
]


@tasks_app.command("clear")
def tasks_clear(
    run: Annotated[str, typer.Argument(help=RUN_HELP)],
    tasks: Annotated[
        list[str] | None,
        typer.Argument(help="tasks to clear (every instance of a mapped one; TASK[N]: one); none: all"),
    ] = None,
    downstream: Annotated[bool, typer.Option("--downstream", help="also everything downstream")] = False,
    upstream: Annotated[bool, typer.Option("--upstream", help="also everything upstream")] = False,
    only_failed: Annotated[bool, typer.Option("--only-failed", help="only failed/upstream_failed")] = False,
    latest_version: LatestVersionOption = False,
    output_format: OutputOption = None,
    map_indexes: MapIndexesOption = None,
) -> None:
    """Reset task instances so they run again, with their retries restored. Downstream and upstream
    tasks are cleared with all their instances. RUN_ID @latest is the DAG's newest run when the
    command starts (named on standard error); a run created after that is not cleared."""
    use_format(output_format)
    keys = task_keys(tasks or [], map_indexes or [])
    resp = call(
        state.client.runs.ClearTaskInstances,
        api_pb2.ClearTaskInstancesRequest(
            parent=resolved_run_name(run),
            task_ids=keys,
            include_downstream=downstream,
            include_upstream=upstream,
            only_failed=only_failed,
            request_id=str(uuid.uuid4()),
            run_on_latest_version=latest_version,
        ),
    )
    assert isinstance(resp, api_pb2.ClearTaskInstancesResponse)
    text = "cleared: " + (", ".join(resp.cleared_task_ids) or "nothing")
    show(resp, text + (f" (the run is on version {resp.dag_version})" if latest_version else ""))


def _mark(
    run: str,
    task: str,
    map_index: int | None,
    target: pb.TaskState.ValueType,
    output_format: Format | None,
    latest_version: bool,
) -> None:
    use_format(output_format)
    key = task_key(task, map_index)
    resp = call(
        state.client.runs.SetTaskInstanceState,
        api_pb2.SetTaskInstanceStateRequest(
            name=f"{resolved_run_name(run)}/tasks/{key}",
            state=target,
            request_id=str(uuid.uuid4()),
            run_on_latest_version=latest_version,
        ),
    )
    assert isinstance(resp, pb.TaskInstance)
    show(resp, f"{resp.name}: {output.state_name(pb.TaskState, resp.state, 'TASK_STATE_')}")


@tasks_app.command("mark-success")
def tasks_mark_success(
    run: Annotated[str, typer.Argument(help=RUN_HELP)],
    task: Annotated[str, typer.Argument(help="the task (TASK[N]: instance N of a mapped task)")],
    latest_version: LatestVersionOption = False,
    output_format: OutputOption = None,
    map_index: MapIndexOption = None,
) -> None:
    """Mark a task instance succeeded by hand (a running attempt is stopped). RUN_ID @latest is the
    DAG's newest run when the command starts; the reply names the instance marked."""
    _mark(run, task, map_index, pb.TASK_STATE_SUCCESS, output_format, latest_version)


@tasks_app.command("mark-failed")
def tasks_mark_failed(
    run: Annotated[str, typer.Argument(help=RUN_HELP)],
    task: Annotated[str, typer.Argument(help="the task (TASK[N]: instance N of a mapped task)")],
    latest_version: LatestVersionOption = False,
    output_format: OutputOption = None,
    map_index: MapIndexOption = None,
) -> None:
    """Mark a task instance failed by hand, without retries (a running attempt is stopped). RUN_ID
    @latest is the DAG's newest run when the command starts; the reply names the instance marked."""
    _mark(run, task, map_index, pb.TASK_STATE_FAILED, output_format, latest_version)


@app.command("explain")
def explain(
    run: Annotated[str, typer.Argument(help=RUN_HELP)],
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
