"""schedd_store.direct: statements of schedd_store.statements on asyncpg directly answer as through
SQLAlchemy, inside one transaction that commits with the block or rolls back with it."""

from __future__ import annotations

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from schedd_store import direct, statements as sql

pytestmark = pytest.mark.integration

_READ = text("SELECT CAST(:doc AS jsonb) AS doc, CAST(:ids AS bigint[]) AS ids, :name AS name")
_COUNT = text("SELECT count(*) AS n FROM pools WHERE name = :name")


async def test_rows_read_as_through_sqlalchemy(engine: AsyncEngine) -> None:
    params = {"doc": '{"a": [1, "x"]}', "ids": [3, 1], "name": "n"}
    async with engine.connect() as conn:
        expected = (await conn.execute(_READ, params)).one()
    async with direct.transaction(engine) as conn:
        (row,) = (await conn.execute(_READ, params)).all()
    assert (row.doc, row.ids, row.name) == (expected.doc, expected.ids, expected.name)
    assert row._mapping["doc"] == {"a": [1, "x"]}
    with pytest.raises(AttributeError):
        _ = row.missing


async def test_values_a_guarded_statement_binds_itself_are_sent(engine: AsyncEngine) -> None:
    # :worker_sources is bound from the transition table when the statement is defined
    async with direct.transaction(engine) as conn:
        rows = await conn.execute(
            sql.MARK_WORKER_GONE, {"worker_id": "w", "registry": "r", "incarnation": "i"}
        )
        assert rows.all() == []


async def test_the_transaction_commits_with_the_block_and_rolls_back_when_it_raises(
    engine: AsyncEngine,
) -> None:
    insert = text("INSERT INTO pools (name, slots) VALUES (:name, 1)")
    async with direct.transaction(engine) as conn:
        await conn.execute(insert, {"name": "kept"})
    with pytest.raises(RuntimeError):
        async with direct.transaction(engine) as conn:
            await conn.execute(insert, {"name": "dropped"})
            raise RuntimeError("after the write")
    async with engine.connect() as check:
        assert (await check.execute(_COUNT, {"name": "kept"})).scalar_one() == 1
        assert (await check.execute(_COUNT, {"name": "dropped"})).scalar_one() == 0
