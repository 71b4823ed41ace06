"""``schedctl dags delete``, ``runs delete`` and ``pools delete``.

Each asks before deleting when standard input is a terminal, and needs ``--yes`` otherwise (a
script must say it means it). Each request carries a request id, so the audit log names it and a
retry of a deletion that succeeded does not answer NOT_FOUND.
"""

from __future__ import annotations

import sys
import uuid
from typing import Annotated

import typer

from schedctl import output
from schedctl.cli import (
    EXIT_REJECTED,
    RUN_HELP,
    OutputOption,
    call,
    fail,
    resolved_run_name,
    state,
    use_format,
)
from schedctl.cluster import pools_app
from schedctl.dags import dags_app
from schedctl.runs import runs_app
from schedd.v1 import api_pb2

YesOption = Annotated[bool, typer.Option("--yes", "-y", help="delete without asking")]


def _confirm(what: str, yes: bool) -> None:
    if yes:
        return
    if not sys.stdin.isatty():
        fail(EXIT_REJECTED, f"deleting {what} needs --yes when not asked on a terminal")
    if not typer.confirm(f"Delete {what}?", default=False, err=True):
        fail(EXIT_REJECTED, "not deleted")


@dags_app.command("delete")
def dags_delete(
    dag_id: Annotated[str, typer.Argument(help="the DAG")],
    cancel_runs: Annotated[
        bool,
        typer.Option("--cancel-runs", help="cancel its runs and backfills in flight first, in the same call"),
    ] = False,
    yes: YesOption = False,
    output_format: OutputOption = None,
) -> None:
    """Delete a DAG with its history: versions, runs, task instances, logs and backfills. Refused
    while it has runs queued or running or a backfill that has not ended, unless --cancel-runs:
    then those are cancelled and the DAG deleted at once (all or nothing)."""
    use_format(output_format)
    what = f"dag {dag_id!r} and all its history"
    _confirm(what + (", cancelling its runs in flight" if cancel_runs else ""), yes)
    request = api_pb2.DeleteDagRequest(
        name=f"dags/{dag_id}", request_id=str(uuid.uuid4()), cancel_runs=cancel_runs
    )
    call(state.client.dags.DeleteDag, request)
    output.console.print(f"dag {dag_id} deleted", highlight=False)


@runs_app.command("delete")
def runs_delete(
    run: Annotated[str, typer.Argument(help=RUN_HELP)],
    yes: YesOption = False,
    output_format: OutputOption = None,
) -> None:
    """Delete a finished run with its task instances and logs (cancel a running one first). RUN_ID
    @latest is the DAG's newest run when the command starts, named before it is deleted."""
    use_format(output_format)
    name = resolved_run_name(run)
    _confirm(f"run {name!r}", yes)
    call(state.client.runs.DeleteRun, api_pb2.DeleteRunRequest(name=name, request_id=str(uuid.uuid4())))
    output.console.print(f"{name} deleted", highlight=False)


@pools_app.command("delete")
def pools_delete(
    pool: Annotated[str, typer.Argument(help="the pool")],
    yes: YesOption = False,
    output_format: OutputOption = None,
) -> None:
    """Delete a pool that no task waits for and no DAG names (default_pool stays)."""
    use_format(output_format)
    _confirm(f"pool {pool!r}", yes)
    request = api_pb2.DeletePoolRequest(name=f"pools/{pool}", request_id=str(uuid.uuid4()))
    call(state.client.pools.DeletePool, request)
    output.console.print(f"pool {pool} deleted", highlight=False)
