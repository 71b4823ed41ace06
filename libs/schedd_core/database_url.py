"""The two spellings of a PostgreSQL address: SQLAlchemy's URL and the DSN asyncpg connects with."""

from __future__ import annotations


def asyncpg_dsn(database_url: str) -> str:
    """The plain libpq-style DSN asyncpg expects, from a SQLAlchemy URL (any other URL unchanged)."""
    return database_url.replace("postgresql+asyncpg://", "postgresql://", 1)
