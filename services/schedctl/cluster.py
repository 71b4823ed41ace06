"""``schedctl workers``, ``schedctl pools`` and ``schedctl leader``: the cluster's parts."""

from __future__ import annotations

import importlib.metadata
import json
from typing import Annotated

import typer
import yaml

from schedctl import output
from schedctl.cli import (
    Format,
    OutputOption,
    app,
    call,
    collect,
    show,
    state,
    use_format,
)
from schedd.v1 import api_pb2

workers_app = typer.Typer(help="Inspect and drain workers.", no_args_is_help=True)
pools_app = typer.Typer(help="List and size pools.", no_args_is_help=True)
app.add_typer(workers_app, name="workers")
app.add_typer(pools_app, name="pools")


@workers_app.command("list")
def workers_list(
    all_workers: Annotated[bool, typer.Option("--all", help="include workers that left")] = False,
    output_format: OutputOption = None,
) -> None:
    """List workers with their queues, load and last heartbeat."""
    use_format(output_format)
    request = api_pb2.ListWorkersRequest(include_gone=all_workers)
    workers: list[api_pb2.Worker] = collect(state.client.workers.ListWorkers, request, "workers")
    show(workers, output.workers_table(workers), empty="no workers")


@workers_app.command("drain")
def workers_drain(
    worker_id: Annotated[str, typer.Argument(help="the worker's id")],
    output_format: OutputOption = None,
) -> None:
    """Ask a worker to stop taking work, finish (or hand back) what it runs, and exit."""
    use_format(output_format)
    resp = call(state.client.workers.DrainWorker, api_pb2.DrainWorkerRequest(name=f"workers/{worker_id}"))
    assert isinstance(resp, api_pb2.Worker)
    running = "1 attempt" if resp.running == 1 else f"{resp.running} attempts"
    show(resp, f"drain requested for worker {resp.worker_id} ({running} running)")


@pools_app.command("list")
def pools_list(output_format: OutputOption = None) -> None:
    """List pools with their size, the slots in use and the task instances waiting."""
    use_format(output_format)
    resp = call(state.client.pools.ListPools, api_pb2.ListPoolsRequest())
    assert isinstance(resp, api_pb2.ListPoolsResponse)
    show(list(resp.pools), output.pools_table(list(resp.pools)), empty="no pools")


@pools_app.command("set")
def pools_set(
    pool: Annotated[str, typer.Argument(help="the pool's name")],
    slots: Annotated[int, typer.Argument(help="how many slots")],
    description: Annotated[str | None, typer.Option(help="what the pool is for; default: keep")] = None,
    backfill_share: Annotated[
        float | None,
        typer.Option(
            help="share of the slots (0..1) backfill runs may hold while other runs wait; default: keep "
            "(0.5 for a new pool)"
        ),
    ] = None,
    output_format: OutputOption = None,
) -> None:
    """Create a pool or change its size (and its backfill share)."""
    use_format(output_format)
    request = api_pb2.SetPoolRequest(pool=pool, slots=slots)
    if description is not None:
        request.description = description
    if backfill_share is not None:
        request.backfill_share = backfill_share
    resp = call(state.client.pools.SetPool, request)
    assert isinstance(resp, api_pb2.Pool)
    slots_text = "1 slot" if resp.slots == 1 else f"{resp.slots} slots"
    show(resp, f"pool {resp.pool}: {slots_text}, backfills {resp.backfill_share:.0%} while others wait")


@app.command("leader")
def leader(output_format: OutputOption = None) -> None:
    """Show which scheduler leads, since when, its fencing token, and the standbys (exit 2 naming the
    problem when the leader key holds a malformed value)."""
    use_format(output_format)
    resp = call(state.client.cluster.GetLeader, api_pb2.GetLeaderRequest())
    assert isinstance(resp, api_pb2.Leader)
    show(resp, output.leader_table(resp))


@app.command("version")
def version(output_format: OutputOption = None) -> None:
    """The versions of schedctl and of the api it talks to."""
    use_format(output_format)
    resp = call(state.client.cluster.GetVersion, api_pb2.GetVersionRequest())
    assert isinstance(resp, api_pb2.Version)
    client = importlib.metadata.version("schedd")
    if state.format in (Format.json, Format.yaml):
        both = {"client": client, "server": output.as_data(resp)}
        print(json.dumps(both, indent=2) if state.format is Format.json else yaml.safe_dump(both).rstrip())
        return
    show(resp, f"schedctl {client}\napi      {resp.version} ({resp.api}, schema {resp.schema_revision})")
