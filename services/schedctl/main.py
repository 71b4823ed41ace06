"""The ``schedctl`` command line.

Exit codes: 0 success; 1 a waited-for run failed; 2 the request was rejected (bad input, not
found, ...); 3 the api could not be reached.
"""

from __future__ import annotations

import json
import sys
import time
import uuid
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, NoReturn

import grpc
import typer
from rich.markup import escape

from schedctl import output
from schedctl.client import ApiClient
from schedctl.specfile import SpecFileError, load_specs
from schedd.v1 import api_pb2
from schedd.v1 import resources_pb2 as pb
from schedd_rpc import convert

EXIT_RUN_FAILED = 1
EXIT_REJECTED = 2
EXIT_UNAVAILABLE = 3


class Format(StrEnum):
    table = "table"
    json = "json"


class State:
    client: ApiClient
    format: Format


app = typer.Typer(help="Control a schedd cluster through its api.", no_args_is_help=True)
dags_app = typer.Typer(help="Register and inspect DAGs.", no_args_is_help=True)
runs_app = typer.Typer(help="Trigger and inspect DAG runs.", no_args_is_help=True)
app.add_typer(dags_app, name="dags")
workers_app = typer.Typer(help="Inspect and drain workers.", no_args_is_help=True)
tasks_app = typer.Typer(help="Inspect task instances.", no_args_is_help=True)
pools_app = typer.Typer(help="List and size pools.", no_args_is_help=True)
app.add_typer(pools_app, name="pools")
app.add_typer(runs_app, name="runs")
app.add_typer(workers_app, name="workers")
app.add_typer(tasks_app, name="tasks")
state = State()


@app.callback()
def _global(
    api: Annotated[str, typer.Option(envvar="SCHEDD_API", help="api address host:port")] = "127.0.0.1:50051",
    output_format: Annotated[Format, typer.Option("--output", "-o", help="table or json")] = Format.table,
    timeout: Annotated[float, typer.Option(help="seconds per request")] = 10.0,
) -> None:
    state.client = ApiClient(api, timeout=timeout)
    state.format = output_format


OutputOption = Annotated[
    Format | None, typer.Option("--output", "-o", help="table or json (may also precede the command)")
]


def use_format(value: Format | None) -> None:
    if value is not None:
        state.format = value


def fail(code: int, message: str) -> NoReturn:
    output.err_console.print(f"[red]error:[/red] {escape(message)}", highlight=False)
    raise typer.Exit(code)


def call(method: object, request: object) -> object:
    try:
        return state.client.call(method, request)  # type: ignore[arg-type]
    except grpc.RpcError as exc:
        code = exc.code()
        details = exc.details()
        if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
            fail(EXIT_UNAVAILABLE, f"cannot reach the api at {state.client.address}: {details}")
        fail(EXIT_REJECTED, f"{code.name}: {details}")


def show(message: object, table: object) -> None:
    if state.format is Format.json:
        print(output.as_json(message))  # type: ignore[arg-type]
    else:
        output.console.print(table)


@dags_app.command("register")
def dags_register(
    path: Annotated[Path, typer.Argument(help="a DAG file: Python (every DAG in it), YAML or JSON")],
    output_format: OutputOption = None,
) -> None:
    """Register DAGs from a file. An unchanged spec makes no new version.

    A Python file is imported here, on the client, to build the specs; the scheduler never
    imports user code.
    """
    use_format(output_format)
    try:
        specs = load_specs(path)
    except SpecFileError as exc:
        fail(EXIT_REJECTED, str(exc))
    for spec in specs:
        resp = call(
            state.client.dags.RegisterDag, api_pb2.RegisterDagRequest(spec=spec, request_id=str(uuid.uuid4()))
        )
        assert isinstance(resp, api_pb2.RegisterDagResponse)
        if state.format is Format.json:
            print(output.as_json(resp))
        else:
            verb = "registered new version" if resp.created_version else "unchanged, version"
            output.console.print(f"dag [bold]{resp.dag.dag_id}[/bold]: {verb} {resp.version.version_hash}")


@dags_app.command("list")
def dags_list(output_format: OutputOption = None) -> None:
    """List registered DAGs."""
    use_format(output_format)
    dags: list[pb.Dag] = []
    token = ""
    while True:
        resp = call(state.client.dags.ListDags, api_pb2.ListDagsRequest(page_size=500, page_token=token))
        assert isinstance(resp, api_pb2.ListDagsResponse)
        dags.extend(resp.dags)
        token = resp.next_page_token
        if not token:
            break
    show(dags, output.dags_table(dags))


