"""Registering and reading DAGs and their versions."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from schedd.v1 import resources_pb2 as pb
from schedd_core.errors import NotFound, quote
from schedd_core.request_key import RequestKey
from schedd_core.version_identity import canonical, version_hash
from schedd_store import assets, schedules, statements as sql
from schedd_store.database import Engine
from schedd_store.records import DagRecord, parse_spec
from schedd_store.requests import claim_request, record_resource

REGISTER_DAG = "RegisterDag"


@dataclass(frozen=True)
class Registration:
    """What registering a spec did."""

    dag: DagRecord
    #: A new version was stored (False: the spec was identical to a version the DAG had).
    created_version: bool
    #: The DAG's current version hash before the call; "" when the call created the DAG.
    previous_version: str
    created_dag: bool


async def register_dag(
    engine: Engine,
    spec: pb.DagSpec,
    request: RequestKey | None = None,
    *,
    schedule_key: str = "",
    paused_if_created: bool = False,
) -> Registration:
    """Store ``spec`` (already validated) as the DAG's current version.

    A new DAG is created paused when ``paused_if_created``; an existing DAG keeps its paused state.
    An identical spec (same canonical hash) creates no version: the DAG's current version becomes
    that one (which may be an older one than it had). Concurrent registrations
    of one DAG are serialised by a row lock on the DAG. With ``request``, a retry changes nothing and
    the same request id with another spec is refused (AlreadyExists). When ``schedule_key``
    (``schedd_core.timetable_spec.schedule_key``) differs from the stored one, the leader is woken to plan
    the DAG's schedule afresh, in the same transaction.
    """
    spec = canonical(spec)
    vhash = version_hash(spec)
    async with engine.begin() as conn:
        if request is not None:
            if await claim_request(conn, REGISTER_DAG, request.request_id, request.body_hash) is not None:
                row = (await conn.execute(sql.GET_DAG, {"dag_id": spec.dag_id})).one()
                return Registration(_dag(row._mapping), False, row.version_hash, False)
            await record_resource(
                conn, REGISTER_DAG, request.request_id, f"dags/{spec.dag_id}/versions/{vhash}"
            )
        created_dag = (
            await conn.execute(sql.ENSURE_DAG, {"dag_id": spec.dag_id, "paused": paused_if_created})
        ).first() is not None
        previous = (await conn.execute(sql.LOCK_DAG_CURRENT_VERSION, {"dag_id": spec.dag_id})).scalar()
        params = {"dag_id": spec.dag_id, "version_hash": vhash}
        inserted = (
            await conn.execute(
                sql.INSERT_DAG_VERSION,
                {**params, "spec": spec.SerializeToString(), "task_count": len(spec.tasks)},
            )
        ).scalar()
        version_id = inserted or (await conn.execute(sql.FIND_DAG_VERSION, params)).scalar_one()
        if inserted:
            await assets.record_refs(conn, version_id, spec)
        await conn.execute(sql.SET_LATEST_VERSION, {"dag_id": spec.dag_id, "version_id": version_id})
        await schedules.reset_schedule(conn, spec.dag_id, schedule_key)
        row = (await conn.execute(sql.GET_DAG, {"dag_id": spec.dag_id})).one()
    return Registration(_dag(row._mapping), inserted is not None, previous or "", created_dag)


async def get_dag(engine: Engine, dag_id: str) -> DagRecord:
    async with engine.autocommit() as conn:  # one read: no transaction around it
        row = (await conn.execute(sql.GET_DAG, {"dag_id": dag_id})).first()
    if row is None:
        raise NotFound(f"dag {quote(dag_id)} not found")
    return _dag(row._mapping)


async def list_dags(engine: Engine, *, after: str, limit: int) -> list[DagRecord]:
    """DAGs ordered by id, starting after ``after`` (keyset pagination)."""
    async with engine.connect() as conn:
        rows = (await conn.execute(sql.LIST_DAGS, {"after": after, "limit": limit})).all()
    return [_dag(r._mapping) for r in rows]


@dataclass(frozen=True)
class VersionRecord:
    id: int
    dag_id: str
    version_hash: str
    created_at: datetime
    task_count: int
    #: Only when read one by one (``get_version``).
    spec: pb.DagSpec | None = None
    #: The DAG's current version (the one new runs use).
    current: bool = False


async def list_versions(engine: Engine, dag_id: str, *, before: int, limit: int) -> list[VersionRecord]:
    """The DAG's versions, newest first, below the version id ``before``; NotFound for no such DAG."""
    async with engine.connect() as conn:
        if (await conn.execute(sql.DAG_EXISTS, {"dag_id": dag_id})).first() is None:
            raise NotFound(f"dag {quote(dag_id)} not found")
        rows = (
            await conn.execute(sql.LIST_DAG_VERSIONS, {"dag_id": dag_id, "before": before, "limit": limit})
        ).all()
    return [
        VersionRecord(r.id, dag_id, r.version_hash, r.created_at, r.task_count, current=r.current)
        for r in rows
    ]


async def get_version(engine: Engine, dag_id: str, version_hash: str) -> VersionRecord:
    async with engine.connect() as conn:
        row = (
            await conn.execute(sql.GET_DAG_VERSION, {"dag_id": dag_id, "version_hash": version_hash})
        ).first()
    if row is None:
        raise NotFound(f"version {quote(version_hash)} of dag {quote(dag_id)} not found")
    return VersionRecord(
        row.id, dag_id, row.version_hash, row.created_at, row.task_count, parse_spec(row.spec), row.current
    )


def _dag(m: Any) -> DagRecord:
    return DagRecord(
        dag_id=m["dag_id"],
        paused=m["paused"],
        created_at=m["created_at"],
        updated_at=m["updated_at"],
        version_hash=m["version_hash"],
        version_created_at=m["version_created_at"],
        spec=parse_spec(m["spec"]),
    )
