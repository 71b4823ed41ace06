"""Creating and reading DAG runs with their task instances (the api's side)."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from schedd_core.errors import AlreadyExists, NotFound
from schedd_store import channels
from schedd_store import statements as sql
from schedd_store.records import RunRecord, TaskInstanceRecord


async def create_run(
    engine: AsyncEngine,
    *,
    dag_id: str,
    run_id: str,
    run_type: str,
    logical_date: datetime,
    conf: dict[str, Any],
    request_id: str | None,
) -> RunRecord:
    """Insert a queued run pinned to the DAG's latest version and wake the scheduler.

    A retry with the same ``request_id`` returns the run the first call created.
    Raises NotFound for an unknown DAG and AlreadyExists for a taken ``run_id``.
    """
    async with engine.begin() as conn:
        pk = (
            await conn.execute(
                sql.INSERT_RUN,
                {
                    "dag_id": dag_id,
                    "run_id": run_id,
                    "run_type": run_type,
                    "logical_date": logical_date,
                    "conf": json.dumps(conf),
                    "request_id": request_id,
                },
            )
        ).scalar()
        if pk is not None:
            await conn.execute(sql.NOTIFY, {"channel": channels.RUNS, "payload": str(pk)})
    if pk is None:
        if request_id:
            async with engine.connect() as conn:
                existing = (
                    await conn.execute(sql.FIND_RUN_BY_REQUEST, {"dag_id": dag_id, "request_id": request_id})
                ).scalar()
            if existing is not None:
                return await get_run(engine, dag_id, existing)
        await _ensure_dag_exists(engine, dag_id)
        raise AlreadyExists(f"run {run_id!r} of dag {dag_id!r} exists already")
    return await get_run(engine, dag_id, run_id)


async def _ensure_dag_exists(engine: AsyncEngine, dag_id: str) -> None:
    async with engine.connect() as conn:
        if (await conn.execute(sql.GET_DAG, {"dag_id": dag_id})).first() is None:
            raise NotFound(f"dag {dag_id!r} not found")


async def get_run(engine: AsyncEngine, dag_id: str, run_id: str) -> RunRecord:
    async with engine.connect() as conn:
        row = (await conn.execute(sql.GET_RUN, {"dag_id": dag_id, "run_id": run_id})).first()
        if row is None:
            raise NotFound(f"run {run_id!r} of dag {dag_id!r} not found")
        tis = (await conn.execute(sql.LIST_TASK_INSTANCES, {"run_pk": row.id})).all()
    return _run(row._mapping, [_ti(t._mapping) for t in tis])


async def list_runs(engine: AsyncEngine, *, dag_id: str | None, before: int, limit: int) -> list[RunRecord]:
    """Runs newest first, with ids below ``before`` (keyset pagination); without task instances."""
    async with engine.connect() as conn:
        rows = (await conn.execute(sql.LIST_RUNS, {"dag_id": dag_id, "before": before, "limit": limit})).all()
    return [_run(r._mapping, []) for r in rows]


def _run(m: Any, tis: list[TaskInstanceRecord]) -> RunRecord:
    return RunRecord(
        pk=m["id"],
        dag_id=m["dag_id"],
        run_id=m["run_id"],
        run_type=m["run_type"],
        state=m["state"],
        logical_date=m["logical_date"],
        conf=m["conf"] or {},
        created_at=m["created_at"],
        started_at=m["started_at"],
        ended_at=m["ended_at"],
        version_hash=m["version_hash"],
        task_instances=tis,
    )


def _ti(m: Any) -> TaskInstanceRecord:
    return TaskInstanceRecord(
        task_id=m["task_id"],
        state=m["state"],
        try_number=m["try_number"],
        max_tries=m["max_tries"],
        attempt_id=str(m["attempt_id"]) if m["attempt_id"] else None,
        worker_id=m["worker_id"],
        queued_at=m["queued_at"],
        started_at=m["started_at"],
        ended_at=m["ended_at"],
        exit_code=m["exit_code"],
        error=m["error"],
        priority_weight=m["priority_weight"],
        pool=m["pool"],
        queue=m["queue"],
    )
