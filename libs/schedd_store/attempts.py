"""Reading every attempt (try) of a run's task instances, earlier tries included.

Guaranteed: attempts come by task instance (in the order the task instances were made), then by
try number and claim time; at most ``limit`` of them, with whether there were more. Not
guaranteed: a consistent view with a ``GetRun`` made at another moment (attempts may start or end
between the two reads).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from schedd_core.errors import NotFound, quote
from schedd_store import statements as sql
from schedd_store.database import Engine

#: Attempts one read returns at most.
MAX_ATTEMPTS = 10_000


@dataclass(frozen=True)
class AttemptRecord:
    task_id: str
    map_index: int
    try_number: int
    worker_id: str
    state: str
    claimed_at: datetime
    started_at: datetime | None
    ended_at: datetime | None
    exit_code: int | None
    error: str | None


async def list_attempts(
    engine: Engine, dag_id: str, run_id: str, limit: int = MAX_ATTEMPTS
) -> tuple[list[AttemptRecord], bool]:
    """The run's attempts (see the module) and whether more than ``limit`` exist; NotFound for no
    such run."""
    async with engine.connect() as conn:
        run = (await conn.execute(sql.GET_RUN, {"dag_id": dag_id, "run_id": run_id})).first()
        if run is None:
            raise NotFound(f"run {quote(run_id)} of dag {quote(dag_id)} not found")
        rows = (await conn.execute(sql.LIST_RUN_ATTEMPTS, {"run_pk": run.id, "limit": limit + 1})).all()
    records = [
        AttemptRecord(
            r.task_id,
            r.map_index,
            r.try_number,
            r.worker_id,
            r.state,
            r.claimed_at,
            r.started_at,
            r.ended_at,
            r.exit_code,
            r.error,
        )
        for r in rows[:limit]
    ]
    return records, len(rows) > limit
