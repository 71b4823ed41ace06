"""Connections as Airflow writes them (fields, URIs, JSON) and the built-in secrets backends: the
environment (``SCHEDD_VAR_``, ``SCHEDD_CONN_``) and a directory of mounted files."""

from __future__ import annotations

from pathlib import Path

import pytest

from schedd_auth.secret_backends import EnvironmentBackend, FilesBackend, backends_from_env
from schedd_core.connections import ConnectionValue, check_grants, check_name, check_value
from schedd_core.errors import InvalidArgument


def test_a_connection_uri_round_trips() -> None:
    value = ConnectionValue.from_uri("uri", "postgres://etl:p%40ss@db.example:5432/analytics?sslmode=require")
    assert (value.conn_type, value.host, value.login, value.password) == (
        "postgres",
        "db.example",
        "etl",
        "p@ss",
    )
    assert (value.port, value.schema, value.extra) == (5432, "analytics", {"sslmode": "require"})
    assert ConnectionValue.from_uri("uri", value.get_uri()) == value
    nested = ConnectionValue(conn_type="http", host="h", extra={"headers": {"a": 1}})
    assert ConnectionValue.from_uri("uri", nested.get_uri()) == nested
    assert value.secrets() == ["p@ss", value.get_uri()]


@pytest.mark.parametrize(
    ("check", "field"),
    [
        (lambda: ConnectionValue.from_uri("c.uri", "no-scheme"), "c.uri"),
        (lambda: ConnectionValue.from_uri("c.uri", "pg://h:notaport"), "c.uri"),
        (lambda: ConnectionValue.from_mapping("c", {"port": 70000}), "c.port"),
        (lambda: ConnectionValue.from_mapping("c", {"hostname": "x"}), "c.hostname"),
        (lambda: ConnectionValue.from_mapping("c", {"extra": "[1]"}), "c.extra"),
        (lambda: check_name("key", "a/b"), "key"),
        (lambda: check_name("key", ""), "key"),
        (lambda: check_value("v", "a\x00b"), "v"),
        (lambda: check_value("v", "x" * 70_000), "v"),
        (lambda: check_grants("dag_ids", ["ok", "not ok"]), "dag_ids[1]"),
    ],
)
def test_bad_input_names_the_field(check: object, field: str) -> None:
    with pytest.raises(InvalidArgument) as caught:
        check()  # type: ignore[operator]
    assert caught.value.field == field


def test_the_environment_backend_reads_airflow_style_names() -> None:
    backend = EnvironmentBackend(
        {"SCHEDD_VAR_API_KEY": "k", "SCHEDD_CONN_MY_DB": "mysql://u:p@h/d", "OTHER": "x"}
    )
    assert backend.variable("api_key") == "k"
    connection = backend.connection("my_db")
    assert connection is not None and connection.password == "p" and connection.schema == "d"
    assert backend.variable("other") is None and backend.connection("absent") is None


def test_the_files_backend_reads_mounted_files_and_nothing_outside(tmp_path: Path) -> None:
    (tmp_path / "variables").mkdir()
    (tmp_path / "connections").mkdir()
    (tmp_path / "variables" / "token").write_text("abc\n")
    (tmp_path / "connections" / "warehouse").write_text("postgres://u:pw@h:5432/db\n")
    (tmp_path / "connections" / "api").write_text(
        '{"conn_type": "http", "host": "api.example", "password": "x"}'
    )
    (tmp_path / "secret").write_text("outside")
    backend = FilesBackend(tmp_path)
    assert backend.variable("token") == "abc"
    warehouse = backend.connection("warehouse")
    assert warehouse is not None and warehouse.password == "pw"
    api = backend.connection("api")
    assert api is not None and api.host == "api.example"
    assert backend.variable("../secret") is None and backend.variable("..") is None
    assert backend.variable("absent") is None


def test_backends_come_in_order_environment_then_files(tmp_path: Path) -> None:
    backends = backends_from_env({"SCHEDD_SECRETS_DIR": str(tmp_path)})
    assert [type(b) for b in backends] == [EnvironmentBackend, FilesBackend]
    assert [type(b) for b in backends_from_env({})] == [EnvironmentBackend]
