"""Creating the async engine. Nothing here reads configuration: callers pass the URL."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine


def make_engine(
    database_url: str,
    *,
    pool_size: int = 5,
    application_name: str = "schedd",
    server_settings: dict[str, str] | None = None,
) -> AsyncEngine:
    """An engine over asyncpg. ``database_url`` is ``postgresql+asyncpg://...``.

    ``server_settings`` are PostgreSQL settings for every connection of the engine, e.g.
    ``idle_in_transaction_session_timeout``.
    """
    return create_async_engine(
        database_url,
        pool_size=pool_size,
        max_overflow=pool_size,
        # No ping per checkout: it would cost a round trip on every transaction of the hot path.
        # A connection that broke fails its transaction, is discarded, and the caller retries.
        pool_pre_ping=False,
        pool_recycle=3600,
        connect_args={"server_settings": {"application_name": application_name, **(server_settings or {})}},
    )


def asyncpg_dsn(database_url: str) -> str:
    """The plain libpq-style DSN asyncpg expects, from a SQLAlchemy URL."""
    return database_url.replace("postgresql+asyncpg://", "postgresql://", 1)
