"""Attacks of a host neighbour or a network peer on what a local stack keeps: the admin token file,
the metrics endpoint, and the PostgreSQL server's logins."""

from __future__ import annotations

import asyncio
import os
import socket
import stat
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import asyncpg  # type: ignore[import-untyped, unused-ignore]
import pytest
from prometheus_client import CollectorRegistry, Counter

from schedd_devstack import LocalPostgres
from schedd_devstack.credentials import write_secret
from schedd_devstack.pg_auth import PASSWORD_FILE
from schedd_devstack.ports import free_port
from schedd_devstack.postgres import SUPERUSER, TASK_ROLE, asyncpg_dsn, ensure_task_role
from schedd_store.migrate import upgrade_async
from schedd_telemetry import exposition

pytestmark = pytest.mark.integration

CONNECT_TIMEOUT = 5.0


# -- the admin token file ---------------------------------------------------------------------------


def test_a_neighbour_holding_the_token_file_open_reads_no_token(tmp_path: Path) -> None:
    """A reader that opened the file before the token was written (the window between creating a
    file with the default mode and making it 0600) must not get the token."""
    path = tmp_path / "admin-token"
    path.write_text("")
    path.chmod(0o644)
    with path.open() as neighbour:
        write_secret(path, "sdt_secret\n")
        assert neighbour.read() == ""
    assert path.read_text() == "sdt_secret\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_the_token_file_is_private_from_its_creation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a later chmod (as if the writer died right after creating it) the file is still 0600."""
    monkeypatch.setattr(os, "chmod", lambda *args, **kwargs: None)
    monkeypatch.setattr(Path, "chmod", lambda *args, **kwargs: None)
    previous = os.umask(0)
    try:
        write_secret(tmp_path / "admin-token", "sdt_secret\n")
    finally:
        os.umask(previous)
    assert stat.S_IMODE((tmp_path / "admin-token").stat().st_mode) == 0o600


def test_a_symlink_planted_as_the_token_file_is_not_followed(tmp_path: Path) -> None:
    planted = tmp_path / "neighbour-owned"
    planted.write_text("")
    (tmp_path / "admin-token").symlink_to(planted)
    write_secret(tmp_path / "admin-token", "sdt_secret\n")
    assert planted.read_text() == ""
    assert not (tmp_path / "admin-token").is_symlink()


# -- /metrics ---------------------------------------------------------------------------------------


def _outward_address() -> str:
    """An address of this host that is not loopback (the one a network peer would connect to)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # no packet is sent: this only picks the route
            address = str(probe.getsockname()[0])
        except OSError:
            address = ""
    if not address or address.startswith("127."):
        pytest.skip("this host has no address but loopback: no network peer can be simulated")
    return address


def _scrape(host: str, port: int) -> str:
    with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=CONNECT_TIMEOUT) as response:
        return str(response.read().decode())


def _registry() -> CollectorRegistry:
    registry = CollectorRegistry()
    Counter("schedd_exposure_probe", "a metric only this test serves", registry=registry).inc()
    return registry


@pytest.mark.parametrize("form", ["{port}", ":{port}"])
def test_metrics_without_a_host_are_not_served_to_the_network(form: str) -> None:
    outward = _outward_address()
    port = free_port()
    exposition.serve(_registry(), form.format(port=port))
    assert "schedd_exposure_probe" in _scrape("127.0.0.1", port)
    with pytest.raises(OSError):
        _scrape(outward, port)


def test_metrics_on_an_explicit_address_are_served_there() -> None:
    outward = _outward_address()
    port = free_port()
    exposition.serve(_registry(), f"0.0.0.0:{port}")
    assert "schedd_exposure_probe" in _scrape(outward, port)


@pytest.mark.parametrize("address", ["", "host:", "9100x", "70000"])
def test_a_metrics_address_without_a_valid_port_is_refused_by_name(address: str) -> None:
    with pytest.raises(ValueError, match="port"):
        exposition.bind_address(address)


# -- the PostgreSQL server's logins -----------------------------------------------------------------


@pytest.fixture
def task_url(fresh_database_url: str) -> Iterator[str]:
    """The task role's URL on a migrated database of the tests' PostgreSQL."""
    asyncio.run(upgrade_async(fresh_database_url))
    yield ensure_task_role(fresh_database_url)


def as_user(url: str, user: str, password: str | None) -> str:
    """``url`` logging in as ``user`` with ``password`` (none at all with None)."""
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    login = user if password is None else f"{user}:{password}"
    return urlunsplit(parts._replace(netloc=f"{login}@{host}"))


def login(url: str) -> str:
    """The user ``url`` is logged in as, or why the server refused it."""

    async def connect() -> str:
        try:
            conn = await asyncpg.connect(asyncpg_dsn(url), timeout=CONNECT_TIMEOUT)
        except (asyncpg.InvalidPasswordError, asyncpg.InvalidAuthorizationSpecificationError) as exc:
            return f"refused: {exc}"
        try:
            return str(await conn.fetchval("SELECT current_user"))
        finally:
            await conn.close()

    return asyncio.run(connect())


def test_the_task_role_logs_in_as_itself(task_url: str) -> None:
    assert urlsplit(task_url).username == TASK_ROLE
    assert login(task_url) == TASK_ROLE


def test_the_task_roles_url_with_another_user_name_is_refused(task_url: str) -> None:
    password = urlsplit(task_url).password
    for user in (SUPERUSER, "postgres"):
        for attempt in (password, None, ""):
            outcome = login(as_user(task_url, user, attempt))
            assert outcome.startswith("refused"), f"{user} with {attempt!r} logged in as {outcome}"


def test_the_task_role_without_its_password_is_refused(task_url: str) -> None:
    assert login(as_user(task_url, TASK_ROLE, None)).startswith("refused")
    assert login(as_user(task_url, TASK_ROLE, "guess")).startswith("refused")


def hba_methods(server: LocalPostgres) -> list[str]:
    """The authentication method of every rule of the server's pg_hba.conf."""
    lines = (server.data_dir / "pg_hba.conf").read_text().splitlines()
    return [line.split()[-1] for line in lines if line.strip() and not line.lstrip().startswith("#")]


def test_the_server_trusts_no_connection_and_keeps_its_password_private(
    private_postgres: LocalPostgres,
) -> None:
    assert hba_methods(private_postgres) == ["scram-sha-256"] * 3
    assert stat.S_IMODE((private_postgres.base_dir / PASSWORD_FILE).stat().st_mode) == 0o600
    assert login(private_postgres.url) == SUPERUSER
    assert login(as_user(private_postgres.url, SUPERUSER, None)).startswith("refused")


def test_a_data_directory_that_trusted_every_connection_gets_a_password(
    private_postgres: LocalPostgres,
) -> None:
    """A cluster made before passwords (trust rules, no password file) is closed at its next start."""
    base_dir = private_postgres.base_dir
    private_postgres.stop()
    (private_postgres.data_dir / "pg_hba.conf").write_text(
        "local all all trust\nhost all all 127.0.0.1/32 trust\n"
    )
    (base_dir / PASSWORD_FILE).unlink()
    private_postgres.start(base_dir)
    assert hba_methods(private_postgres) == ["scram-sha-256"] * 3
    assert login(private_postgres.url) == SUPERUSER
    assert login(as_user(private_postgres.url, SUPERUSER, None)).startswith("refused")
