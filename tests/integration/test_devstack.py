"""The dev stack starts real servers that accept real clients, and stops them without leftovers."""

from __future__ import annotations

import asyncio
import os
import secrets
import shutil
from pathlib import Path

import aetcd
import asyncpg  # type: ignore[import-untyped, unused-ignore]  # no stubs
import pytest

from schedd_coord.credentials import EtcdAuth, read_etcd_auth
from schedd_devstack import DevStack, LocalEtcd, LocalPostgres
from schedd_devstack.postgres import asyncpg_dsn
from schedd_devstack.stack import DATABASE_URL_ENV, ETCD_ENDPOINTS_ENV, make_base_dir

pytestmark = pytest.mark.integration


def _etcd_client(endpoints: str, auth: EtcdAuth | None = None) -> aetcd.Client:
    host, _, port = endpoints.split(",")[0].strip().rpartition(":")
    if auth is None:
        return aetcd.Client(host=host, port=int(port))
    return aetcd.Client(host=host, port=int(port), username=auth.user, password=auth.password)


def _process_exists(pid: int) -> bool:
    """True if ``pid`` names a live (non-zombie) process."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"


def _children_of(pid: int) -> list[int]:
    children = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == pid:
            children.append(int(stat.parent.name))
    return children


async def _fetchval(url: str, query: str) -> object:
    conn = await asyncpg.connect(asyncpg_dsn(url))
    try:
        return await conn.fetchval(query)
    finally:
        await conn.close()


async def test_database_answers_select_1(database_url: str) -> None:
    assert await _fetchval(database_url, "SELECT 1") == 1


async def test_etcd_put_then_get(etcd_endpoints: str) -> None:
    key = f"/schedd-test/{secrets.token_hex(8)}".encode()
    client = _etcd_client(etcd_endpoints, read_etcd_auth(os.environ))  # the session etcd's root
    try:
        await client.put(key, b"v")
        result = await client.get(key)
        assert result is not None
        assert result.value == b"v"
    finally:
        await client.close()


async def test_fresh_database_is_empty_and_distinct(database_url: str, fresh_database_url: str) -> None:
    name = await _fetchval(fresh_database_url, "SELECT current_database()")
    assert isinstance(name, str) and name.startswith("t_")
    assert name != await _fetchval(database_url, "SELECT current_database()")
    tables = await _fetchval(
        fresh_database_url,
        "SELECT count(*) FROM pg_tables WHERE schemaname NOT IN ('pg_catalog', 'information_schema')",
    )
    assert tables == 0

    conn = await asyncpg.connect(asyncpg_dsn(fresh_database_url))
    try:
        await conn.execute("CREATE TABLE only_here (x int)")
    finally:
        await conn.close()
    assert await _fetchval(database_url, "SELECT to_regclass('public.only_here') IS NULL") is True


async def test_fresh_databases_are_dropped_after_use(database_url: str) -> None:
    leftovers = await _fetchval(database_url, "SELECT count(*) FROM pg_database WHERE datname LIKE 't\\_%'")
    # The previous test's database is gone; only ones of concurrently running sessions could remain.
    if not os.environ.get(DATABASE_URL_ENV):
        assert leftovers == 0


def test_local_postgres_restarts_and_leaves_no_processes() -> None:
    base_dir = make_base_dir("schedd-test-pg-")
    server = LocalPostgres()
    pids: list[int] = []
    try:
        for _ in range(2):
            server.start(base_dir, durable=False)
            assert server.running and server.pid is not None
            pids.append(server.pid)
            pids.extend(_children_of(server.pid))
            assert len(pids) > 1, "expected postgres auxiliary processes"
            server.stop()
            assert not server.running
    finally:
        server.stop()
    assert [pid for pid in pids if _process_exists(pid)] == []
    assert (base_dir / "pgdata" / "PG_VERSION").exists()  # data survives a stop
    shutil.rmtree(base_dir)


def test_local_postgres_starts_with_the_settings_it_is_given() -> None:
    base_dir = make_base_dir("schedd-test-pg-")
    server = LocalPostgres(settings={"work_mem": "7MB"})
    try:
        server.start(base_dir, durable=False)
        assert asyncio.run(_fetchval(server.url, "SHOW work_mem")) == "7MB"
    finally:
        server.stop()
    shutil.rmtree(base_dir)


def test_local_postgres_recovers_after_kill() -> None:
    base_dir = make_base_dir("schedd-test-pg-")
    server = LocalPostgres()
    try:
        server.start(base_dir, durable=False)
        pid = server.pid
        assert pid is not None
        children = _children_of(pid)
        server.kill()
        assert not _process_exists(pid)
        server.start(base_dir, durable=False)
        assert asyncio.run(_fetchval(server.url, "SELECT 1")) == 1
    finally:
        server.stop()
    assert [p for p in children if _process_exists(p)] == []
    shutil.rmtree(base_dir)


async def test_private_etcd_kill_and_restart_keeps_data(private_etcd: LocalEtcd) -> None:
    client = _etcd_client(private_etcd.endpoint)
    try:
        await client.put(b"/durable", b"1")
    finally:
        await client.close()
    pid = private_etcd.pid
    assert pid is not None
    endpoint = private_etcd.endpoint
    private_etcd.kill()
    assert not _process_exists(pid)
    private_etcd.start(private_etcd.base_dir)
    assert private_etcd.endpoint == endpoint  # same ports when still free
    client = _etcd_client(private_etcd.endpoint)
    try:
        result = await client.get(b"/durable")
        assert result is not None and result.value == b"1"
    finally:
        await client.close()


def test_devstack_env_and_cleanup() -> None:
    with DevStack(durable=False) as stack:
        env = stack.env()
        assert {DATABASE_URL_ENV, ETCD_ENDPOINTS_ENV} <= set(env)
        assert env["SCHEDD_ETCD_USER"] == "root"  # etcd has authentication on
        assert env[DATABASE_URL_ENV].startswith("postgresql+asyncpg://schedd:")  # a password: no trust
        assert "@127.0.0.1:" in env[DATABASE_URL_ENV]
        pids = [stack.postgres.pid, stack.etcd.pid]
        base_dir = stack.base_dir
        assert stack.dead() == []
    assert all(pid is not None and not _process_exists(pid) for pid in pids)
    assert not base_dir.exists()
