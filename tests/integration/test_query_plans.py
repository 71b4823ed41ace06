"""The hot statements' plans with 100,000 task instances queued: PostgreSQL's own EXPLAIN ANALYZE shows
that a claim and a pass's pool read touch a handful of rows, not the backlog (no sequential scan
of task_instances, no node reading more than a few hundred rows). Plans, not timings: they do not
depend on how busy the machine is."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from schedd_store import dags, runs, statements as sql
from schedd_store.database import Engine
from schedd_store.named_sql import Statement

from .helpers import spec

pytestmark = pytest.mark.integration

BACKLOG = 100_000


@pytest.fixture
async def backlog(engine: Engine) -> Engine:
    """100k task instances queued in a queue no worker serves (and pool), plus a few in 'default'."""
    await dags.register_dag(engine, spec("deep", {"t": []}))
    run = await runs.create_run(
        engine, dag_id="deep", run_id="r", run_type="manual", logical_date=datetime.now(UTC), conf={}
    )
    async with engine.begin() as conn:
        await conn.execute(Statement("INSERT INTO pools (name, slots) VALUES ('deep_pool', 1000000)"))
        await conn.execute(
            Statement(
                "INSERT INTO task_instances (run_pk, dag_id, logical_date, task_id, state, try_number, "
                "attempt_id, queue, pool, queued_at) SELECT :run, 'deep', now(), 't' || g, 'queued', 1, "
                "gen_random_uuid(), CASE WHEN g <= 5 THEN 'default' ELSE 'deep' END, "
                "CASE WHEN g <= 5 THEN 'default_pool' ELSE 'deep_pool' END, now() "
                "FROM generate_series(1, :n) g"
            ),
            {"run": run.pk, "n": BACKLOG},
        )
        await conn.execute(Statement("ANALYZE task_instances"))
    return engine


def nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", []):
        yield from nodes(child)


async def explain(engine: Engine, statement: Statement, params: dict[str, Any]) -> list[dict[str, Any]]:
    """Every node of the statement's executed plan; the statement's effects are rolled back."""
    async with engine.connect() as conn:  # rolled back when the block ends
        query = Statement("EXPLAIN (ANALYZE, FORMAT JSON) " + statement.text, statement.bound)
        (raw,) = (await conn.execute(query, params)).one()
    document = json.loads(raw) if isinstance(raw, str) else raw
    return list(nodes(document[0]["Plan"]))


def assert_small(plan: list[dict[str, Any]], most_rows: int) -> None:
    for node in plan:
        assert not (node["Node Type"] == "Seq Scan" and node.get("Relation Name") == "task_instances"), node
        assert node.get("Actual Rows", 0) <= most_rows, (node["Node Type"], node.get("Actual Rows"))


async def test_a_claim_reads_a_few_rows_of_a_deep_queue(backlog: Engine) -> None:
    plan = await explain(
        backlog, sql.CLAIM_TASK_INSTANCES, {"slots": ["w"] * 8, "queues": ["deep", "default"]}
    )
    assert_small(plan, most_rows=16)


async def test_a_pass_reads_pool_usage_without_counting_the_backlog(backlog: Engine) -> None:
    plan = await explain(backlog, sql.POOL_CAPACITY, {"pools": ["default_pool", "deep_pool"]})
    assert_small(plan, most_rows=100)


async def test_active_tasks_of_a_dag_come_from_the_counters(backlog: Engine) -> None:
    plan = await explain(backlog, sql.ACTIVE_TASKS_OF_DAGS, {"dag_ids": ["deep"]})
    assert_small(plan, most_rows=100)
