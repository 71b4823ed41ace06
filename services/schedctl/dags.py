"""``schedctl dags``: register, list, pause and unpause DAGs, and list their next runs."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Annotated

import typer

from schedctl import output
from schedctl.cli import (
    EXIT_REJECTED,
    Format,
    OutputOption,
    app,
    call,
    fail,
    show,
    state,
    use_format,
)
from schedctl.specfile import SpecFileError, load_specs
from schedd.v1 import api_pb2
from schedd.v1 import resources_pb2 as pb

dags_app = typer.Typer(help="Register and inspect DAGs.", no_args_is_help=True)
app.add_typer(dags_app, name="dags")


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


@dags_app.command("next-runs")
def dags_next_runs(
    dag_id: Annotated[str, typer.Argument(help="the DAG")],
    count: Annotated[int, typer.Option("--count", "-n", help="how many (at most 100)")] = 5,
    output_format: OutputOption = None,
) -> None:
    """The logical dates and data intervals of the DAG's next scheduled runs."""
    use_format(output_format)
    resp = call(
        state.client.dags.ListNextRuns, api_pb2.ListNextRunsRequest(name=f"dags/{dag_id}", count=count)
    )
    assert isinstance(resp, api_pb2.ListNextRunsResponse)
    show(list(resp.intervals), output.intervals_table(list(resp.intervals)))
