"""``schedctl backfill``: create, list, inspect, pause, resume and cancel backfills, and watch one."""

from __future__ import annotations

import time
import uuid
from enum import StrEnum
from typing import Annotated

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from schedctl import dates, output
from schedctl.cli import (
    EXIT_RUN_FAILED,
    OutputOption,
    app,
    call,
    show,
    state,
    use_format,
)
from schedctl.runs import parse_conf
from schedd.v1 import api_pb2, resources_pb2 as pb
from schedd_rpc import convert

backfill_app = typer.Typer(
    help="Run a DAG for past intervals, as a stored, resumable backfill.", no_args_is_help=True
)
app.add_typer(backfill_app, name="backfill")

_FINISHED = (pb.BACKFILL_STATE_SUCCEEDED, pb.BACKFILL_STATE_FAILED, pb.BACKFILL_STATE_CANCELLED)


class StrategyChoice(StrEnum):
    sequential = "sequential"
    parallel = "parallel"
    chunked = "chunked"


class ReprocessChoice(StrEnum):
    skip_existing = "skip_existing"
    rerun_failed = "rerun_failed"
    rerun_all = "rerun_all"


def backfill_name(ref: str) -> str:
    """Accept ``backfills/7`` or ``7``."""
    return ref if ref.startswith("backfills/") else f"backfills/{ref}"


@backfill_app.command("create")
def backfill_create(
    dag_id: Annotated[str, typer.Argument(help="the DAG")],
    start: Annotated[
        str,
        typer.Option(
            "--start", help="first logical date: an ISO 8601 date or date-time (the DAG's time zone)"
        ),
    ],
    end: Annotated[
        str,
        typer.Option(
            "--end",
            help="last logical date: a date takes in that whole day (up to the next midnight in the "
            "DAG's time zone); a date-time is the last logical date itself, inclusive",
        ),
    ],
    strategy: Annotated[
        StrategyChoice, typer.Option(help="how runs follow each other")
    ] = StrategyChoice.parallel,
    max_active_runs: Annotated[int, typer.Option(help="parallel: runs at once")] = 4,
    chunk_size: Annotated[int, typer.Option(help="chunked: intervals per chunk")] = 10,
    backward: Annotated[bool, typer.Option("--backward", help="newest interval first")] = False,
    reprocess: Annotated[
        ReprocessChoice, typer.Option(help="what to do with intervals that have a run")
    ] = ReprocessChoice.skip_existing,
    conf: Annotated[
        str | None,
        typer.Option(help="the conf of every run it creates, a JSON object (runs it reruns keep theirs)"),
    ] = None,
    latest_version: Annotated[
        bool,
        typer.Option("--latest-version", help="runs it reruns move to the DAG's current version first"),
    ] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="list the intervals; store nothing")] = False,
    watch: Annotated[
        bool, typer.Option("--watch", help="follow its progress until it ends; exit 1 unless it succeeded")
    ] = False,
    output_format: OutputOption = None,
) -> None:
    """Create a backfill: runs of DAG for every interval of its schedule whose logical date lies in
    [--start, --end]. It is stored: a scheduler fail-over does not stop it.

    Dates without a UTC offset are read in the DAG's time zone (UTC for a DAG without one). A date
    alone as --end takes in that whole day: --start 2024-06-01 --end 2024-06-30 is all of June.
    """
    use_format(output_format)
    conf_value = parse_conf(conf) if conf is not None else None
    zone = dates.dag_zone(dag_id)
    request = api_pb2.CreateBackfillRequest(
        parent=f"dags/{dag_id}",
        backfill=pb.Backfill(
            start_date=convert.ts(dates.parse(start, zone, "--start").start),
            end_date=convert.ts(dates.parse(end, zone, "--end").range_end(inclusive=True)),
            strategy=pb.BackfillStrategy.Value("BACKFILL_STRATEGY_" + strategy.value.upper()),
            max_active_runs=max_active_runs,
            chunk_size=chunk_size,
            backward=backward,
            reprocess=pb.ReprocessBehavior.Value("REPROCESS_BEHAVIOR_" + reprocess.value.upper()),
            run_on_latest_version=latest_version,
            conf=convert.struct(conf_value) if conf_value is not None else None,
        ),
        dry_run=dry_run,
        request_id="" if dry_run else str(uuid.uuid4()),
    )
    created = call(state.client.backfills.CreateBackfill, request)
    assert isinstance(created, pb.Backfill)
    if dry_run or not watch:
        show(created, output.dry_run_table(created) if dry_run else output.backfill_summary(created))
        return
    _watch(created.name)


