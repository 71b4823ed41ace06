"""The hot statements' plans with 100,000 task instances queued: PostgreSQL's own EXPLAIN ANALYZE shows
that a claim and a pass's pool read touch a handful of rows, not the backlog (no sequential scan
of task_instances, no node reading more than a few hundred rows); and the generic plans of the
statements a registry's result transaction runs (on connections that keep generic plans,
``schedd_store.engine.GENERIC_PLANS``) reach every large table through an index. Plans, not
timings: they do not depend on how busy the machine is."""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from schedd_store import dags, runs, statements as sql
from schedd_store.database import Engine
from schedd_store.engine import GENERIC_PLANS
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


#: Every statement a registry's result transaction may run (``schedd_store.dispatch.apply_results``
#: and what it calls: sensor outcomes, lost attempts, the hand-off's specs and upstream results, the
#: outcomes of reports not applied).
RESULT_TRANSACTION = (
    sql.APPLY_RESULTS,
    sql.NOTIFY,
    sql.APPLY_SENSOR_OUTCOMES,
    sql.MARK_ATTEMPTS_LOST,
    sql.GET_VERSION_SPECS,
    sql.UPSTREAM_RESULTS,
    sql.ATTEMPT_OUTCOMES,
)
#: Every statement a registry's claim transaction may run (``schedd_store.claims``): the claim, the
#: specs of versions not cached yet and the upstream results.
CLAIM_TRANSACTION = (sql.CLAIM_TASK_INSTANCES, sql.GET_VERSION_SPECS, sql.UPSTREAM_RESULTS)
#: Tables that grow with the work done: a generic plan must not read one through.
LARGE_TABLES = {"task_instances", "task_attempts", "dag_runs", "asset_events", "dag_versions", "dags"}


@pytest.fixture
async def history(backlog: Engine) -> Engine:
    """The backlog, with 1,000 finished runs of 100 task instances, their 100k attempts and 2,000
    other DAGs' versions."""
    async with backlog.begin() as conn:
        await conn.execute(
            Statement(
                "WITH r AS (INSERT INTO dag_runs (dag_id, run_id, dag_version_id, run_type, state, "
                "logical_date) SELECT 'deep', 'old_' || g, (SELECT latest_version_id FROM dags "
                "WHERE dag_id = 'deep'), 'manual', 'success', now() - g * interval '1 second' "
                "FROM generate_series(1, 1000) g RETURNING id) "
                "INSERT INTO task_instances (run_pk, dag_id, logical_date, task_id, state, try_number, "
                "attempt_id) SELECT r.id, 'deep', now(), 't' || t, 'success', 1, gen_random_uuid() "
                "FROM r, generate_series(1, 100) t"
            )
        )
        await conn.execute(
            Statement(
                "INSERT INTO task_attempts (attempt_id, ti_id, try_number, worker_id, state) "
                "SELECT attempt_id, id, 1, 'w', 'success' FROM task_instances WHERE state = 'success'"
            )
        )
        await conn.execute(
            Statement(
                "WITH d AS (INSERT INTO dags (dag_id) SELECT 'other_' || g FROM generate_series(1, 2000) g "
                "RETURNING dag_id) INSERT INTO dag_versions (dag_id, version_hash, spec) "
                "SELECT dag_id, 'v1', '\\x'::bytea FROM d"
            )
        )
        await conn.execute(Statement("ANALYZE"))
    return backlog


async def generic_plan(engine: Engine, statement: Statement) -> list[dict[str, Any]]:
    """Every node of the generic plan PostgreSQL keeps for ``statement`` on a connection with
    ``GENERIC_PLANS`` (its parameters' values do not shape it: they are all NULL here)."""
    text = statement.compiled().text
    count = len(statement.compiled().names)
    async with engine.connect() as conn:
        for setting, value in GENERIC_PLANS.items():
            await conn.execute(Statement(f"SET LOCAL {setting} = {value}"))
        # named afresh: a statement that fails leaves its prepared statement on the pooled connection
        name = f"planned_{secrets.token_hex(4)}"
        await conn.execute(Statement(f"PREPARE {name} AS {text}"))
        arguments = f"({', '.join(['NULL'] * count)})" if count else ""
        (raw,) = (await conn.execute(Statement(f"EXPLAIN (FORMAT JSON) EXECUTE {name}{arguments}"))).one()
        await conn.execute(Statement(f"DEALLOCATE {name}"))
    document = json.loads(raw) if isinstance(raw, str) else raw
    return list(nodes(document[0]["Plan"]))


async def test_the_result_and_claim_transactions_generic_plans_read_large_tables_by_index(
    history: Engine,
) -> None:
    scanned = []
    for statement in RESULT_TRANSACTION + CLAIM_TRANSACTION:
        plan = await generic_plan(history, statement)
        tables = [n["Relation Name"] for n in plan if reads_through(n)]
        # a list, not a dict by the text's start: several statements start alike
        scanned += [(statement.text[:60], table) for table in tables if table in LARGE_TABLES]
    assert scanned == []


#: Partial indexes whose rows are bounded by the cluster's capacity, not by the work done: the
#: running task instances (at most the workers' slots).
BOUNDED_INDEXES = {"task_instances_worker_running_idx"}


def reads_through(node: dict[str, Any]) -> bool:
    """Whether a plan node reads its whole table: a sequential scan, or an index scan with no
    condition on the index (the whole index, in its order) unless the index is bounded."""
    if node["Node Type"] == "Seq Scan":
        return True
    return (
        node["Node Type"] in ("Index Scan", "Index Only Scan")
        and "Index Cond" not in node
        and node.get("Index Name") not in BOUNDED_INDEXES
    )
