"""Retention deletes what is old enough, in bounded batches, fenced, and keeps everything else."""

from __future__ import annotations

import pytest

from schedd_core.errors import FencedOut
from schedd_scheduler.housekeeping import Housekeeper
from schedd_store import dags
from schedd_store.database import Engine
from schedd_store.fence import Fence, raise_fence
from schedd_store.named_sql import Statement
from schedd_store.retention import DAY, Retention, purge_batch
from schedd_store.statements import PURGE_FINISHED_RUNS

from .helpers import spec

pytestmark = pytest.mark.integration


async def _seed(engine: Engine) -> None:
    """Finished runs 40 days old (12 of them) and 1 day old (3), one running run, each with task
    instances, attempts and output; passes, outbox events, requests and workers old and new."""
    await dags.register_dag(engine, spec("old", {"a": [], "b": ["a"]}))
    statements = [
        "INSERT INTO dag_runs (dag_id, run_id, dag_version_id, run_type, state, logical_date, ended_at) "
        "SELECT 'old', 'r' || i, (SELECT latest_version_id FROM dags WHERE dag_id = 'old'), 'manual', "
        "CASE WHEN i = 0 THEN 'running' ELSE 'success' END, now(), "
        "CASE WHEN i = 0 THEN NULL WHEN i <= 12 THEN now() - interval '40 days' "
        "ELSE now() - interval '1 day' END "
        "FROM generate_series(0, 15) AS i",
        "INSERT INTO task_instances (run_pk, dag_id, logical_date, task_id, state, attempt_id) "
        "SELECT r.id, r.dag_id, r.logical_date, t, 'success', gen_random_uuid() FROM dag_runs r, "
        "unnest(ARRAY['a', 'b']) AS t",
        "INSERT INTO task_attempts (attempt_id, ti_id, try_number, worker_id, state) "
        "SELECT attempt_id, id, 1, 'w', 'success' FROM task_instances",
        "INSERT INTO task_logs (ti_id, try_number, attempt_id, byte_offset, data) "
        "SELECT id, 1, attempt_id, 0, 'output' FROM task_instances",
        "INSERT INTO scheduler_passes (token, runs, queued, committed_at) "
        "SELECT 1, 1, 0, now() - ((i + 0.5) || ' days')::interval FROM generate_series(0, 9) AS i",
        "INSERT INTO outbox (topic, payload, delivered_at) "
        "SELECT 'x', '{}', now() - ((i + 0.5) || ' days')::interval FROM generate_series(0, 9) AS i",
        "INSERT INTO request_log (method, request_id, body_hash, resource, created_at) "
        "SELECT 'M', 'q' || i, 'h', '', now() - ((i + 0.5) || ' days')::interval "
        "FROM generate_series(0, 9) AS i",
        "INSERT INTO workers (worker_id, capacity, state, last_seen_at) "
        "VALUES ('gone-old', 1, 'gone', now() - interval '9 days'), ('gone-new', 1, 'gone', now()), "
        "('active-old', 1, 'active', now() - interval '9 days')",
    ]
    async with engine.begin() as conn:
        for statement in statements:
            await conn.execute(Statement(statement))


async def _count(engine: Engine, query: str) -> int:
    async with engine.connect() as conn:
        return int((await conn.execute(Statement(query))).scalar_one())


async def test_retention_deletes_what_is_old_and_keeps_the_rest(engine: Engine) -> None:
    await _seed(engine)
    await raise_fence(engine, 3, "leader")
    fence = Fence(engine, 3)
    # One batch of runs holds at most the budget of task instances: two-task runs, budget 5,000.
    assert await purge_batch(fence, PURGE_FINISHED_RUNS, 30 * DAY, batch=5) == 5
    deleted = await Housekeeper(fence, Retention()).sweep()
    assert deleted["runs"] == 7  # 12 old finished runs, 5 already gone
    assert await _count(engine, "SELECT count(*) FROM dag_runs") == 4  # 3 recent, 1 running
    assert await _count(engine, "SELECT count(*) FROM task_instances") == 8
    assert await _count(engine, "SELECT count(*) FROM task_attempts") == 8
    assert await _count(engine, "SELECT count(*) FROM task_logs") == 8
    # 0.5 to 9.5 days old: 7.5, 8.5 and 9.5 are past the 7 days kept.
    assert deleted["passes"] == 3 and deleted["outbox"] == 3 and deleted["requests"] == 3
    assert await _count(engine, "SELECT count(*) FROM scheduler_passes") == 7
    workers = await _count(engine, "SELECT count(*) FROM workers")
    assert workers == 2, "only the worker that left long ago goes"


async def test_audit_records_are_kept_for_their_own_age(engine: Engine) -> None:
    await raise_fence(engine, 3, "leader")
    async with engine.begin() as conn:
        await conn.execute(
            Statement(
                "INSERT INTO audit_log (at, principal, role, method, code) "
                "SELECT now() - make_interval(days => d), 'p', 'admin', '/m', 'OK' "
                "FROM generate_series(1, 401, 100) d"
            )
        )
    deleted = await Housekeeper(Fence(engine, 3), Retention()).sweep()
    assert deleted["audit"] == 1  # 401 days old; 1, 101, 201 and 301 days are kept
    assert await _count(engine, "SELECT count(*) FROM audit_log") == 4


async def test_a_deposed_leader_deletes_nothing(engine: Engine) -> None:
    await _seed(engine)
    await raise_fence(engine, 3, "old")
    await raise_fence(engine, 4, "new")
    with pytest.raises(FencedOut):
        await Housekeeper(Fence(engine, 3), Retention()).sweep()
    assert await _count(engine, "SELECT count(*) FROM dag_runs") == 16


async def test_zero_keeps_forever() -> None:
    from schedd_store.retention import purges

    assert [name for name, _, _ in purges(Retention(runs=0, logs=0))] == [
        "passes",
        "outbox",
        "requests",
        "workers",
        "audit",
    ]
    with pytest.raises(ValueError, match="negative"):
        Retention(runs=-1)
