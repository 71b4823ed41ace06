"""What every ``schedctl`` command shares: the app, the api client, errors, exit codes and output.

Exit codes: 0 success; 1 a waited-for run (or backfill) failed; 2 usage or rejected input; 3 not
found; 4 not authenticated or not allowed; 5 the api could not be reached (or refused the TLS
handshake); 6 a wait timed out.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, NoReturn

import grpc
import typer
from rich.markup import escape

from schedctl import output
from schedctl.client import ApiClient
from schedd_core.errors import InvalidArgument
from schedd_rpc.tls import ClientTLS

EXIT_RUN_FAILED = 1
EXIT_REJECTED = 2
EXIT_NOT_FOUND = 3
EXIT_AUTH = 4
EXIT_UNAVAILABLE = 5
EXIT_WAIT_TIMED_OUT = 6


class Format(StrEnum):
    table = "table"
    json = "json"


class State:
    client: ApiClient
    format: Format


app = typer.Typer(help="Control a schedd cluster through its api.", no_args_is_help=True)
state = State()


@app.callback()
def _global(
    api: Annotated[str, typer.Option(envvar="SCHEDD_API", help="api address host:port")] = "127.0.0.1:50051",
    output_format: Annotated[Format, typer.Option("--output", "-o", help="table or json")] = Format.table,
    timeout: Annotated[float, typer.Option(help="seconds per request")] = 10.0,
    token: Annotated[
        str,
        typer.Option(
            envvar="SCHEDCTL_TOKEN", help="bearer token (schedctl tokens create)", show_default=False
        ),
    ] = "",
    tls_ca: Annotated[
        str, typer.Option(envvar="SCHEDCTL_TLS_CA", help="use TLS; the CA that signed the api's certificate")
    ] = "",
    tls_cert: Annotated[
        str, typer.Option(envvar="SCHEDCTL_TLS_CERT", help="client certificate (mutual TLS)")
    ] = "",
    tls_key: Annotated[str, typer.Option(envvar="SCHEDCTL_TLS_KEY", help="its key")] = "",
) -> None:
    try:
        tls = ClientTLS.from_values(tls_ca, tls_cert, tls_key, prefix="--tls-")
    except InvalidArgument as exc:
        fail(EXIT_REJECTED, f"{exc.field.lower()} {exc.problem}")
    state.client = ApiClient(api, timeout=timeout, token=token, tls=tls)
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
        if code == grpc.StatusCode.UNAUTHENTICATED:
            fail(EXIT_AUTH, f"{code.name}: {details} (give a token with --token or SCHEDCTL_TOKEN)")
        if code == grpc.StatusCode.PERMISSION_DENIED:
            fail(EXIT_AUTH, f"{code.name}: {details}")
        if code == grpc.StatusCode.NOT_FOUND:
            fail(EXIT_NOT_FOUND, f"{code.name}: {details}")
        if code == grpc.StatusCode.UNIMPLEMENTED:
            fail(EXIT_REJECTED, f"{code.name}: {details} (is {state.client.address} a schedd api?)")
        fail(EXIT_REJECTED, f"{code.name}: {details}")


def show(message: object, table: object) -> None:
    if state.format is Format.json:
        print(output.as_json(message))  # type: ignore[arg-type]
    else:
        output.console.print(table)


def run_name(ref: str) -> str:
    """Accept ``dags/D/runs/R`` or the short ``D/R``."""
    if ref.startswith("dags/"):
        return ref
    dag_id, sep, run_id = ref.partition("/")
    if not sep:
        fail(EXIT_REJECTED, f"RUN {ref!r} must be 'DAG/RUN_ID' or 'dags/DAG/runs/RUN_ID'")
    return f"dags/{dag_id}/runs/{run_id}"
