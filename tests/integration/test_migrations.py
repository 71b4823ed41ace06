"""The migrations go up to head, all the way down, and up again on a real PostgreSQL."""

from __future__ import annotations

import asyncio

import asyncpg  # type: ignore[import-untyped, unused-ignore]
import pytest
from alembic import command

from schedd_core.database_url import asyncpg_dsn
from schedd_store.migrate import alembic_config

pytestmark = pytest.mark.integration


async def _tables(url: str) -> set[str]:
    conn = await asyncpg.connect(asyncpg_dsn(url))
    try:
        rows = await conn.fetch("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
    finally:
        await conn.close()
    return {r["tablename"] for r in rows}


def test_upgrade_downgrade_upgrade(fresh_database_url: str) -> None:
    config = alembic_config(fresh_database_url)
    command.upgrade(config, "head")
    at_head = asyncio.run(_tables(fresh_database_url))
    assert {"dags", "dag_runs", "task_instances", "task_attempts", "scheduler_fence", "outbox"} <= at_head
    command.downgrade(config, "base")
    assert asyncio.run(_tables(fresh_database_url)) == {"alembic_version"}
    command.upgrade(config, "head")
    assert asyncio.run(_tables(fresh_database_url)) == at_head
