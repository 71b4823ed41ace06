"""``schedctl variables``, ``schedctl connections`` and ``schedctl secrets``: values tasks read.

Writing needs ``admin``; ``get`` shows a value only to a token of role ``secrets`` (others see the
name, description and grants). A value given as ``-`` is read from standard input, so it stays out
of the shell's history and the process list. ``import`` takes Airflow's JSON export formats.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from schedctl.cli import EXIT_REJECTED, Format, OutputOption, app, call, fail, show, state, use_format
from schedd.v1 import secrets_pb2 as spb
from schedd_auth.secret_box import new_key

variables_app = typer.Typer(
    help="Variables tasks read with Variable.get (admin writes).", no_args_is_help=True
)
connections_app = typer.Typer(
    help="Connections tasks read with Connection.get (admin writes).", no_args_is_help=True
)
secrets_app = typer.Typer(help="The encryption of variables and connections (admin).", no_args_is_help=True)
app.add_typer(variables_app, name="variables")
app.add_typer(connections_app, name="connections")
app.add_typer(secrets_app, name="secrets")

DagsOption = Annotated[
    list[str] | None, typer.Option("--dag", help="only tasks of this DAG may read it (repeat); default any")
]


def _value(text: str) -> str:
    return sys.stdin.read().removesuffix("\n") if text == "-" else text


def _load(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        fail(EXIT_REJECTED, f"{path}: cannot read it as JSON ({exc})")
    if not isinstance(data, dict):
        fail(EXIT_REJECTED, f"{path}: must be a JSON object (name -> value)")
    return data


def variables_table(items: list[spb.Variable]) -> Table:
    table = Table("KEY", "VALUE", "DAGS", "SOURCE", "DESCRIPTION")
    for v in items:
        table.add_row(v.key, v.value or "***", ",".join(v.dag_ids) or "any", v.source, v.description)
    return table


def connections_table(items: list[spb.Connection]) -> Table:
    table = Table("CONN ID", "TYPE", "HOST", "PORT", "LOGIN", "PASSWORD", "DAGS", "SOURCE")
    for c in items:
        password = c.password or ("***" if c.host or c.login else "")
        table.add_row(
            c.conn_id,
            c.conn_type,
            c.host,
            str(c.port or ""),
            c.login,
            password,
            ",".join(c.dag_ids) or "any",
            c.source,
        )
    return table


@variables_app.command("set")
def variables_set(
    key: str,
    value: Annotated[str, typer.Argument(help="the value, or - to read it from standard input")],
    description: str = "",
    dag: DagsOption = None,
    output_format: OutputOption = None,
) -> None:
    """Create or replace a variable."""
    use_format(output_format)
    variable = spb.Variable(key=key, value=_value(value), description=description, dag_ids=dag or [])
    resp = call(state.client.secrets.SetVariable, spb.SetVariableRequest(variable=variable))
    show(resp, f"variable {key} set")


@variables_app.command("get")
def variables_get(key: str, output_format: OutputOption = None) -> None:
    """A variable (its value only for a token of role secrets)."""
    use_format(output_format)
    resp = call(state.client.secrets.GetVariable, spb.GetVariableRequest(key=key))
    assert isinstance(resp, spb.Variable)
    show(resp, variables_table([resp]))


@variables_app.command("list")
def variables_list(output_format: OutputOption = None) -> None:
    """The stored variables: names, grants and descriptions (never values)."""
    use_format(output_format)
    resp = call(state.client.secrets.ListVariables, spb.ListVariablesRequest())
    assert isinstance(resp, spb.ListVariablesResponse)
    found = list(resp.variables)
    show(found, variables_table(found), empty="no variables")


@variables_app.command("delete")
def variables_delete(key: str, output_format: OutputOption = None) -> None:
    use_format(output_format)
    resp = call(state.client.secrets.DeleteVariable, spb.DeleteVariableRequest(key=key))
    show(resp, f"variable {key} deleted")


@variables_app.command("import")
def variables_import(path: Path, dag: DagsOption = None, output_format: OutputOption = None) -> None:
    """Set every variable of a JSON object ``{"key": value}`` (a value that is not a string is
    stored as its JSON), as Airflow's ``variables export`` writes it."""
    use_format(output_format)
    data = _load(path)
    stored = []
    for key, value in data.items():
        text = value if isinstance(value, str) else json.dumps(value)
        variable = spb.Variable(key=key, value=text, dag_ids=dag or [])
        stored.append(call(state.client.secrets.SetVariable, spb.SetVariableRequest(variable=variable)))
    show(stored, f"{len(stored)} variables imported")


