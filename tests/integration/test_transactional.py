"""A transactional task's writes commit with its success, or not at all (real PostgreSQL)."""

from __future__ import annotations

from datetime import UTC, datetime

import asyncpg  # type: ignore[import-untyped, unused-ignore]
import pytest

from schedd.v1 import resources_pb2 as pb
from schedd_core.claims import ClaimedAttempt
from schedd_core.database_url import asyncpg_dsn
from schedd_exec.transactional import StaleAttemptRolledBack, run_in_transaction
from schedd_store import dispatch
from schedd_store.database import Engine
from schedd_store.named_sql import Statement
from tests.integration import tx_tasks

from .helpers import leading_loop, registered_run, spec

pytestmark = pytest.mark.integration


async def _running_attempt(engine: Engine) -> ClaimedAttempt:
    dag = spec("tx", {"a": []})
    dag.tasks[0].ClearField("shell")
    dag.tasks[0].python.CopyFrom(pb.PythonCallable(target="tests.integration.tx_tasks:write_row"))
    dag.tasks[0].transactional = True
    run = await registered_run(engine, dag)
    await (await leading_loop(engine)).evaluate([run.pk])
    async with engine.begin() as conn:
        await conn.execute(Statement(tx_tasks.TABLE))
    (claimed,) = await dispatch.claim(engine, worker_id="w", queues=["default"], limit=1)
    return claimed


def _transaction(url: str, claimed: ClaimedAttempt, attempt_id: str | None = None) -> dict[str, object]:
    return {
        "dsn": asyncpg_dsn(url),
        "ti_id": claimed.ti_id,
        "attempt_id": attempt_id or claimed.attempt_id,
        "try_number": claimed.try_number,
        "secret": claimed.commit_secret,
        "started_at": datetime.now(UTC).isoformat(),
    }


async def _rows(url: str) -> list[str]:
    conn = await asyncpg.connect(asyncpg_dsn(url))
    try:
        return [r["key"] for r in await conn.fetch("SELECT key FROM tx_demo")]
    finally:
        await conn.close()


async def test_success_commits_the_work_and_the_outcome_together(engine: Engine, migrated_url: str) -> None:
    claimed = await _running_attempt(engine)
    context = {"SCHEDD_IDEMPOTENCY_KEY": "tx/r1/a", "SCHEDD_ATTEMPT_ID": claimed.attempt_id}
    result = await run_in_transaction(
        tx_tasks.write_row, {"context": context}, True, _transaction(migrated_url, claimed)
    )
    assert result == {"written": 1}
    assert await _rows(migrated_url) == ["tx/r1/a"]
    async with engine.connect() as conn:
        state, stored = (
            await conn.execute(
                Statement("SELECT state, result FROM task_instances WHERE id = :id"), {"id": claimed.ti_id}
            )
        ).one()
    assert (state, stored) == ("success", {"written": 1})


async def test_a_stale_attempt_writes_nothing(engine: Engine, migrated_url: str) -> None:
    claimed = await _running_attempt(engine)
    stale = "00000000-0000-0000-0000-000000000000"
    context = {"SCHEDD_IDEMPOTENCY_KEY": "tx/r1/a", "SCHEDD_ATTEMPT_ID": stale}
    with pytest.raises(StaleAttemptRolledBack):
        await run_in_transaction(
            tx_tasks.write_row, {"context": context}, True, _transaction(migrated_url, claimed, stale)
        )
    assert await _rows(migrated_url) == []
    async with engine.connect() as conn:
        state = (
            await conn.execute(
                Statement("SELECT state FROM task_instances WHERE id = :id"), {"id": claimed.ti_id}
            )
        ).scalar_one()
    assert state == "running"


async def test_a_failing_task_writes_nothing(engine: Engine, migrated_url: str) -> None:
    claimed = await _running_attempt(engine)
    context = {"SCHEDD_IDEMPOTENCY_KEY": "tx/r1/a", "SCHEDD_ATTEMPT_ID": claimed.attempt_id}
    with pytest.raises(RuntimeError, match="failing after writing"):
        await run_in_transaction(
            tx_tasks.write_then_fail, {"context": context}, True, _transaction(migrated_url, claimed)
        )
    assert await _rows(migrated_url) == []
