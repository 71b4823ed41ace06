"""``schedctl runs``: trigger, inspect and cancel DAG runs."""

from __future__ import annotations

import json
import time
import uuid
from typing import Annotated, Any

import typer

from schedctl import output
from schedctl.cli import (
    EXIT_REJECTED,
    EXIT_RUN_FAILED,
    EXIT_WAIT_TIMED_OUT,
    Format,
    OutputOption,
    app,
    call,
    fail,
    run_name,
    show,
    state,
    use_format,
)
from schedd.v1 import api_pb2
from schedd.v1 import resources_pb2 as pb
from schedd_rpc import convert

runs_app = typer.Typer(help="Trigger and inspect DAG runs.", no_args_is_help=True)
app.add_typer(runs_app, name="runs")


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
    dag = call(state.client.dags.GetDag, api_pb2.GetDagRequest(name=f"dags/{dag_id}"))
    assert isinstance(dag, pb.Dag)
    if dag.paused:
        output.err_console.print(
            f"[yellow]warning:[/yellow] dag {dag_id} is paused: the run waits until "
            f"'schedctl dags unpause {dag_id}'",
            highlight=False,
        )
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
            fail(EXIT_WAIT_TIMED_OUT, f"{name} did not finish within {timeout:g}s")
        time.sleep(interval)
        interval = min(interval * 1.5, 1.0)


@runs_app.command("get")
def runs_get(
    run: Annotated[str, typer.Argument(help="DAG/RUN_ID or dags/DAG/runs/RUN_ID")],
    output_format: OutputOption = None,
) -> None:
    """Show a run and the states of its tasks."""
    use_format(output_format)
    resp = call(state.client.runs.GetRun, api_pb2.GetRunRequest(name=run_name(run)))
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


@runs_app.command("cancel")
def runs_cancel(
    run: Annotated[str, typer.Argument(help="DAG/RUN_ID or dags/DAG/runs/RUN_ID")],
    output_format: OutputOption = None,
) -> None:
    """Fail a run: stop its running tasks and skip the ones that have not run."""
    use_format(output_format)
    resp = call(state.client.runs.CancelRun, api_pb2.CancelRunRequest(name=run_name(run)))
    assert isinstance(resp, pb.DagRun)
    show(resp, output.run_table(resp))
