"""Reading the runs a deadline may apply to, and recording missed deadlines (fenced).

A miss is recorded at most once per run: ``deadline_misses`` has the run as primary key and the
insert skips a run already recorded, in the same statement that writes the miss's outbox event. So
the event exists exactly when the miss was recorded, once, whichever leader records it, and however
often a leader (or its successor after a failover) repeats the look. The event is then delivered at
least once by the outbox relays (its ``event_id`` is stable, for receivers to dedupe).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from google.protobuf.message import DecodeError

from schedd.v1 import resources_pb2 as pb
from schedd_core.deadline_alerts import RunDeadline, deadline_rule
from schedd_store import statements as sql
from schedd_store.database import Connection, Engine
from schedd_store.fence import FencedConnection


@dataclass(frozen=True)
class UnfinishedRun:
    run_pk: int
    dag_version_id: int
    logical_date: datetime
    queued_at: datetime


async def unfinished_runs(conn: Connection) -> tuple[datetime, list[UnfinishedRun]]:
    """The database's now() and the unfinished runs whose miss is not recorded."""
    rows = (await conn.execute(sql.UNFINISHED_RUNS_FOR_DEADLINES)).all()
    now = rows[0].now if rows else (await conn.execute(sql.NOW)).scalar_one()
    return now, [UnfinishedRun(r.id, r.dag_version_id, r.logical_date, r.created_at) for r in rows]


async def record(conn: FencedConnection, missed: tuple[RunDeadline, ...], notify: set[int]) -> list[int]:
    """Record these misses (each once; only runs still unfinished); returns the runs recorded now."""
    if not missed:
        return []
    rows = (
        await conn.execute(
            sql.RECORD_DEADLINE_MISSES,
            {
                "token": conn.token,
                "run_pks": [m.run_pk for m in missed],
                "ats": [m.at for m in missed],
                "notify_pks": sorted(notify),
            },
        )
    ).all()
    return sorted(int(r.run_pk) for r in rows)


async def run_deadline(engine: Engine, dag_id: str, run_id: str) -> tuple[datetime | None, datetime | None]:
    """A run's deadline (None when its DAG version has none, or its stored spec cannot be read: the
    leader fails such a run, saying why) and when its miss was recorded (None while it was not)."""
    async with engine.connect() as conn:
        row = (await conn.execute(sql.RUN_DEADLINE, {"dag_id": dag_id, "run_id": run_id})).one_or_none()
    if row is None:
        return None, None
    if row.missed_at is not None:
        return row.deadline_at, row.missed_at
    try:
        spec = pb.DagSpec.FromString(bytes(row.spec))
    except DecodeError:
        return None, None
    rule = deadline_rule(spec)
    return (None if rule is None else rule.deadline(row.logical_date, row.created_at)), None


def describe_miss(deadline: datetime | None, missed: datetime | None) -> str:
    """The line ``explain`` adds for a run that missed its deadline ("" otherwise)."""
    if deadline is None or missed is None:
        return ""
    return f"the run missed its deadline {deadline.isoformat()} (recorded {missed.isoformat()})"
