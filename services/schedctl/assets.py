"""``schedctl assets``: the assets with their lineage, their events, and outside events."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from rich.table import Table

from schedctl.cli import EXIT_REJECTED, OutputOption, app, call, collect, fail, show, state, use_format
from schedd.v1 import assets_pb2 as apb
from schedd_rpc import convert

assets_app = typer.Typer(help="Assets, their lineage and their events.", no_args_is_help=True)
app.add_typer(assets_app, name="assets")


@assets_app.command("list")
def assets_list(
    prefix: Annotated[str, typer.Option(help="only URIs that start with it")] = "",
    output_format: OutputOption = None,
) -> None:
    """List assets with the tasks that update them, the DAGs scheduled on them and their readers."""
    use_format(output_format)
    stub = state.client.assets
    found: list[apb.Asset] = collect(stub.ListAssets, apb.ListAssetsRequest(uri_prefix=prefix), "assets")
    show(found, lineage_table(found), empty="no assets")


@assets_app.command("events")
def assets_events(
    uri: Annotated[str, typer.Argument(help="the asset's URI; omit for every asset")] = "",
    run: Annotated[str, typer.Option(help="only those the run dags/<dag>/runs/<run> consumed")] = "",
    limit: Annotated[int, typer.Option(min=1, help="at most this many, newest first")] = 50,
    output_format: OutputOption = None,
) -> None:
    """List asset events, newest first, with where each came from and the runs that consumed it."""
    use_format(output_format)
    request = apb.ListAssetEventsRequest(uri=uri, consumed_by=run)
    found: list[apb.AssetEvent] = collect(state.client.assets.ListAssetEvents, request, "events", limit)
    show(found, events_table(found), empty="no events")


@assets_app.command("emit")
def assets_emit(
    uri: Annotated[str, typer.Argument(help="the asset's URI, e.g. s3://bucket/key")],
    extra: Annotated[str, typer.Option(help="a JSON object recorded with the event")] = "{}",
    request_id: Annotated[str, typer.Option(help="the same id again records nothing new")] = "",
    output_format: OutputOption = None,
) -> None:
    """Record that an asset was updated (operator): DAGs scheduled on it run as their conditions say."""
    use_format(output_format)
    request = apb.CreateAssetEventRequest(
        uri=uri, extra=convert.struct(parse_extra(extra)), request_id=request_id
    )
    event = call(state.client.assets.CreateAssetEvent, request)
    assert isinstance(event, apb.AssetEvent)
    show(event, f"event {event.id} recorded for {event.uri}")


def parse_extra(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        fail(EXIT_REJECTED, f"--extra is not valid JSON: {exc}")
    if not isinstance(value, dict):
        fail(EXIT_REJECTED, "--extra must be a JSON object")
    return value


def _tasks(refs: list[apb.TaskRef]) -> str:
    return ", ".join(f"{r.dag_id}.{r.task_id}" for r in refs) or "-"


def lineage_table(found: list[apb.Asset]) -> Table:
    table = Table("URI", "PRODUCED BY", "SCHEDULES", "READ BY", "LAST EVENT")
    for a in found:
        last = a.last_event_time.ToDatetime().isoformat() if a.HasField("last_event_time") else "-"
        table.add_row(
            a.uri,
            _tasks(list(a.producers)),
            ", ".join(a.scheduled_dags) or "-",
            _tasks(list(a.readers)),
            last,
        )
    return table


def events_table(found: list[apb.AssetEvent]) -> Table:
    table = Table("ID", "URI", "SOURCE", "FROM", "CREATED", "CONSUMED BY")
    for e in found:
        origin = {
            "task": f"dags/{e.source_dag_id}/runs/{e.source_run_id}/tasks/{e.source_task_id}",
            "watcher": e.source_watcher,
        }.get(e.source, "-")
        table.add_row(
            str(e.id),
            e.uri,
            e.source,
            origin,
            e.create_time.ToDatetime().isoformat(),
            ", ".join(e.consumed_by) or "-",
        )
    return table
