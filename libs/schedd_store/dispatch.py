"""The registry's side of the store: worker records, claims and attempt results.

Claims use ``FOR UPDATE SKIP LOCKED``, so any number of registries can claim
side by side and no attempt is handed out twice. Results are conditional on the
attempt id: a report of a superseded attempt changes nothing and comes back as
stale; a repeated report of an applied result comes back as applied.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncEngine

from schedd_store import channels
from schedd_store import statements as sql


@dataclass(frozen=True)
class ClaimedAttempt:
    ti_id: int
    task_id: str
    try_number: int
    attempt_id: str
    dag_id: str
    run_id: str
    logical_date: datetime
    dag_version_id: int


@dataclass(frozen=True)
class AttemptResult:
    ti_id: int
    attempt_id: str
    succeeded: bool
    exit_code: int
    error: str
    ended_at: datetime
    #: When the worker started the attempt's process; None keeps the claim time.
    started_at: datetime | None = None


class ReportStatus(enum.Enum):
    APPLIED = "applied"
    DUPLICATE = "duplicate"  # the same result was applied before
    STALE = "stale"  # the attempt is not current


async def claim(
    engine: AsyncEngine, *, worker_id: str, queues: Sequence[str], limit: int
) -> list[ClaimedAttempt]:
    if limit <= 0:
        return []
    async with engine.begin() as conn:
        rows = (
            await conn.execute(
                sql.CLAIM_TASK_INSTANCES, {"worker_id": worker_id, "queues": list(queues), "limit": limit}
            )
        ).all()
    return [
        ClaimedAttempt(
            ti_id=r.id,
            task_id=r.task_id,
            try_number=r.try_number,
            attempt_id=str(r.attempt_id),
            dag_id=r.dag_id,
            run_id=r.run_id,
            logical_date=r.logical_date,
            dag_version_id=r.dag_version_id,
        )
        for r in rows
    ]


async def apply_results(engine: AsyncEngine, results: Sequence[AttemptResult]) -> list[ReportStatus]:
    """Apply a batch of attempt results in one transaction and wake the scheduler for their runs.

    Returns one status per result, in order.
    """
    if not results:
        return []
    params = {
        "ti_ids": [r.ti_id for r in results],
        "attempt_ids": [r.attempt_id for r in results],
        "targets": ["success" if r.succeeded else "failed" for r in results],
        "exit_codes": [r.exit_code for r in results],
        "errors": [r.error for r in results],
        "started": [r.started_at for r in results],
        "ended": [r.ended_at for r in results],
    }
    async with engine.begin() as conn:
        applied = {str(r.attempt_id): r.run_pk for r in (await conn.execute(sql.APPLY_RESULTS, params)).all()}
        for payload in channels.encode_ids(sorted(set(applied.values()))):
            await conn.execute(sql.NOTIFY, {"channel": channels.RUNS, "payload": payload})
        rest = [r for r in results if r.attempt_id not in applied]
        current = {}
        if rest:
            rows = (await conn.execute(sql.CURRENT_ATTEMPTS, {"ids": [r.ti_id for r in rest]})).all()
            current = {row.id: (str(row.attempt_id), row.state) for row in rows}
    statuses = []
    for r in results:
        if r.attempt_id in applied:
            statuses.append(ReportStatus.APPLIED)
        elif current.get(r.ti_id) == (r.attempt_id, "success" if r.succeeded else "failed"):
            statuses.append(ReportStatus.DUPLICATE)
        else:
            statuses.append(ReportStatus.STALE)
    return statuses


async def register_worker(
    engine: AsyncEngine,
    *,
    worker_id: str,
    hostname: str,
    queues: Sequence[str],
    capacity: int,
    code_version: str,
    registry: str,
) -> None:
    async with engine.begin() as conn:
        await conn.execute(
            sql.UPSERT_WORKER,
            {
                "worker_id": worker_id,
                "hostname": hostname,
                "queues": list(queues),
                "capacity": capacity,
                "code_version": code_version,
                "registry": registry,
            },
        )


async def mark_worker_gone(engine: AsyncEngine, *, worker_id: str, registry: str) -> None:
    async with engine.begin() as conn:
        await conn.execute(sql.MARK_WORKER_GONE, {"worker_id": worker_id, "registry": registry})
