"""Databases and roles on a PostgreSQL server, for the tests and the local stack: URLs for asyncpg,
creating and dropping databases, and the login role transactional task code runs as.

Each call opens its own connection and closes it; callable from synchronous code whether or not an
event loop is running. Nothing here starts or stops a server (see :mod:`schedd_devstack.postgres`).
"""

from __future__ import annotations

from urllib.parse import unquote, urlsplit, urlunsplit

import asyncpg  # type: ignore[import-untyped, unused-ignore]  # no stubs; not in the mypy overrides

from schedd_devstack._process import run_coroutine_sync
from schedd_devstack.pg_auth import task_password

#: The superuser of a local server, and the database it always has.
SUPERUSER = "schedd"
DATABASE = "schedd"


def quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def asyncpg_dsn(url: str) -> str:
    """Turn a SQLAlchemy URL (``postgresql+asyncpg://...``) into a DSN asyncpg and libpq accept."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        raise ValueError(f"not a database URL: {url!r}")
    if scheme.split("+", 1)[0] in ("postgresql", "postgres"):
        return f"postgresql://{rest}"
    raise ValueError(f"not a PostgreSQL URL: {url!r}")


def with_database(url: str, database: str) -> str:
    """The same URL (scheme, user, host, query kept) naming another database."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{database}"))


def create_database(url: str, name: str) -> None:
    """Create the empty database ``name`` on the server ``url`` points at (sync; any thread).

    The connecting user needs CREATEDB. Fails if the database exists.
    """

    async def create() -> None:
        conn = await asyncpg.connect(asyncpg_dsn(url))
        try:
            await conn.execute(f"CREATE DATABASE {quote_ident(name)}")
        finally:
            await conn.close()

    run_coroutine_sync(create)


def drop_database(url: str, name: str) -> None:
    """Drop database ``name`` on the server ``url`` points at, disconnecting its sessions (PG 13+).

    Does nothing if it does not exist. ``url`` must name another database.
    """

    async def drop() -> None:
        conn = await asyncpg.connect(asyncpg_dsn(url))
        try:
            await conn.execute(f"DROP DATABASE IF EXISTS {quote_ident(name)} WITH (FORCE)")
        finally:
            await conn.close()

    run_coroutine_sync(drop)


#: The login role transactional task code runs as in a local stack: a member of ``schedd_tasks``
#: (migration 0008), so it may commit its attempt and nothing else of schedd's.
TASK_ROLE = "schedd_task_runner"


def ensure_task_role(url: str) -> str:
    """Create the local task login role (a member of ``schedd_tasks``) if missing, and return ``url``
    as that role. The database at ``url`` must be migrated; the connecting user needs CREATEROLE.

    When ``url`` carries a password, the role's password is set to the one derived from it
    (``schedd_devstack.pg_auth.task_password``) and the URL returned carries that one, never the
    owner's; without one, the role gets no password (the server's own rules decide its logins)."""
    parts = urlsplit(url)
    password = task_password(unquote(parts.password), TASK_ROLE) if parts.password else None

    async def ensure() -> None:
        conn = await asyncpg.connect(asyncpg_dsn(url))
        try:
            await conn.execute(
                "DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = "
                f"'{TASK_ROLE}') THEN CREATE ROLE {TASK_ROLE} LOGIN IN ROLE schedd_tasks; END IF; END $$"
            )
            if password is not None:  # hex digits: nothing to quote
                await conn.execute(f"ALTER ROLE {TASK_ROLE} WITH PASSWORD '{password}'")
        finally:
            await conn.close()

    run_coroutine_sync(ensure)
    host = parts.netloc.rpartition("@")[2]
    login = TASK_ROLE if password is None else f"{TASK_ROLE}:{password}"
    return urlunsplit(parts._replace(netloc=f"{login}@{host}"))
