"""Waiting for a PostgreSQL server this process started to accept connections (for
:class:`schedd_devstack.postgres.LocalPostgres`).

Ready means: it accepts a TCP login as the superuser, it is the server of the data directory we
started (not another PostgreSQL that held the port), and the database ``schedd`` exists (created
when missing). Bounded by a deadline; an exit of the server during the wait is
:class:`ServerExited`, for the caller to read its log.
"""

from __future__ import annotations

import asyncio
import subprocess
import time
from pathlib import Path

import asyncpg  # type: ignore[import-untyped, unused-ignore]  # no stubs; not in the mypy overrides

from schedd_devstack.binaries import DevstackError
from schedd_devstack.pg_databases import DATABASE, SUPERUSER, quote_ident
from schedd_devstack.ports import LOCALHOST


class ServerExited(Exception):
    def __init__(self, returncode: int) -> None:
        super().__init__(f"exit code {returncode}")
        self.returncode = returncode


async def wait_ready(
    proc: subprocess.Popen[bytes], port: int, data_dir: Path, password: str, deadline: float
) -> None:
    """Poll until the server we started accepts TCP connections, then make sure ``schedd`` exists."""
    last_error: BaseException | None = None
    while True:
        if proc.poll() is not None:
            raise ServerExited(proc.returncode)
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise DevstackError(f"PostgreSQL did not accept connections in time (last error: {last_error!r})")
        try:
            conn = await asyncpg.connect(
                host=LOCALHOST,
                port=port,
                user=SUPERUSER,
                password=password,
                database="postgres",
                ssl=False,
                timeout=min(2.0, remaining),
            )
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
            last_error = exc
            await asyncio.sleep(0.05)
            continue
        try:
            served = await conn.fetchval("SHOW data_directory")
            if served != str(data_dir):  # data_dir is resolved, and postgres reports the -D path as given
                raise DevstackError(f"port {port} is served by another PostgreSQL (data directory {served})")
            if not await conn.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", DATABASE):
                await conn.execute(f"CREATE DATABASE {quote_ident(DATABASE)}")
        finally:
            await conn.close()
        return
