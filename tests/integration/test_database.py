"""schedd_store.database: the engine the services reach PostgreSQL through, on asyncpg directly."""

from __future__ import annotations

import asyncpg
import pytest

from schedd_core.database_url import asyncpg_dsn
from schedd_store import statements as sql
from schedd_store.database import Engine
from schedd_store.engine import is_transient, make_engine
from schedd_store.named_sql import Statement

pytestmark = pytest.mark.integration

_READ = Statement("SELECT CAST(:doc AS jsonb) AS doc, CAST(:ids AS bigint[]) AS ids, :name AS name")
_COUNT = Statement("SELECT count(*) AS n FROM pools WHERE name = :name")
_INSERT = Statement("INSERT INTO pools (name, slots) VALUES (:name, 1)")


async def test_json_is_written_as_text_and_read_as_values(engine: Engine) -> None:
    async with engine.connect() as conn:
        row = (await conn.execute(_READ, {"doc": '{"a": [1, "x"]}', "ids": [3, 1], "name": "n"})).one()
        plain = (await conn.execute("SELECT CAST(:doc AS json) AS doc", {"doc": "[null]"})).scalar_one()
    assert (row.doc, row.ids, row.name, plain) == ({"a": [1, "x"]}, [3, 1], "n", [None])


async def test_values_a_guarded_statement_binds_itself_are_sent(engine: Engine) -> None:
    # :worker_sources is bound from the transition table when the statement is defined
    async with engine.begin() as conn:
        rows = await conn.execute(
            sql.MARK_WORKER_GONE, {"worker_id": "w", "registry": "r", "incarnation": "i"}
        )
        assert rows.all() == []


async def test_begin_commits_with_the_block_and_rolls_back_when_it_raises(engine: Engine) -> None:
    async with engine.begin() as conn:
        await conn.execute(_INSERT, {"name": "kept"})
    with pytest.raises(RuntimeError):
        async with engine.begin() as conn:
            await conn.execute(_INSERT, {"name": "dropped"})
            raise RuntimeError("after the write")
    async with engine.connect() as check:
        assert (await check.execute(_COUNT, {"name": "kept"})).scalar_one() == 1
        assert (await check.execute(_COUNT, {"name": "dropped"})).scalar_one() == 0


async def test_what_a_connect_block_writes_is_rolled_back(engine: Engine) -> None:
    async with engine.connect() as conn:
        await conn.execute(_INSERT, {"name": "not kept"})
        assert (await conn.execute(_COUNT, {"name": "not kept"})).scalar_one() == 1
    async with engine.connect() as check:
        assert (await check.execute(_COUNT, {"name": "not kept"})).scalar_one() == 0


async def test_a_connect_block_can_read_in_one_snapshot(engine: Engine) -> None:
    async with engine.connect() as reader:
        async with reader.begin(isolation="repeatable_read"):
            before = (await reader.execute(_COUNT, {"name": "later"})).scalar_one()
            async with engine.begin() as writer:
                await writer.execute(_INSERT, {"name": "later"})
            assert (await reader.execute(_COUNT, {"name": "later"})).scalar_one() == before == 0
        assert (await reader.execute(_COUNT, {"name": "later"})).scalar_one() == 1
    async with engine.connect() as late:
        await late.execute(_COUNT, {"name": "later"})
        with pytest.raises(RuntimeError, match="already began"):
            async with late.begin():
                pass


async def test_a_connection_the_server_closed_is_replaced_when_next_lent(
    engine: Engine, migrated_url: str
) -> None:
    """Once the server ended a pooled connection, the next blocks get a new one. A block may instead
    fail with a transient error, once: when it got the connection between the server's FATAL message
    and its end of stream (asyncpg has not noticed the end yet), which is then closed."""
    async with engine.connect() as conn:
        pid = (await conn.execute("SELECT pg_backend_pid()")).scalar_one()
    killer = await asyncpg.connect(asyncpg_dsn(migrated_url))
    try:
        assert await killer.fetchval("SELECT pg_terminate_backend($1)", pid)
    finally:
        await killer.close()
    failures: list[BaseException] = []
    for _ in range(3):
        try:
            async with engine.connect() as conn:
                again = (await conn.execute("SELECT pg_backend_pid()")).scalar_one()
        except Exception as exc:  # checked below: transient, and once at most
            failures.append(exc)
            continue
        assert again != pid
        break
    assert len(failures) <= 1 and all(is_transient(f) for f in failures), failures


async def test_a_connection_whose_protocol_failed_is_not_lent_again(engine: Engine) -> None:
    async with engine.connect() as conn:
        pid = (await conn.execute("SELECT pg_backend_pid()")).scalar_one()
    with pytest.raises(asyncpg.InternalClientError):
        async with engine.begin() as conn:
            assert (await conn.execute("SELECT pg_backend_pid()")).scalar_one() == pid  # the pool's one
            raise asyncpg.InternalClientError(
                "cannot switch to state 15; another operation (2) is in progress"
            )
    async with engine.connect() as conn:
        assert (await conn.execute("SELECT pg_backend_pid()")).scalar_one() != pid


async def test_a_unique_violation_names_its_constraint(engine: Engine) -> None:
    async with engine.begin() as conn:
        await conn.execute(_INSERT, {"name": "once"})
    with pytest.raises(asyncpg.UniqueViolationError) as raised:
        async with engine.begin() as conn:
            await conn.execute(_INSERT, {"name": "once"})
    assert raised.value.constraint_name == "pools_pkey"
    assert not is_transient(raised.value)


async def test_an_unreachable_server_is_a_transient_failure() -> None:
    engine = make_engine("postgresql://schedd@127.0.0.1:9/schedd", pool_size=1)
    with pytest.raises(Exception) as raised:
        async with engine.connect() as conn:
            await conn.execute("SELECT 1")
    assert is_transient(raised.value)
    await engine.dispose()


async def test_connections_carry_the_engines_server_settings(migrated_url: str) -> None:
    engine = make_engine(migrated_url, application_name="named", server_settings={"lock_timeout": "1234"})
    try:
        for _ in range(2):  # also once the connection came back to the pool
            async with engine.connect() as conn:
                row = (
                    await conn.execute(
                        "SELECT current_setting('application_name') AS app, "
                        "current_setting('lock_timeout') AS lock, current_setting('jit') AS jit"
                    )
                ).one()
            assert tuple(row) == ("named", "1234ms", "off")
    finally:
        await engine.dispose()
