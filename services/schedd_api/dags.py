"""Registering DAGs: validation against the current pools, then a version in the store."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncEngine

from schedd.v1 import resources_pb2 as pb
from schedd_core.errors import NotFound
from schedd_core.spec import canonical, validate_spec, version_hash
from schedd_core.timetables import schedule_key
from schedd_store import dags, pools
from schedd_store.records import DagRecord
from schedd_store.requests import RequestKey


async def register(
    engine: AsyncEngine, spec: pb.DagSpec, request: RequestKey | None = None
) -> tuple[DagRecord, bool]:
    """Validate ``spec`` (raising InvalidArgument naming the field) and store it as the latest version;
    a new or changed schedule wakes the leader."""
    validate_spec(spec, known_pools=await pools.pool_sizes(engine))
    return await dags.register_dag(engine, spec, request, schedule_key=schedule_key(spec))


async def check(engine: AsyncEngine, spec: pb.DagSpec) -> tuple[str, bool]:
    """Validate ``spec`` as ``register`` would; return its version hash and whether registering it
    would make a new version. Stores nothing."""
    validate_spec(spec, known_pools=await pools.pool_sizes(engine))
    vhash = version_hash(canonical(spec))
    try:
        await dags.get_version(engine, spec.dag_id, vhash)
    except NotFound:
        return vhash, True
    return vhash, False
