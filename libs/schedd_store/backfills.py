"""Backfills, the api's side: storing them with their intervals, reading them, pausing, resuming and
cancelling them. The leader makes their runs (``schedd_store.backfill_runs``).

A backfill is a stored resource: once :func:`create_backfill` commits, it survives any scheduler
fail-over, and whichever replica leads goes on with it. A DAG has at most one running or paused
backfill at a time (``backfills_one_active_key``; a second is refused with AlreadyExists).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from asyncpg import IntegrityConstraintViolationError

from schedd_core.backfill_plan import PlannedInterval, Reprocess, Strategy
from schedd_core.errors import AlreadyExists, FailedPrecondition, NotFound, quote
from schedd_core.request_key import RequestKey
from schedd_core.states import BackfillState
from schedd_faults import FaultPoints
from schedd_store import control, statements as sql
from schedd_store.database import Engine
from schedd_store.records import BackfillProgress, BackfillRecord
from schedd_store.requests import claim_request, constraint_error, record_resource

CREATE_BACKFILL = "CreateBackfill"


@dataclass(frozen=True)
class BackfillOptions:
    dag_id: str
    start_date: datetime
    end_date: datetime
    strategy: Strategy
    max_active_runs: int
    chunk_size: int
    backward: bool
    reprocess: Reprocess
    #: The conf of every run it creates (checked against the DAG's params by the caller).
    conf: dict[str, Any] | None = None
    #: Runs it reruns move to the DAG's current version first.
    run_on_latest_version: bool = False


def backfill_name(backfill_id: int) -> str:
    """The resource name recorded for an idempotent create."""
    return f"backfills/{backfill_id}"


async def create_backfill(
    engine: Engine,
    options: BackfillOptions,
    intervals: Sequence[PlannedInterval],
    request: RequestKey | None = None,
) -> BackfillRecord:
    """Store the backfill with its intervals and wake the leader. With ``request``, a retry returns
    the backfill the first call made."""
    try:
        async with engine.begin() as conn:
            earlier = None
            if request is not None:
                earlier = await claim_request(conn, CREATE_BACKFILL, request.request_id, request.body_hash)
            if earlier is not None:
                backfill_id = int(earlier.rsplit("/", 1)[1])
            else:
                backfill_id = (
                    await conn.execute(
                        sql.INSERT_BACKFILL,
                        {
                            "dag_id": options.dag_id,
                            "start_date": options.start_date,
                            "end_date": options.end_date,
                            "strategy": options.strategy.value,
                            "max_active_runs": options.max_active_runs,
                            "chunk_size": options.chunk_size,
                            "backward": options.backward,
                            "reprocess": options.reprocess.value,
                            "conf": json.dumps(options.conf) if options.conf is not None else None,
                            "run_on_latest_version": options.run_on_latest_version,
                        },
                    )
                ).scalar_one()
                await conn.execute(
                    sql.INSERT_BACKFILL_INTERVALS,
                    {
                        "backfill_id": backfill_id,
                        "positions": [i.position for i in intervals],
                        "chunks": [i.chunk for i in intervals],
                        "starts": [i.interval.start for i in intervals],
                        "ends": [i.interval.end for i in intervals],
                        "logical": [i.interval.logical for i in intervals],
                    },
                )
                if request is not None:
                    await record_resource(
                        conn, CREATE_BACKFILL, request.request_id, backfill_name(backfill_id)
                    )
    except IntegrityConstraintViolationError as exc:
        error = constraint_error(
            exc,
            {
                "backfills_one_active_key": AlreadyExists(
                    f"dag {quote(options.dag_id)} has a running or paused backfill already; "
                    "cancel it or wait for it to end"
                ),
                "backfills_dag_id_fkey": NotFound(f"dag {quote(options.dag_id)} not found"),
            },
        )
        if error is None:
            raise
        raise error from None
    return await get_backfill(engine, backfill_id)


def dry_run(options: BackfillOptions, intervals: Sequence[PlannedInterval], now: datetime) -> BackfillRecord:
    """What :func:`create_backfill` would store, with its intervals listed; nothing is written."""
    return BackfillRecord(
        id=0,
        dag_id=options.dag_id,
        start_date=options.start_date,
        end_date=options.end_date,
        strategy=options.strategy.value,
        max_active_runs=options.max_active_runs,
        chunk_size=options.chunk_size,
        backward=options.backward,
        reprocess=options.reprocess.value,
        state=BackfillState.RUNNING.value,
        error=None,
        created_at=now,
        updated_at=now,
        progress=BackfillProgress(len(intervals), len(intervals), 0, 0, 0, 0),
        intervals=[(i.interval.start, i.interval.end, i.interval.logical_date) for i in intervals],
        conf=options.conf,
        run_on_latest_version=options.run_on_latest_version,
    )


async def get_backfill(engine: Engine, backfill_id: int) -> BackfillRecord:
    async with engine.connect() as conn:
        row = (await conn.execute(sql.GET_BACKFILL, {"id": backfill_id})).first()
    if row is None:
        raise NotFound(f"backfill {backfill_id} not found")
    return _backfill(row._mapping)


async def list_backfills(
    engine: Engine, *, dag_id: str | None, before: int, limit: int
) -> list[BackfillRecord]:
    """Backfills newest first, with ids below ``before`` (keyset pagination)."""
    async with engine.connect() as conn:
        rows = (
            await conn.execute(sql.LIST_BACKFILLS, {"dag_id": dag_id, "before": before, "limit": limit})
        ).all()
    return [_backfill(r._mapping) for r in rows]


async def pause_backfill(engine: Engine, backfill_id: int) -> BackfillRecord:
    """Make no new runs until resumed; runs in flight go on."""
    await _change(engine, backfill_id, sql.PAUSE_BACKFILL, "paused", "it is not running")
    return await get_backfill(engine, backfill_id)


async def resume_backfill(engine: Engine, backfill_id: int) -> BackfillRecord:
    await _change(engine, backfill_id, sql.RESUME_BACKFILL, "resumed", "it is not paused")
    return await get_backfill(engine, backfill_id)


async def cancel_backfill(
    engine: Engine, backfill_id: int, *, faults: FaultPoints | None = None
) -> BackfillRecord:
    """End the backfill: no more runs are made, and its runs in flight are cancelled (running
    attempts stopped, tasks that did not run skipped), in one transaction."""
    async with engine.begin() as conn:
        row = (await conn.execute(sql.LOCK_BACKFILL, {"id": backfill_id})).first()
        if row is None:
            raise NotFound(f"backfill {backfill_id} not found")
        if (await conn.execute(sql.CANCEL_BACKFILL, {"id": backfill_id})).first() is None:
            raise FailedPrecondition(f"backfill {backfill_id} cannot be cancelled: it is {row.state}")
        for run in (await conn.execute(sql.UNFINISHED_BACKFILL_RUNS, {"id": backfill_id})).all():
            await control.cancel_locked(conn, row.dag_id, run.run_id, faults=faults)
    return await get_backfill(engine, backfill_id)


async def _change(engine: Engine, backfill_id: int, statement: Any, verb: str, why: str) -> None:
    async with engine.begin() as conn:
        row = (await conn.execute(sql.LOCK_BACKFILL, {"id": backfill_id})).first()
        if row is None:
            raise NotFound(f"backfill {backfill_id} not found")
        if (await conn.execute(statement, {"id": backfill_id})).first() is None:
            raise FailedPrecondition(f"backfill {backfill_id} cannot be {verb}: {why} (it is {row.state})")


def _backfill(m: Any) -> BackfillRecord:
    return BackfillRecord(
        id=int(m["id"]),
        dag_id=m["dag_id"],
        start_date=m["start_date"],
        end_date=m["end_date"],
        strategy=m["strategy"],
        max_active_runs=int(m["max_active_runs"]),
        chunk_size=int(m["chunk_size"]),
        backward=bool(m["backward"]),
        reprocess=m["reprocess"],
        state=m["state"],
        error=m["error"],
        created_at=m["created_at"],
        updated_at=m["updated_at"],
        progress=BackfillProgress(
            total=int(m["total"]),
            pending=int(m["pending"]),
            running=int(m["running"]),
            succeeded=int(m["succeeded"]),
            failed=int(m["failed"]),
            skipped=int(m["skipped"]),
        ),
        conf=m["conf"],
        run_on_latest_version=bool(m["run_on_latest_version"]),
    )
