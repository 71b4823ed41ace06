"""Alembic environment: runs migrations over the async engine given by ``sqlalchemy.url``."""

from __future__ import annotations

import asyncio

from alembic import context
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import create_async_engine


def _run(connection: Connection) -> None:
    context.configure(connection=connection, target_metadata=None, transactional_ddl=True)
    with context.begin_transaction():
        # Serialise concurrent migration runners (several services starting at once).
        connection.exec_driver_sql("SELECT pg_advisory_xact_lock(7461001)")
        context.run_migrations()


async def _main(url: str) -> None:
    engine = create_async_engine(url)
    try:
        async with engine.connect() as conn:
            await conn.run_sync(_run)
            await conn.commit()
    finally:
        await engine.dispose()


def run() -> None:
    connection = context.config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    url = context.config.get_main_option("sqlalchemy.url")
    assert url, "sqlalchemy.url must be set"
    asyncio.run(_main(url))


if context.is_offline_mode():
    raise SystemExit("offline migrations are not supported; run against a database")
run()
