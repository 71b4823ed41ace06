"""Applying the schema migrations programmatically (``schedd-migrate`` and the test fixtures)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from alembic import command
from alembic.config import Config

MIGRATIONS_DIR = Path(__file__).parent / "migrations"


def alembic_config(database_url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.set_main_option("sqlalchemy.url", database_url)
    return config


def upgrade(database_url: str, revision: str = "head") -> None:
    """Bring the database to ``revision``.

    Safe to run from several processes at once: DDL is transactional in PostgreSQL and the
    migration environment takes an advisory lock first.
    """
    command.upgrade(alembic_config(database_url), revision)


async def upgrade_async(database_url: str, revision: str = "head") -> None:
    await asyncio.to_thread(upgrade, database_url, revision)


def main() -> None:
    """``schedd-migrate [URL]``: migrate the database at URL (default: $SCHEDD_DATABASE_URL) to head."""
    import os
    import sys

    url = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("SCHEDD_DATABASE_URL", "")
    if not url:
        sys.exit("schedd-migrate: give a database URL or set SCHEDD_DATABASE_URL")
    upgrade(url)


if __name__ == "__main__":
    main()
