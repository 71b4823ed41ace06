"""``schedctl runs``: trigger, inspect and cancel DAG runs."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from typing import Annotated, Any

import grpc
import typer
from google.protobuf import timestamp_pb2
from rich.live import Live

from schedctl import dates, output
from schedctl.cli import (
    EXIT_REJECTED,
    EXIT_RUN_FAILED,
    EXIT_UNAVAILABLE,
    EXIT_WAIT_TIMED_OUT,
    RUN_HELP,
    Format,
    OutputOption,
    app,
    call,
    collect,
    fail,
    report,
    resolved_run_name,
    run_name,
    show,
    state,
    use_format,
    wide,
)
from schedd.v1 import api_pb2, resources_pb2 as pb
from schedd_core.errors import InvalidArgument
from schedd_core.limits import MAX_VALUE_DEPTH, check_conf_bytes
from schedd_rpc import convert

runs_app = typer.Typer(help="Trigger and inspect DAG runs.", no_args_is_help=True)
app.add_typer(runs_app, name="runs")


def parse_conf(text: str) -> dict[str, Any]:
    """``--conf`` as a JSON object; exits 2 with a message when it is nested too deep (checked before
    it is parsed), is not one, or is larger than the api takes: over ``MAX_CONF_BYTES`` as the api
    measures it (the serialized Struct), refused with the api's message."""
    if json_depth(text) > MAX_VALUE_DEPTH:
        fail(EXIT_REJECTED, f"--conf is nested deeper than {MAX_VALUE_DEPTH} levels")
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        fail(EXIT_REJECTED, f"--conf is not valid JSON: {exc}")
    if not isinstance(value, dict):
        fail(EXIT_REJECTED, "--conf must be a JSON object")
    try:
        check_conf_bytes(convert.struct(value).ByteSize(), "--conf")
    except InvalidArgument as exc:
        fail(EXIT_REJECTED, str(exc))
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
    logical_date: Annotated[str, typer.Option(help="the run's logical date (ISO 8601); default now")] = "",
    wait: Annotated[
        bool, typer.Option("--wait", help="wait for the run to finish; exit 1 if it fails")
    ] = False,
    wait_timeout: Annotated[float, typer.Option(help="seconds --wait waits at most")] = 3600.0,
    output_format: OutputOption = None,
) -> None:
    """Trigger a manual run of a DAG."""
    use_format(output_format)
    conf_value = parse_conf(conf)
    request = api_pb2.CreateRunRequest(
        parent=f"dags/{dag_id}", run_id=run_id, conf=convert.struct(conf_value), request_id=str(uuid.uuid4())
    )
    if logical_date:
        request.logical_date.CopyFrom(_timestamp("--logical-date", logical_date))
    run = call(state.client.runs.CreateRun, request)
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
    output.err_console.print(f"triggered {run.name}; waiting", highlight=False)
    final = _wait_for(run.name, wait_timeout)
    show(final, output.run_table(final, wide=wide()))
    if final.state != pb.RUN_STATE_SUCCESS:
        raise typer.Exit(EXIT_RUN_FAILED)


def _wait_for(name: str, timeout: float) -> pb.DagRun:
    """Follow the run (``WatchRun``, its summary: what that costs does not grow with the run) until it
    ends, a line per change on standard error; then read it whole, once."""
    last = ""
    final: pb.DagRun | None = None
    try:
        for run in state.client.watch_run(name, timeout, view=api_pb2.RUN_VIEW_SUMMARY):
            final = run
            line = output.progress_line(run)
            if line != last:
                output.err_console.print(line, highlight=False)
                last = line
    except grpc.RpcError as exc:
        if exc.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
            fail(EXIT_WAIT_TIMED_OUT, f"{name} did not finish within {timeout:g}s")
        report(exc)
    if final is None or final.state not in (pb.RUN_STATE_SUCCESS, pb.RUN_STATE_FAILED):
        fail(EXIT_UNAVAILABLE, f"the api stopped following {name} before it ended")
    whole = call(state.client.runs.GetRun, api_pb2.GetRunRequest(name=final.name))
    assert isinstance(whole, pb.DagRun)
    return whole


@runs_app.command("get")
def runs_get(
    run: Annotated[str, typer.Argument(help=RUN_HELP)],
    watch: Annotated[bool, typer.Option("--watch", "-w", help="follow it until it ends")] = False,
    output_format: OutputOption = None,
) -> None:
    """Show a run and the states of its tasks; with --watch, a live table until the run ends (exit 1
    if it failed)."""
    use_format(output_format)
    if watch:
        _watch(run_name(run))
        return
    resp = call(state.client.runs.GetRun, api_pb2.GetRunRequest(name=run_name(run)))
    assert isinstance(resp, pb.DagRun)
    show(resp, output.run_table(resp, wide=wide()))


