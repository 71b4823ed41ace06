"""Runs made for data intervals (scheduled and backfill runs), and the schedule state of DAGs.

The leader's side runs inside a fenced transaction: :func:`lock_due_dags` locks the DAGs to look
at, :func:`create_interval_runs` makes their runs, :func:`keep_schedule_states` stores what comes
next. A scheduled or backfill run is identified by its DAG and logical date: the partial unique
index ``dag_runs_dag_logical_date_key`` makes a second one impossible, whoever tries (another
term, a backfill), and its violation is reported as :class:`RunExists`, never guessed from a
silently skipped insert. Callers check the dates first (:func:`taken_logical_dates`) under the
DAG's row lock, so the constraint is the last line, not the plan.

The api's side wakes the leader: :func:`reset_schedule` when a registration changes a DAG's
schedule fields, :func:`wake_schedule` when a DAG is unpaused.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from asyncpg import IntegrityConstraintViolationError

from schedd_core.errors import AlreadyExists
from schedd_core.states import RunType
from schedd_core.timetables import DataInterval
from schedd_store import statements as sql
from schedd_store.database import Connection
from schedd_store.fence import FencedConnection
from schedd_store.requests import constraint_error


class RunExists(AlreadyExists):
    """A scheduled or backfill run of the DAG has that logical date already."""


@dataclass(frozen=True)
class DueDag:
    dag_id: str
    version_id: int
    next_interval: DataInterval | None
    #: Runs of the DAG queued or running, other than backfill runs.
    active_runs: int
    #: Without a stored next run: where planning starts (see schedd_core.schedule_plan).
    latest_logical_date: datetime | None
    covered_until: datetime | None


@dataclass(frozen=True)
class NewRun:
    """A run to make for one interval of one DAG version."""

    dag_id: str
    version_id: int
    interval: DataInterval


@dataclass(frozen=True)
class ScheduleState:
    """What to keep for one DAG: its next run and when to look again (None: not on a timer)."""

    dag_id: str
    next_interval: DataInterval | None
    due_at: datetime | None


def run_id_for(run_type: RunType, logical_date: datetime) -> str:
    """``scheduled__2024-01-01T00.00.00Z``: the default run id of a run, its type and logical date
    (UTC, with microseconds when it has any; ``.`` for ``:``, which ids may not contain)."""
    moment = logical_date.astimezone(UTC)
    fraction = f".{moment:%f}" if moment.microsecond else ""
    return f"{run_type.value}__{moment:%Y-%m-%dT%H.%M.%S}{fraction}Z"


async def lock_due_dags(
    conn: FencedConnection,
    *,
    now: datetime,
    woken: Sequence[str] = (),
    held: bool = False,
    only: Sequence[str] | None = None,
    limit: int,
) -> list[DueDag]:
    """Lock the DAGs to look at now (see LOCK_DUE_DAGS), at most ``limit``, earliest due first."""
    rows = (
        await conn.execute(
            sql.LOCK_DUE_DAGS,
            {
                "now": now,
                "woken": list(woken),
                "held": held,
                "only": list(only) if only is not None else None,
                "limit": limit,
            },
        )
    ).all()
    return [
        DueDag(
            dag_id=r.dag_id,
            version_id=int(r.latest_version_id),
            next_interval=_next_interval(r),
            active_runs=int(r.active_runs),
            latest_logical_date=r.latest_logical_date,
            covered_until=r.covered_until,
        )
        for r in rows
    ]


async def taken_logical_dates(
    conn: FencedConnection, pairs: Sequence[tuple[str, datetime]]
) -> set[tuple[str, datetime]]:
    """The (dag, logical date) pairs that have a scheduled or backfill run already."""
    if not pairs:
        return set()
    rows = (
        await conn.execute(
            sql.TAKEN_LOGICAL_DATES,
            {"dag_ids": [d for d, _ in pairs], "dates": [t for _, t in pairs]},
        )
    ).all()
    return {(r.dag_id, r.logical_date) for r in rows}


async def create_interval_runs(
    conn: FencedConnection,
    runs: Sequence[NewRun],
    *,
    run_type: RunType,
    backfill_id: int | None = None,
) -> dict[tuple[str, datetime], int]:
    """Make queued runs for ``runs``; returns their ids by (dag, logical date). Raises RunExists
    (and the transaction is lost) when a logical date is taken."""
    if not runs:
        return {}
    params = {
        "dag_ids": [r.dag_id for r in runs],
        "version_ids": [r.version_id for r in runs],
        "run_ids": [run_id_for(run_type, r.interval.logical_date) for r in runs],
        "logical": [r.interval.logical_date for r in runs],
        "starts": [r.interval.start for r in runs],
        "ends": [r.interval.end for r in runs],
        "run_type": run_type.value,
        "backfill_id": backfill_id,
        "token": conn.token,
    }
    try:
        rows = (await conn.execute(sql.INSERT_INTERVAL_RUNS, params)).all()
    except IntegrityConstraintViolationError as exc:
        error = constraint_error(
            exc,
            {
                "dag_runs_dag_logical_date_key": RunExists(
                    "a scheduled or backfill run exists already for one of these logical dates"
                ),
                "dag_runs_dag_run_id_key": RunExists("a run with one of these run ids exists already"),
            },
        )
        if error is None:
            raise
        raise error from exc
    return {(r.dag_id, r.logical_date): int(r.id) for r in rows}


async def keep_schedule_states(conn: FencedConnection, states: Sequence[ScheduleState]) -> None:
    if not states:
        return
    await conn.execute(
        sql.SET_SCHEDULE_STATES,
        {
            "dag_ids": [s.dag_id for s in states],
            "next_starts": [s.next_interval.start if s.next_interval else None for s in states],
            "next_ends": [s.next_interval.end if s.next_interval else None for s in states],
            "next_logicals": [s.next_interval.logical if s.next_interval else None for s in states],
            "due_ats": [s.due_at for s in states],
        },
    )


async def stop_schedule(conn: FencedConnection, dag_id: str) -> None:
    """Take a DAG off the timer (registering or unpausing it puts it back)."""
    await conn.execute(sql.STOP_SCHEDULE, {"dag_id": dag_id})


async def next_due(conn: Connection) -> datetime | None:
    """The earliest moment an unpaused DAG's schedule must be looked at."""
    value: datetime | None = (await conn.execute(sql.NEXT_SCHEDULE_DUE)).scalar()
    return value