def _run_name(ref: str) -> str:
    """Accept ``dags/D/runs/R`` or the short ``D/R``."""
    if ref.startswith("dags/"):
        return ref
    dag_id, sep, run_id = ref.partition("/")
    if not sep:
        fail(EXIT_REJECTED, f"RUN {ref!r} must be 'DAG/RUN_ID' or 'dags/DAG/runs/RUN_ID'")
    return f"dags/{dag_id}/runs/{run_id}"


#: Limits of ``--conf``, checked before it is parsed (the server's limits are the same).
MAX_CONF_CHARS = 64 * 1024
MAX_CONF_DEPTH = 32


def parse_conf(text: str) -> dict[str, Any]:
    """``--conf`` as a JSON object; exits 2 with a message when it is too big, too deep or not one."""
    if len(text) > MAX_CONF_CHARS:
        fail(EXIT_REJECTED, f"--conf is {len(text)} characters; the limit is {MAX_CONF_CHARS}")
    if json_depth(text) > MAX_CONF_DEPTH:
        fail(EXIT_REJECTED, f"--conf is nested deeper than {MAX_CONF_DEPTH} levels")
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        fail(EXIT_REJECTED, f"--conf is not valid JSON: {exc}")
    if not isinstance(value, dict):
        fail(EXIT_REJECTED, "--conf must be a JSON object")
    return value


def json_depth(text: str) -> int:
    """How deeply the arrays and objects of JSON ``text`` nest, without parsing it."""
    depth = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


@runs_app.command("trigger")
def runs_trigger(
    dag_id: Annotated[str, typer.Argument(help="the DAG to run")],
    conf: Annotated[str, typer.Option(help="run configuration, a JSON object")] = "{}",
    run_id: Annotated[str, typer.Option(help="default: manual__<time>")] = "",
    wait: Annotated[
        bool, typer.Option("--wait", help="wait for the run to finish; exit 1 if it fails")
    ] = False,
    wait_timeout: Annotated[float, typer.Option(help="seconds --wait waits at most")] = 3600.0,
    output_format: OutputOption = None,
) -> None:
    """Trigger a manual run of a DAG."""
    use_format(output_format)
    conf_value = parse_conf(conf)
    run = call(
        state.client.runs.CreateRun,
        api_pb2.CreateRunRequest(
            parent=f"dags/{dag_id}",
            run_id=run_id,
            conf=convert.struct(conf_value),
            request_id=str(uuid.uuid4()),
        ),
    )
    assert isinstance(run, pb.DagRun)
    if not wait:
        show(run, f"triggered {run.name}")
        return
    if state.format is Format.table:
        output.console.print(f"triggered {run.name}; waiting")
    final = _wait_for(run.name, wait_timeout)
    show(final, output.run_table(final))
    if final.state != pb.RUN_STATE_SUCCESS:
        raise typer.Exit(EXIT_RUN_FAILED)


def _wait_for(name: str, timeout: float) -> pb.DagRun:
    deadline = time.monotonic() + timeout
    interval = 0.05
    while True:
        run = call(state.client.runs.GetRun, api_pb2.GetRunRequest(name=name))
        assert isinstance(run, pb.DagRun)
        if run.state in (pb.RUN_STATE_SUCCESS, pb.RUN_STATE_FAILED):
            return run
        if time.monotonic() > deadline:
            fail(EXIT_UNAVAILABLE, f"{name} did not finish within {timeout:g}s")
        time.sleep(interval)
        interval = min(interval * 1.5, 1.0)


@runs_app.command("get")
def runs_get(
    run: Annotated[str, typer.Argument(help="DAG/RUN_ID or dags/DAG/runs/RUN_ID")],
    output_format: OutputOption = None,
) -> None:
    """Show a run and the states of its tasks."""
    use_format(output_format)
    resp = call(state.client.runs.GetRun, api_pb2.GetRunRequest(name=_run_name(run)))
    assert isinstance(resp, pb.DagRun)
    show(resp, output.run_table(resp))


