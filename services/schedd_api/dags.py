"""Registering DAGs: validation against the current pools, then a version in the store."""

from __future__ import annotations

from schedd.v1 import resources_pb2 as pb
from schedd_core.assets import normalize_spec_assets
from schedd_core.bundle_archive import check_sha256
from schedd_core.errors import FailedPrecondition, NotFound
from schedd_core.request_key import RequestKey
from schedd_core.spec import validate_spec
from schedd_core.timetable_spec import resolve_cron_semantics, schedule_key
from schedd_core.version_identity import canonical, version_hash
from schedd_store import bundles, dags, pools
from schedd_store.database import Engine


async def register(
    engine: Engine,
    spec: pb.DagSpec,
    request: RequestKey | None = None,
    *,
    paused_if_created: bool = False,
    cron_data_intervals: bool = True,
) -> dags.Registration:
    """Validate ``spec`` (raising InvalidArgument naming the field) and store it as the current version;
    a new or changed schedule wakes the leader. A DAG this creates starts paused when
    ``paused_if_created``. A plain cron schedule's meaning is fixed in the stored spec by the
    deployment's ``cron_data_intervals`` (``schedd_core.timetable_spec.resolve_cron_semantics``), so
    the leader never depends on a setting."""
    spec = normalize_spec_assets(resolve_cron_semantics(spec, create_cron_data_intervals=cron_data_intervals))
    validate_spec(spec, known_pools=await pools.pool_sizes(engine))
    await _check_bundle(engine, spec)
    return await dags.register_dag(
        engine, spec, request, schedule_key=schedule_key(spec), paused_if_created=paused_if_created
    )


async def check(engine: Engine, spec: pb.DagSpec, *, cron_data_intervals: bool = True) -> tuple[str, bool]:
    """Validate ``spec`` as ``register`` would (except that its code bundle need not be stored yet);
    return its version hash and whether registering it would make a new version. Stores nothing."""
    spec = normalize_spec_assets(resolve_cron_semantics(spec, create_cron_data_intervals=cron_data_intervals))
    validate_spec(spec, known_pools=await pools.pool_sizes(engine))
    if spec.code_bundle:  # uploaded only after every spec was checked (schedctl dags register)
        check_sha256(spec.code_bundle, "spec.code_bundle")
    vhash = version_hash(canonical(spec))
    try:
        await dags.get_version(engine, spec.dag_id, vhash)
    except NotFound:
        return vhash, True
    return vhash, False


async def _check_bundle(engine: Engine, spec: pb.DagSpec) -> None:
    """A spec naming a code bundle names one that is stored (uploaded first), as workers fetch it
    when they run the DAG's Python tasks."""
    if not spec.code_bundle:
        return
    try:
        await bundles.bundle_size(engine, spec.code_bundle, "spec.code_bundle")
    except NotFound:
        raise FailedPrecondition(
            f"spec.code_bundle: bundle {spec.code_bundle} was never uploaded; upload it first "
            "(schedctl dags register does)"
        ) from None