def _watch(name: str) -> None:
    final: pb.DagRun | None = None
    try:
        if output.console.is_terminal and state.format in (Format.table, Format.wide):
            with Live(console=output.console, auto_refresh=False) as live:
                for run in state.client.watch_run(name, None):
                    final = run
                    live.update(output.run_table(run, wide=wide()), refresh=True)
        else:
            for run in state.client.watch_run(name, None):
                final = run
                output.err_console.print(output.progress_line(run), highlight=False)
    except grpc.RpcError as exc:
        report(exc)
    if final is None:
        fail(EXIT_UNAVAILABLE, f"the api stopped following {name} before it ended")
    if not (output.console.is_terminal and state.format in (Format.table, Format.wide)):
        show(final, output.run_table(final, wide=wide()))
    if final.state != pb.RUN_STATE_SUCCESS:
        raise typer.Exit(EXIT_RUN_FAILED)


@runs_app.command("list")
def runs_list(
    dag_id: Annotated[str, typer.Argument(help="DAG id; omit for all DAGs")] = "-",
    limit: Annotated[int, typer.Option(help="newest runs to show")] = 20,
    run_state: Annotated[
        list[str] | None,
        typer.Option("--state", help="only runs in this state (queued, running, success, failed)"),
    ] = None,
    run_type: Annotated[str, typer.Option("--type", help="only manual, scheduled or backfill runs")] = "",
    since: Annotated[
        str, typer.Option(help="only logical dates at or after this (ISO 8601 date or date-time)")
    ] = "",
    until: Annotated[
        str,
        typer.Option(
            help="only logical dates before this date-time; a date alone takes in that whole day "
            "(up to the next midnight)"
        ),
    ] = "",
    order_by: Annotated[
        str,
        typer.Option(
            "--order-by",
            help="create_time desc (default), create_time, logical_date desc or logical_date",
        ),
    ] = "",
    output_format: OutputOption = None,
) -> None:
    """List runs, newest first unless --order-by says otherwise (page after page, up to --limit).

    Dates without a UTC offset are read in the DAG's time zone when a DAG is given, else in UTC;
    --since 2024-06-01 --until 2024-06-30 is all of June.
    """
    use_format(output_format)
    if not 0 < limit <= 1_000_000:
        fail(EXIT_REJECTED, "--limit must be between 1 and 1000000")
    request = api_pb2.ListRunsRequest(parent=f"dags/{dag_id}", order_by=order_by)
    for name in run_state or []:
        request.states.append(_enum_value(pb.RunState, "RUN_STATE_", "--state", name))
    if run_type:
        request.run_type = _enum_value(pb.RunType, "RUN_TYPE_", "--type", run_type)
    if since or until:
        local = dag_id != "-" and (dates.is_date_only(since) or dates.is_date_only(until))
        zone = dates.dag_zone(dag_id) if local else UTC
        if since:
            request.logical_date_from.FromDatetime(dates.parse(since, zone, "--since").start)
        if until:
            end = dates.parse(until, zone, "--until").range_end(inclusive=False)
            request.logical_date_until.FromDatetime(end)
    found: list[pb.DagRun] = collect(state.client.runs.ListRuns, request, "runs", limit)
    show(found, output.runs_table(found, wide=wide()), empty="no runs")


@runs_app.command("cancel")
def runs_cancel(
    run: Annotated[str, typer.Argument(help=RUN_HELP)],
    output_format: OutputOption = None,
) -> None:
    """Fail a run: stop its running tasks and skip the ones that have not run. RUN_ID @latest is the
    DAG's newest run when the command starts (named on standard error); a run created after that is
    not cancelled."""
    use_format(output_format)
    request = api_pb2.CancelRunRequest(name=resolved_run_name(run), request_id=str(uuid.uuid4()))
    resp = call(state.client.runs.CancelRun, request)
    assert isinstance(resp, pb.DagRun)
    show(resp, output.run_table(resp, wide=wide()))


def _enum_value(enum_type: Any, prefix: str, option: str, name: str) -> Any:
    choices = [v.name.removeprefix(prefix).lower() for v in enum_type.DESCRIPTOR.values if v.number]
    if name.lower() not in choices:
        fail(EXIT_REJECTED, f"{option} {name!r} must be one of {', '.join(choices)}")
    return enum_type.Value(prefix + name.upper())


def _timestamp(option: str, text: str) -> timestamp_pb2.Timestamp:
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        fail(EXIT_REJECTED, f"{option} {text!r} is not an ISO 8601 date or time")
    stamp = timestamp_pb2.Timestamp()
    stamp.FromDatetime(moment if moment.tzinfo else moment.replace(tzinfo=UTC))
    return stamp