@runs_app.command("list")
def runs_list(
    dag_id: Annotated[str, typer.Argument(help="DAG id; omit for all DAGs")] = "-",
    limit: Annotated[int, typer.Option(help="newest runs to show")] = 20,
    output_format: OutputOption = None,
) -> None:
    """List the newest runs."""
    use_format(output_format)
    resp = call(state.client.runs.ListRuns, api_pb2.ListRunsRequest(parent=f"dags/{dag_id}", page_size=limit))
    assert isinstance(resp, api_pb2.ListRunsResponse)
    show(list(resp.runs), output.runs_table(list(resp.runs)))


@workers_app.command("list")
def workers_list(
    all_workers: Annotated[bool, typer.Option("--all", help="include workers that left")] = False,
    output_format: OutputOption = None,
) -> None:
    """List workers with their queues, load and last heartbeat."""
    use_format(output_format)
    workers: list[api_pb2.Worker] = []
    token = ""
    while True:
        resp = call(
            state.client.workers.ListWorkers,
            api_pb2.ListWorkersRequest(page_size=500, page_token=token, include_gone=all_workers),
        )
        assert isinstance(resp, api_pb2.ListWorkersResponse)
        workers.extend(resp.workers)
        token = resp.next_page_token
        if not token:
            break
    show(workers, output.workers_table(workers))


@workers_app.command("drain")
def workers_drain(
    worker_id: Annotated[str, typer.Argument(help="the worker's id")],
    output_format: OutputOption = None,
) -> None:
    """Ask a worker to stop taking work, finish (or hand back) what it runs, and exit."""
    use_format(output_format)
    resp = call(state.client.workers.DrainWorker, api_pb2.DrainWorkerRequest(name=f"workers/{worker_id}"))
    assert isinstance(resp, api_pb2.Worker)
    show(resp, f"drain requested for worker {resp.worker_id} ({resp.running} attempts running)")


@tasks_app.command("logs")
def tasks_logs(
    run: Annotated[str, typer.Argument(help="DAG/RUN_ID or dags/DAG/runs/RUN_ID")],
    task_id: Annotated[str, typer.Argument(help="the task")],
    try_number: Annotated[
        int, typer.Option("--try", help="the attempt's try number; default the latest")
    ] = 0,
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="keep printing until the attempt ends")
    ] = False,
) -> None:
    """Print the captured output of a task's attempt."""
    name = f"{_run_name(run)}/tasks/{task_id}"
    offset = 0
    interval = 0.1
    while True:
        resp = call(
            state.client.runs.GetTaskLogs,
            api_pb2.GetTaskLogsRequest(name=name, try_number=try_number, offset=offset),
        )
        assert isinstance(resp, api_pb2.TaskLogs)
        try_number = resp.try_number
        if resp.data:
            sys.stdout.write(resp.data)
            sys.stdout.flush()
            interval = 0.1
        ended = resp.complete
        offset = resp.next_offset
        if not follow or (ended and not resp.data):
            return
        if not resp.data:
            time.sleep(interval)
            interval = min(interval * 1.5, 1.0)


@dags_app.command("pause")
def dags_pause(dag_id: Annotated[str, typer.Argument()], output_format: OutputOption = None) -> None:
    """Stop scheduling new tasks of the DAG's runs (running tasks finish)."""
    use_format(output_format)
    resp = call(state.client.dags.PauseDag, api_pb2.PauseDagRequest(name=f"dags/{dag_id}"))
    show(resp, f"dag {dag_id} paused")


@dags_app.command("unpause")
def dags_unpause(dag_id: Annotated[str, typer.Argument()], output_format: OutputOption = None) -> None:
    """Resume scheduling the DAG's runs."""
    use_format(output_format)
    resp = call(state.client.dags.UnpauseDag, api_pb2.PauseDagRequest(name=f"dags/{dag_id}"))
    show(resp, f"dag {dag_id} unpaused")


@runs_app.command("cancel")
def runs_cancel(
    run: Annotated[str, typer.Argument(help="DAG/RUN_ID or dags/DAG/runs/RUN_ID")],
    output_format: OutputOption = None,
) -> None:
    """Fail a run: stop its running tasks and skip the ones that have not run."""
    use_format(output_format)
    resp = call(state.client.runs.CancelRun, api_pb2.CancelRunRequest(name=_run_name(run)))
    assert isinstance(resp, pb.DagRun)
    show(resp, output.run_table(resp))


