"""What every ``schedctl`` command shares: the app, the api client, errors, exit codes and output.

Exit codes: 0 success; 1 a waited-for run (or backfill) failed; 2 usage or rejected input; 3 not
found; 4 not authenticated or not allowed; 5 the api could not be reached (or refused the TLS
handshake); 6 a wait timed out.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, NoReturn

import grpc
import typer
from rich.markup import escape

from schedctl import contexts, output
from schedctl.client import ApiClient
from schedd.v1 import api_pb2, resources_pb2 as pb
from schedd_core.errors import InvalidArgument
from schedd_core.limits import MAX_PAGE_SIZE
from schedd_rpc.tls import ClientTLS

EXIT_RUN_FAILED = 1
EXIT_REJECTED = 2
EXIT_NOT_FOUND = 3
EXIT_AUTH = 4
EXIT_UNAVAILABLE = 5
EXIT_WAIT_TIMED_OUT = 6


class Format(StrEnum):
    table = "table"
    wide = "wide"
    json = "json"
    yaml = "yaml"
    name = "name"


class State:
    client: ApiClient
    format: Format


# Plain (click) help: paragraphs are re-flowed as wholes and flags show no value placeholder.
app = typer.Typer(
    help="Control a schedd cluster through its api.", no_args_is_help=True, rich_markup_mode=None
)
state = State()


DEFAULT_API = "127.0.0.1:50051"


@app.callback()
def _global(
    api: Annotated[
        str | None, typer.Option(envvar="SCHEDD_API", help=f"api address host:port [default: {DEFAULT_API}]")
    ] = None,
    output_format: Annotated[
        Format, typer.Option("--output", "-o", help="table, wide, json, yaml or name")
    ] = Format.table,
    timeout: Annotated[float, typer.Option(help="seconds per request")] = 10.0,
    token: Annotated[
        str | None,
        typer.Option(
            envvar="SCHEDCTL_TOKEN", help="bearer token (schedctl tokens create)", show_default=False
        ),
    ] = None,
    tls_ca: Annotated[
        str | None,
        typer.Option(envvar="SCHEDCTL_TLS_CA", help="use TLS; the CA that signed the api's certificate"),
    ] = None,
    tls_cert: Annotated[
        str | None, typer.Option(envvar="SCHEDCTL_TLS_CERT", help="client certificate (mutual TLS)")
    ] = None,
    tls_key: Annotated[str | None, typer.Option(envvar="SCHEDCTL_TLS_KEY", help="its key")] = None,
    context: Annotated[
        str | None, typer.Option(envvar="SCHEDCTL_CONTEXT", help="a named context of schedctl's config file")
    ] = None,
) -> None:
    """Settings come from the flags, then the environment, then the context (``schedctl.contexts``)."""
    try:
        settings = contexts.load().context(context)
        chosen_token = token if token is not None else contexts.token_of(settings)
    except contexts.ConfigError as exc:
        fail(EXIT_REJECTED, str(exc))
    address = api or settings.get("api") or DEFAULT_API
    try:
        tls = ClientTLS.from_values(
            tls_ca if tls_ca is not None else contexts.path_of(settings, "tls-ca"),
            tls_cert if tls_cert is not None else contexts.path_of(settings, "tls-cert"),
            tls_key if tls_key is not None else contexts.path_of(settings, "tls-key"),
            prefix="--tls-",
        )
    except InvalidArgument as exc:
        fail(EXIT_REJECTED, f"{exc.field.lower()} {exc.problem}")
    state.client = ApiClient(address, timeout=timeout, token=chosen_token, tls=tls)
    state.format = output_format


OutputOption = Annotated[
    Format | None,
    typer.Option("--output", "-o", help="table, wide, json, yaml or name (may also precede the command)"),
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
        report(exc)


def report(exc: grpc.RpcError) -> NoReturn:
    """Exit with the code and message for a failed call."""
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


def collect(method: object, request: Any, field: str, limit: int | None = None) -> list[Any]:
    """Every item of a List call, page after page (at most ``limit``)."""
    found: list[Any] = []
    while limit is None or len(found) < limit:
        request.page_size = MAX_PAGE_SIZE if limit is None else min(MAX_PAGE_SIZE, limit - len(found))
        resp = call(method, request)
        found.extend(getattr(resp, field))
        if not resp.next_page_token:  # type: ignore[attr-defined]
            break
        request.page_token = resp.next_page_token  # type: ignore[attr-defined]
    return found


def show(message: object, table: object, *, empty: str = "") -> None:
    """Print ``message`` (a message or a list of them) in the chosen format; ``table`` is what the
    table formats print, ``empty`` the line they print instead for an empty list."""
    if state.format is Format.json:
        print(output.as_json(message))  # type: ignore[arg-type]
    elif state.format is Format.yaml:
        print(output.as_yaml(message), end="")  # type: ignore[arg-type]
    elif state.format is Format.name:
        names = output.as_names(message)  # type: ignore[arg-type]
        if names:
            print(names)
    elif isinstance(message, list) and not message and empty:
        output.console.print(empty, highlight=False)
    else:
        output.console.print(table)


def wide() -> bool:
    return state.format is Format.wide


#: The run id that names a DAG's newest run (``DAG/@latest``); the api resolves it.
LATEST_RUN = "@latest"

RUN_HELP = "DAG/RUN_ID or dags/DAG/runs/RUN_ID; RUN_ID @latest: the DAG's newest run"


def run_name(ref: str) -> str:
    """Accept ``dags/D/runs/R`` or the short ``D/R``; ``R`` may be ``@latest``."""
    if ref.startswith("dags/"):
        return ref
    dag_id, sep, run_id = ref.partition("/")
    if not sep:
        fail(EXIT_REJECTED, f"RUN {ref!r} must be 'DAG/RUN_ID' or 'dags/DAG/runs/RUN_ID'")
    return f"dags/{dag_id}/runs/{run_id}"


def resolved_run_name(ref: str) -> str:
    """The name of the run ``ref`` means, with ``@latest`` resolved to the DAG's newest run at this
    moment (one GetRun), said on standard error. For commands that change a run or make several
    calls: they act on that run, even if a newer one is created meanwhile."""
    name = run_name(ref)
    if not name.endswith("/runs/" + LATEST_RUN):
        return name
    found = call(state.client.runs.GetRun, api_pb2.GetRunRequest(name=name))
    assert isinstance(found, pb.DagRun)
    output.err_console.print(f"{ref} is {found.name}", highlight=False)
    return found.name
