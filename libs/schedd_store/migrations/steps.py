"""Running a migration's SQL: one statement per ``op.execute`` (asyncpg prepares each, and a
prepared statement holds exactly one command)."""

from __future__ import annotations

from collections.abc import Iterable

from alembic import op


def execute_all(statements: Iterable[str]) -> None:
    for statement in statements:
        op.execute(statement)


def split_script(script: str) -> list[str]:
    """The statements of a script whose statements end with ``;`` at the end of a line."""
    return [part.strip() for part in script.split(";\n") if part.strip()]