@tasks_app.command("clear")
def tasks_clear(
    run: Annotated[str, typer.Argument(help="DAG/RUN_ID or dags/DAG/runs/RUN_ID")],
    task_ids: Annotated[list[str] | None, typer.Argument(help="tasks to clear; none: all")] = None,
    downstream: Annotated[bool, typer.Option("--downstream", help="also everything downstream")] = False,
    upstream: Annotated[bool, typer.Option("--upstream", help="also everything upstream")] = False,
    only_failed: Annotated[bool, typer.Option("--only-failed", help="only failed/upstream_failed")] = False,
    output_format: OutputOption = None,
) -> None:
    """Reset task instances so they run again, with their retries restored."""
    use_format(output_format)
    resp = call(
        state.client.runs.ClearTaskInstances,
        api_pb2.ClearTaskInstancesRequest(
            parent=_run_name(run),
            task_ids=task_ids or [],
            include_downstream=downstream,
            include_upstream=upstream,
            only_failed=only_failed,
        ),
    )
    assert isinstance(resp, api_pb2.ClearTaskInstancesResponse)
    show(resp, "cleared: " + (", ".join(resp.cleared_task_ids) or "nothing"))


def _mark(run: str, task_id: str, target: pb.TaskState.ValueType, output_format: Format | None) -> None:
    use_format(output_format)
    resp = call(
        state.client.runs.SetTaskInstanceState,
        api_pb2.SetTaskInstanceStateRequest(name=f"{_run_name(run)}/tasks/{task_id}", state=target),
    )
    assert isinstance(resp, pb.TaskInstance)
    show(resp, f"{resp.name}: {output.state_name(pb.TaskState, resp.state, 'TASK_STATE_')}")


@tasks_app.command("mark-success")
def tasks_mark_success(
    run: Annotated[str, typer.Argument()],
    task_id: Annotated[str, typer.Argument()],
    output_format: OutputOption = None,
) -> None:
    """Mark a task instance succeeded by hand (a running attempt is stopped)."""
    _mark(run, task_id, pb.TASK_STATE_SUCCESS, output_format)


@tasks_app.command("mark-failed")
def tasks_mark_failed(
    run: Annotated[str, typer.Argument()],
    task_id: Annotated[str, typer.Argument()],
    output_format: OutputOption = None,
) -> None:
    """Mark a task instance failed by hand, without retries (a running attempt is stopped)."""
    _mark(run, task_id, pb.TASK_STATE_FAILED, output_format)


@app.command("explain")
def explain(
    run: Annotated[str, typer.Argument(help="DAG/RUN_ID or dags/DAG/runs/RUN_ID")],
    task_id: Annotated[str, typer.Argument()],
    output_format: OutputOption = None,
) -> None:
    """Why a task is not running yet: upstream tasks, pools, limits, retry time."""
    use_format(output_format)
    resp = call(
        state.client.runs.ExplainTaskInstance,
        api_pb2.ExplainTaskInstanceRequest(name=f"{_run_name(run)}/tasks/{task_id}"),
    )
    assert isinstance(resp, api_pb2.Explanation)
    lines = [f"{task_id}: {output.state_name(pb.TaskState, resp.state, 'TASK_STATE_')}"]
    lines += [f"  - {r}" for r in resp.reasons]
    show(resp, "\n".join(lines))


@pools_app.command("list")
def pools_list(output_format: OutputOption = None) -> None:
    """List pools with their size, the slots in use and the task instances waiting."""
    use_format(output_format)
    resp = call(state.client.pools.ListPools, api_pb2.ListPoolsRequest())
    assert isinstance(resp, api_pb2.ListPoolsResponse)
    show(list(resp.pools), output.pools_table(list(resp.pools)))


@pools_app.command("set")
def pools_set(
    pool: Annotated[str, typer.Argument(help="the pool's name")],
    slots: Annotated[int, typer.Argument(help="how many slots")],
    description: Annotated[str, typer.Option(help="what the pool is for")] = "",
    output_format: OutputOption = None,
) -> None:
    """Create a pool or change its size."""
    use_format(output_format)
    resp = call(
        state.client.pools.SetPool, api_pb2.SetPoolRequest(pool=pool, slots=slots, description=description)
    )
    assert isinstance(resp, api_pb2.Pool)
    show(resp, f"pool {resp.pool}: {resp.slots} slots")


@app.command("leader")
def leader(output_format: OutputOption = None) -> None:
    """Show which scheduler leads, since when, its fencing token, and the standbys."""
    use_format(output_format)
    resp = call(state.client.cluster.GetLeader, api_pb2.GetLeaderRequest())
    assert isinstance(resp, api_pb2.Leader)
    show(resp, output.leader_table(resp))


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":
    main()