async def reset_schedule(conn: Connection, dag_id: str, schedule_key: str) -> None:
    """After a registration: when the DAG's schedule fields changed, the leader plans it afresh (now)."""
    await conn.execute(sql.RESET_SCHEDULE, {"dag_id": dag_id, "schedule_key": schedule_key})


async def wake_schedule(conn: Connection, dag_id: str) -> None:
    """After an unpause: the leader looks at the DAG's schedule now."""
    await conn.execute(sql.WAKE_SCHEDULE, {"dag_id": dag_id})


@dataclass(frozen=True)
class StoredSchedule:
    """A DAG's stored next run and, without one, where planning starts."""

    next_interval: DataInterval | None
    latest_logical_date: datetime | None
    covered_until: datetime | None


async def stored_schedule(conn: Connection, dag_id: str) -> StoredSchedule:
    """The DAG's stored schedule state (all None for an unknown DAG)."""
    row = (await conn.execute(sql.SCHEDULE_STATE_OF_DAG, {"dag_id": dag_id})).first()
    if row is None:
        return StoredSchedule(None, None, None)
    return StoredSchedule(_next_interval(row), row.latest_logical_date, row.covered_until)


def _next_interval(row: Any) -> DataInterval | None:
    if row.next_interval_start is None:
        return None
    return DataInterval(row.next_interval_start, row.next_interval_end, logical=row.next_logical_date)
