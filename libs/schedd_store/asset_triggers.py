"""The leader's side of asset scheduling: runs made from the events queued for DAGs, fenced.

Inside one fenced transaction the leader locks the unpaused DAGs with queued events
(:func:`lock_queued_dags`), reads their queued events (:func:`queued_events`), makes one
asset-triggered run for each DAG whose condition the events meet (:func:`make_runs`), and records
that this run consumed those events and takes them off the queue (:func:`consume`). The primary key
of ``asset_event_consumptions`` (dag, event) refuses a second consumption of an event by a DAG,
whoever tries: a deposed leader's transaction fails at the fence before it gets there, and a
transaction of a term that ends mid-step commits nothing, so the next leader finds the same events
queued and makes the run once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from asyncpg import IntegrityConstraintViolationError

from schedd_core.errors import AlreadyExists
from schedd_core.states import RunType
from schedd_store import statements as sql
from schedd_store.fence import FencedConnection
from schedd_store.requests import constraint_error
from schedd_store.schedules import run_id_for


class EventConsumed(AlreadyExists):
    """A DAG has consumed one of these asset events already."""


@dataclass(frozen=True)
class QueuedDag:
    dag_id: str
    version_id: int


@dataclass(frozen=True)
class QueuedEvent:
    dag_id: str
    event_id: int
    uri: str


@dataclass(frozen=True)
class AssetRun:
    """A run to make for a DAG and the queued events it consumes."""

    dag_id: str
    version_id: int
    event_ids: tuple[int, ...]


async def lock_queued_dags(
    conn: FencedConnection, *, only: Sequence[str] | None, limit: int
) -> list[QueuedDag]:
    rows = (
        await conn.execute(
            sql.LOCK_ASSET_QUEUED_DAGS, {"only": list(only) if only is not None else None, "limit": limit}
        )
    ).all()
    return [QueuedDag(r.dag_id, int(r.latest_version_id)) for r in rows]


async def queued_events(conn: FencedConnection, dag_ids: Sequence[str]) -> list[QueuedEvent]:
    if not dag_ids:
        return []
    rows = (await conn.execute(sql.QUEUED_ASSET_EVENTS, {"dag_ids": list(dag_ids)})).all()
    return [QueuedEvent(r.dag_id, int(r.event_id), r.uri) for r in rows]


async def make_runs(conn: FencedConnection, runs: Sequence[AssetRun], *, now: datetime) -> dict[str, int]:
    """Make a queued asset-triggered run per entry (logical date ``now``); their ids by DAG id."""
    if not runs:
        return {}
    rows = (
        await conn.execute(
            sql.INSERT_ASSET_RUNS,
            {
                "dag_ids": [r.dag_id for r in runs],
                "version_ids": [r.version_id for r in runs],
                "run_ids": [run_id_for(RunType.ASSET_TRIGGERED, now) for _ in runs],
                "now": now,
                "token": conn.token,
            },
        )
    ).all()
    return {r.dag_id: int(r.id) for r in rows}


async def consume(conn: FencedConnection, runs: Sequence[AssetRun], run_pks: dict[str, int]) -> None:
    """Record that each run consumed its events (EventConsumed, and the transaction is lost, if a DAG
    consumed one already)."""
    pairs = [(r.dag_id, e, run_pks[r.dag_id]) for r in runs for e in r.event_ids]
    if not pairs:
        return
    try:
        await conn.execute(
            sql.CONSUME_ASSET_EVENTS,
            {
                "dag_ids": [p[0] for p in pairs],
                "event_ids": [p[1] for p in pairs],
                "run_pks": [p[2] for p in pairs],
                "token": conn.token,
            },
        )
    except IntegrityConstraintViolationError as exc:
        error = constraint_error(
            exc, {"asset_event_consumptions_pkey": EventConsumed("an asset event was consumed already")}
        )
        if error is None:
            raise
        raise error from exc
    await dequeue(conn, [(p[0], p[1]) for p in pairs])


async def dequeue(conn: FencedConnection, pairs: Sequence[tuple[str, int]]) -> None:
    """Take (dag, event) pairs off the queue."""
    if pairs:
        await conn.execute(
            sql.DEQUEUE_ASSET_EVENTS,
            {"dag_ids": [p[0] for p in pairs], "event_ids": [p[1] for p in pairs]},
        )
