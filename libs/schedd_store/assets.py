"""Assets and their events in the store: what DAG versions name, events from tasks, the api and
watchers, and lineage.

Every event is written with the queue entries of the DAGs scheduled on its asset (their current
versions) in the same statement, so an event is never recorded without being queued for them, and
the leader is notified (``schedd_assets``, a hint) once per DAG. A task's outlet events are recorded
by the statement that applies its success (``statements.APPLY_RESULTS``, run by
``schedd_store.dispatch.apply_results``): the success and its events commit together or not at all.
Events from the api and the watchers carry an idempotency key; a key recorded already records
nothing (a retried request, a redelivered message).

Not guaranteed: a DAG registered (or newly scheduled on an asset) after an event was recorded does
not see that event.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from schedd.v1 import resources_pb2 as pb
from schedd_core.assets import spec_assets
from schedd_core.errors import NotFound
from schedd_store import statements as sql
from schedd_store.database import Connection, Engine
from schedd_store.fence import FencedConnection


@dataclass(frozen=True)
class NewEvent:
    uri: str
    extra: dict[str, Any]
    #: Unique per event: the same key again records nothing. None: no key.
    key: str | None = None


@dataclass(frozen=True)
class EventRecord:
    id: int
    uri: str
    extra: dict[str, Any]
    source: str
    source_dag_id: str
    source_run_id: str
    source_task_id: str
    source_watcher: str
    created_at: datetime
    consumed_by: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class AssetRecord:
    uri: str
    name: str
    last_event_at: datetime | None
    #: (dag id, task id) of the tasks of current DAG versions that update it.
    producers: list[tuple[str, str]]
    #: DAGs whose current version is scheduled on it.
    scheduled_dags: list[str]
    #: (dag id, task id) of the tasks that read it.
    readers: list[tuple[str, str]]


async def record_refs(conn: Connection, version_id: int, spec: pb.DagSpec) -> None:
    """Store the assets a new DAG version names (its URIs normalised already), creating new assets."""
    refs = spec_assets(spec)
    if not refs:
        return
    names: dict[str, str] = {}
    for _, _, uri, name in refs:
        names[uri] = names.get(uri) or name
    await conn.execute(sql.ENSURE_ASSETS, {"uris": list(names), "names": list(names.values())})
    await conn.execute(
        sql.INSERT_ASSET_REFS,
        {
            "version_id": version_id,
            "dag_id": spec.dag_id,
            "roles": [r[0] for r in refs],
            "task_ids": [r[1] for r in refs],
            "uris": [r[2] for r in refs],
        },
    )


async def record_events(
    conn: Connection | FencedConnection, events: Sequence[NewEvent], *, source: str, watcher: str = ""
) -> list[int]:
    """Record ``events`` (from the api or a watcher) in the caller's transaction; returns the ids of
    those recorded now (an event whose key is recorded already is left out)."""
    if not events:
        return []
    uris = list(dict.fromkeys(e.uri for e in events))
    await conn.execute(sql.ENSURE_ASSETS, {"uris": uris, "names": [""] * len(uris)})
    rows = (
        await conn.execute(
            sql.RECORD_EVENTS,
            {
                "uris": [e.uri for e in events],
                "extras": [json.dumps(e.extra) for e in events],
                "keys": [e.key for e in events],
                "source": source,
                "watcher": watcher,
            },
        )
    ).all()
    return [int(r.id) for r in rows]


async def create_event(engine: Engine, event: NewEvent) -> EventRecord:
    """Record one event from the api; with a key recorded already, the event recorded then."""
    async with engine.begin() as conn:
        ids = await record_events(conn, [event], source="api")
        if not ids and event.key is not None:
            ids = [int((await conn.execute(sql.EVENT_BY_KEY, {"key": event.key})).scalar_one())]
        row = (await conn.execute(sql.GET_EVENT, {"id": ids[0]})).one()
    return _event(row)


async def list_events(
    engine: Engine, *, uri: str, run_pk: int | None, before: int, limit: int
) -> list[EventRecord]:
    async with engine.connect() as conn:
        rows = (
            await conn.execute(
                sql.LIST_EVENTS, {"uri": uri, "run_pk": run_pk, "before": before, "limit": limit}
            )
        ).all()
    return [_event(r) for r in rows]


async def list_assets(engine: Engine, *, prefix: str, after: str, limit: int) -> list[AssetRecord]:
    async with engine.connect() as conn:
        rows = (await conn.execute(sql.LIST_ASSETS, {"prefix": prefix, "after": after, "limit": limit})).all()
    return [_asset(r) for r in rows]


async def get_asset(engine: Engine, uri: str) -> AssetRecord:
    found = await list_assets(engine, prefix=uri, after="", limit=1)
    if not found or found[0].uri != uri:
        raise NotFound(f"asset {uri!r} does not exist")
    return found[0]


def _asset(row: Any) -> AssetRecord:
    refs = [str(r).split("|", 2) for r in row.refs]
    return AssetRecord(
        uri=row.uri,
        name=row.name,
        last_event_at=row.last_event_at,
        producers=[(d, t) for role, d, t in refs if role == "outlet"],
        scheduled_dags=[d for role, d, _ in refs if role == "schedule"],
        readers=[(d, t) for role, d, t in refs if role == "inlet"],
    )


def _event(row: Any) -> EventRecord:
    return EventRecord(
        id=int(row.id),
        uri=row.uri,
        extra=dict(row.extra or {}),
        source=row.source,
        source_dag_id=row.source_dag_id or "",
        source_run_id=row.source_run_id or "",
        source_task_id=row.source_task_id or "",
        source_watcher=row.source_watcher or "",
        created_at=row.created_at,
        consumed_by=list(row.consumed_by),
    )


async def watcher_cursor(conn: FencedConnection, watcher: str) -> int:
    """How far a table watcher has delivered (0: nothing yet); its row stays locked until commit."""
    value = (await conn.execute(sql.WATCHER_CURSOR, {"watcher": watcher})).scalar()
    return int(value or 0)


async def set_watcher_cursor(conn: FencedConnection, watcher: str, position: int) -> None:
    await conn.execute(
        sql.SET_WATCHER_CURSOR, {"watcher": watcher, "position": position, "token": conn.token}
    )