@backfill_app.command("get")
def backfill_get(
    backfill: Annotated[str, typer.Argument(help="backfills/ID or ID")],
    watch: Annotated[bool, typer.Option("--watch", help="follow its progress until it ends")] = False,
    output_format: OutputOption = None,
) -> None:
    """Show a backfill and its progress."""
    use_format(output_format)
    if watch:
        _watch(backfill_name(backfill))
        return
    found = _get(backfill_name(backfill))
    show(found, output.backfill_summary(found))


@backfill_app.command("list")
def backfill_list(
    dag_id: Annotated[str, typer.Argument(help="DAG id; omit for all DAGs")] = "-",
    limit: Annotated[int, typer.Option(help="newest backfills to show")] = 20,
    output_format: OutputOption = None,
) -> None:
    """List the newest backfills with their progress."""
    use_format(output_format)
    resp = call(
        state.client.backfills.ListBackfills,
        api_pb2.ListBackfillsRequest(parent=f"dags/{dag_id}", page_size=limit),
    )
    assert isinstance(resp, api_pb2.ListBackfillsResponse)
    show(list(resp.backfills), output.backfills_table(list(resp.backfills)), empty="no backfills")


def _control(method: object, ref: str, verb: str) -> None:
    resp = call(method, api_pb2.GetBackfillRequest(name=backfill_name(ref)))
    assert isinstance(resp, pb.Backfill)
    show(resp, f"{verb}: " + output.backfill_summary(resp))


@backfill_app.command("pause")
def backfill_pause(backfill: Annotated[str, typer.Argument()], output_format: OutputOption = None) -> None:
    """Make no new runs until resumed; runs in flight finish."""
    use_format(output_format)
    _control(state.client.backfills.PauseBackfill, backfill, "paused")


@backfill_app.command("resume")
def backfill_resume(backfill: Annotated[str, typer.Argument()], output_format: OutputOption = None) -> None:
    """Go on with a paused backfill."""
    use_format(output_format)
    _control(state.client.backfills.ResumeBackfill, backfill, "resumed")


@backfill_app.command("cancel")
def backfill_cancel(backfill: Annotated[str, typer.Argument()], output_format: OutputOption = None) -> None:
    """End a backfill: make no more runs, and cancel its runs in flight."""
    use_format(output_format)
    _control(state.client.backfills.CancelBackfill, backfill, "cancelled")


def _get(name: str) -> pb.Backfill:
    found = call(state.client.backfills.GetBackfill, api_pb2.GetBackfillRequest(name=name))
    assert isinstance(found, pb.Backfill)
    return found


def _watch(name: str) -> None:
    """Follow a backfill until it ends: a live progress bar on a terminal (runs done, running,
    failed, time left), a line per change otherwise; exit 1 unless it succeeded."""
    current = _get(name)
    if output.err_console.is_terminal:
        columns = (
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[detail]}"),
            TimeRemainingColumn(),
        )
        with Progress(*columns, console=output.err_console) as progress:
            bar = progress.add_task(name, total=current.progress.total, detail="")
            while True:
                p = current.progress
                progress.update(
                    bar,
                    completed=p.succeeded + p.failed + p.skipped,
                    detail=f"{p.running} running, {p.failed} failed, {p.skipped} skipped",
                )
                if current.state in _FINISHED:
                    break
                time.sleep(0.5)
                current = _get(name)
    else:
        last = ""
        while True:
            line = output.backfill_summary(current)
            if line != last:
                output.err_console.print(line, highlight=False)
                last = line
            if current.state in _FINISHED:
                break
            time.sleep(0.5)
            current = _get(name)
    show(current, output.backfill_summary(current))
    if current.state != pb.BACKFILL_STATE_SUCCEEDED:
        raise typer.Exit(EXIT_RUN_FAILED)
