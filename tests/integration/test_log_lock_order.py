"""Storing output and applying a result take their row locks in one order (the task instance, then
its attempt), so the two never deadlock: a result written while a chunk of the same attempt's
output is being stored waits for it, or the other way round, and both land."""

from __future__ import annotations

import asyncio
import time

import pytest

from schedd_store import dispatch
from schedd_store.database import Engine
from schedd_store.dispatch import LogChunk
from schedd_store.named_sql import Statement

from .helpers import leading_loop, registered_run, spec

pytestmark = pytest.mark.integration

WAIT_SECONDS = 10.0


async def _wait_for_a_lock_wait(engine: Engine, other_than: int) -> None:
    """Until a backend other than ``other_than`` waits for a row lock (bounded)."""
    deadline = time.monotonic() + WAIT_SECONDS
    while time.monotonic() < deadline:
        async with engine.connect() as conn:
            waiting = (
                await conn.execute(
                    Statement(
                        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                        "AND pid <> :pid AND datname = current_database()"
                    ),
                    {"pid": other_than},
                )
            ).scalar()
        if waiting:
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"no statement waited for a lock within {WAIT_SECONDS}s")


async def test_output_stored_while_a_result_holds_the_task_instance_never_deadlocks(
    engine: Engine,
) -> None:
    run = await registered_run(engine, spec("log_lock_order", {"a": []}))
    loop = await leading_loop(engine)
    await loop.evaluate([run.pk])
    (claimed,) = await dispatch.claim(engine, worker_id="w", queues=["default"], limit=5)

    async with engine.begin() as result_conn:  # commits once the output's statement waits for it
        await result_conn.execute(Statement("SET LOCAL lock_timeout = '5s'"))
        pid = (await result_conn.execute(Statement("SELECT pg_backend_pid()"))).scalar()
        # What applying a result does first (APPLY_RESULTS): lock the task instance for update.
        await result_conn.execute(
            Statement("SELECT id FROM task_instances WHERE id = :id FOR UPDATE"), {"id": claimed.ti_id}
        )
        chunk = LogChunk(
            worker_id="w", ti_id=claimed.ti_id, attempt_id=claimed.attempt_id, offset=0, data="hello\n"
        )
        storing = asyncio.create_task(dispatch.append_logs(engine, [chunk]))
        await _wait_for_a_lock_wait(engine, other_than=int(pid or 0))
        # ...then it updates the attempt's history row. Had the output's statement locked that row
        # before waiting for the task instance, this would deadlock (or time out).
        await result_conn.execute(
            Statement("UPDATE task_attempts SET ended_at = now() WHERE attempt_id = :a"),
            {"a": claimed.attempt_id},
        )
    await asyncio.wait_for(storing, WAIT_SECONDS)

    async with engine.connect() as conn:
        stored = (
            await conn.execute(
                Statement("SELECT log_bytes FROM task_attempts WHERE attempt_id = :a"),
                {"a": claimed.attempt_id},
            )
        ).scalar()
    assert stored == len("hello\n")
