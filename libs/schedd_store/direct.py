"""Statements on asyncpg directly, for the transaction every finished task pays: applying results.

A chain's link is the registry's result transaction (``schedd_store.dispatch.apply_results``):
SQLAlchemy's asyncio adapter adds its own work to each statement, BEGIN and COMMIT of it. Here the
same statements of ``schedd_store.statements`` run on the asyncpg connection underneath a pooled
connection of the same engine (its pool, its server settings, its JSON codecs), compiled once for
asyncpg's numbered parameters (values bound by the statement itself, the transition guards,
included) and prepared once per connection by asyncpg's statement cache.

:class:`DirectConnection` answers ``execute(statement, params)`` with rows that read by attribute
and by ``_mapping`` like SQLAlchemy's, so the functions a result transaction calls take either.
What it does not give: SQLAlchemy's exception wrapping (asyncpg's own exceptions propagate;
``schedd_store.engine.is_transient`` knows them).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any, NamedTuple

import asyncpg
from sqlalchemy import TextClause
from sqlalchemy.engine import Dialect
from sqlalchemy.ext.asyncio import AsyncEngine


class _Compiled(NamedTuple):
    text: str
    names: tuple[str, ...]
    bound: dict[str, Any]


_COMPILED: dict[int, _Compiled] = {}


def _compiled(statement: TextClause, dialect: Dialect) -> _Compiled:
    # Statements are module constants: compiled once each, for the life of the process.
    found = _COMPILED.get(id(statement))
    if found is None:
        compiled = statement.compile(dialect=dialect)
        found = _COMPILED[id(statement)] = _Compiled(
            str(compiled), tuple(compiled.positiontup or ()), dict(compiled.params)
        )
    return found


class Row:
    """A row that reads by attribute and by ``_mapping``, as SQLAlchemy's rows do."""

    __slots__ = ("_mapping",)

    def __init__(self, record: asyncpg.Record) -> None:
        self._mapping = record

    def __getattr__(self, name: str) -> Any:
        try:
            return self._mapping[name]
        except KeyError:
            raise AttributeError(name) from None


class Rows:
    def __init__(self, records: Sequence[asyncpg.Record]) -> None:
        self._records = records

    def all(self) -> list[Row]:
        return [Row(r) for r in self._records]


class DirectConnection:
    """An asyncpg connection running ``schedd_store.statements`` (see the module docstring)."""

    def __init__(self, raw: asyncpg.Connection, dialect: Dialect) -> None:
        self._raw = raw
        self._dialect = dialect

    async def execute(self, statement: TextClause, parameters: Mapping[str, Any] | None = None) -> Rows:
        compiled = _compiled(statement, self._dialect)
        given = parameters or {}
        args = [given[n] if n in given else compiled.bound[n] for n in compiled.names]
        return Rows(await self._raw.fetch(compiled.text, *args))


@asynccontextmanager
async def transaction(engine: AsyncEngine) -> AsyncIterator[DirectConnection]:
    """A transaction on a connection of ``engine``'s pool, run on asyncpg directly: committed when
    the block ends, rolled back when it raises."""
    async with engine.connect() as conn:
        pooled = await conn.get_raw_connection()
        raw: asyncpg.Connection = pooled.driver_connection
        async with raw.transaction():
            yield DirectConnection(raw, engine.dialect)
