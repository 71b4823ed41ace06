"""Reads for telemetry and for the cluster's description of itself: the traced runs a scheduling
pass queued task instances of, the schema revision, and a round trip that opens the pool. None of
them takes a row lock or writes anything."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from schedd_store.database import Engine
from schedd_store.statements.guards import _sql

QUEUED_IN_TRACED_RUNS = _sql(
    "SELECT r.dag_id, r.run_id, r.trace_context, array_agg(ti.task_id ORDER BY ti.task_id) AS task_ids "
    "FROM task_instances ti JOIN dag_runs r ON r.id = ti.run_pk "
    "WHERE ti.id = ANY(CAST(:ids AS bigint[])) AND r.trace_context IS NOT NULL "
    "AND ti.state IN ('queued', 'running', 'success', 'failed', 'up_for_retry') "
    "GROUP BY r.dag_id, r.run_id, r.trace_context"
)


@dataclass(frozen=True)
class TracedRun:
    """A traced run and the ids of the tasks (of the task instances asked about) it holds."""

    dag_id: str
    run_id: str
    trace_context: str
    task_ids: list[str]


async def traced_runs_of(engine: Engine, ti_ids: Sequence[int]) -> list[TracedRun]:
    """The traced runs (``dag_runs.trace_context`` set) of the task instances ``ti_ids`` that are
    queued, running or ended, with their task ids; untraced runs are left out."""
    async with engine.connect() as conn:
        rows = (await conn.execute(QUEUED_IN_TRACED_RUNS, {"ids": list(ti_ids)})).all()
    return [TracedRun(r.dag_id, r.run_id, r.trace_context, list(r.task_ids)) for r in rows]


async def schema_revision(engine: Engine) -> str:
    """The Alembic revision the database is at ('' before the first migration)."""
    async with engine.connect() as conn:
        row = (await conn.execute("SELECT version_num FROM alembic_version")).first()
    return str(row[0]) if row else ""


async def warm_up(engine: Engine) -> None:
    """Open a pooled connection with one round trip, so the next caller does not pay for it."""
    async with engine.connect() as conn:
        await conn.execute("SELECT 1")