def _connection(conn_id: str, fields: dict[str, Any], dag_ids: list[str]) -> spb.Connection:
    extra = fields.get("extra") or ""
    if not isinstance(extra, str):
        extra = json.dumps(extra)
    port = fields.get("port") or 0
    if not isinstance(port, int):
        fail(EXIT_REJECTED, f"connection {conn_id}: port must be a number")
    return spb.Connection(
        conn_id=conn_id,
        uri=str(fields.get("uri") or ""),
        conn_type=str(fields.get("conn_type") or ""),
        host=str(fields.get("host") or ""),
        login=str(fields.get("login") or ""),
        password=str(fields.get("password") or ""),
        schema=str(fields.get("schema") or ""),
        port=port,
        extra=extra,
        description=str(fields.get("description") or ""),
        dag_ids=dag_ids,
    )


@connections_app.command("set")
def connections_set(
    conn_id: str,
    uri: Annotated[
        str, typer.Option(help="an Airflow connection URI, or - to read it from standard input")
    ] = "",
    conn_type: str = "",
    host: str = "",
    login: str = "",
    password: Annotated[str, typer.Option(help="- reads it from standard input")] = "",
    schema: str = "",
    port: int = 0,
    extra: Annotated[str, typer.Option(help="a JSON object")] = "",
    description: str = "",
    dag: DagsOption = None,
    output_format: OutputOption = None,
) -> None:
    """Create or replace a connection, from a URI or from its fields."""
    use_format(output_format)
    fields = {
        "uri": _value(uri) if uri else "",
        "conn_type": conn_type,
        "host": host,
        "login": login,
        "password": _value(password) if password else "",
        "schema": schema,
        "port": port,
        "extra": extra,
        "description": description,
    }
    connection = _connection(conn_id, fields, dag or [])
    resp = call(state.client.secrets.SetConnection, spb.SetConnectionRequest(connection=connection))
    show(resp, f"connection {conn_id} set")


@connections_app.command("get")
def connections_get(conn_id: str, output_format: OutputOption = None) -> None:
    """A connection (its password and extra only for a token of role secrets)."""
    use_format(output_format)
    resp = call(state.client.secrets.GetConnection, spb.GetConnectionRequest(conn_id=conn_id))
    assert isinstance(resp, spb.Connection)
    show(resp, connections_table([resp]))


@connections_app.command("list")
def connections_list(output_format: OutputOption = None) -> None:
    use_format(output_format)
    resp = call(state.client.secrets.ListConnections, spb.ListConnectionsRequest())
    assert isinstance(resp, spb.ListConnectionsResponse)
    found = list(resp.connections)
    show(found, connections_table(found), empty="no connections")


@connections_app.command("delete")
def connections_delete(conn_id: str, output_format: OutputOption = None) -> None:
    use_format(output_format)
    resp = call(state.client.secrets.DeleteConnection, spb.DeleteConnectionRequest(conn_id=conn_id))
    show(resp, f"connection {conn_id} deleted")


@connections_app.command("import")
def connections_import(path: Path, dag: DagsOption = None, output_format: OutputOption = None) -> None:
    """Set every connection of a JSON object ``{"conn_id": {"conn_type": ..., "host": ...}}`` (or
    ``{"conn_id": "uri"}``), as Airflow's ``connections export`` writes it."""
    use_format(output_format)
    data = _load(path)
    stored = []
    for conn_id, fields in data.items():
        given = {"uri": fields} if isinstance(fields, str) else fields
        if not isinstance(given, dict):
            fail(EXIT_REJECTED, f"connection {conn_id}: must be a URI or an object of fields")
        connection = _connection(conn_id, given, dag or [])
        stored.append(
            call(state.client.secrets.SetConnection, spb.SetConnectionRequest(connection=connection))
        )
    show(stored, f"{len(stored)} connections imported")


@secrets_app.command("rotate")
def secrets_rotate(output_format: OutputOption = None) -> None:
    """Re-encrypt every stored value with the api's first key (after a new key was put first)."""
    use_format(output_format)
    resp = call(state.client.secrets.RotateSecrets, spb.RotateSecretsRequest())
    assert isinstance(resp, spb.RotateSecretsResponse)
    show(resp, f"re-encrypted {resp.variables} variables and {resp.connections} connections")


@secrets_app.command("new-key")
def secrets_new_key(output_format: OutputOption = None) -> None:
    """Print a new random encryption key (for SCHEDD_SECRETS_KEYS); nothing is sent."""
    use_format(output_format)
    key = new_key()
    if state.format is Format.json:
        print(json.dumps({"key": key}))
    elif state.format is Format.yaml:
        print(f"key: {key}")
    else:
        print(key)
