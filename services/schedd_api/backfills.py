"""Backfills and schedules, the api's logic: checking a backfill request against the DAG's schedule,
listing the intervals it covers, and the next runs of a schedule."""

from __future__ import annotations

from schedd.v1 import resources_pb2 as pb
from schedd_core.backfill_plan import Reprocess, Strategy, backfill_intervals
from schedd_core.clock import Clock
from schedd_core.errors import FailedPrecondition, InvalidArgument, quote
from schedd_core.limits import check_conf_bytes
from schedd_core.params import check_run_params
from schedd_core.request_key import RequestKey
from schedd_core.schedule_plan import ScheduleState, upcoming_intervals
from schedd_core.timetable_spec import timetable_of
from schedd_core.timetables import DataInterval
from schedd_rpc import convert
from schedd_store import backfills, dags as dag_store, schedules
from schedd_store.backfills import BackfillOptions
from schedd_store.database import Engine
from schedd_store.records import BackfillRecord

DEFAULT_MAX_ACTIVE_RUNS = 4
DEFAULT_CHUNK_SIZE = 10
MAX_ACTIVE_RUNS = 1000
MAX_NEXT_RUNS = 100

_STRATEGIES = {
    pb.BACKFILL_STRATEGY_UNSPECIFIED: Strategy.PARALLEL,
    pb.BACKFILL_STRATEGY_SEQUENTIAL: Strategy.SEQUENTIAL,
    pb.BACKFILL_STRATEGY_PARALLEL: Strategy.PARALLEL,
    pb.BACKFILL_STRATEGY_CHUNKED: Strategy.CHUNKED,
}
_REPROCESS = {
    pb.REPROCESS_BEHAVIOR_UNSPECIFIED: Reprocess.SKIP_EXISTING,
    pb.REPROCESS_BEHAVIOR_SKIP_EXISTING: Reprocess.SKIP_EXISTING,
    pb.REPROCESS_BEHAVIOR_RERUN_FAILED: Reprocess.RERUN_FAILED,
    pb.REPROCESS_BEHAVIOR_RERUN_ALL: Reprocess.RERUN_ALL,
}


async def create(
    engine: Engine,
    clock: Clock,
    dag_id: str,
    request: pb.Backfill,
    *,
    dry_run: bool,
    request_key: RequestKey | None,
) -> BackfillRecord:
    """Check the request (InvalidArgument naming the field, FailedPrecondition for a DAG without a
    schedule), list its intervals by the DAG's latest schedule, and store it unless ``dry_run``."""
    for field in ("start_date", "end_date"):
        if not request.HasField(field):
            raise InvalidArgument(f"backfill.{field}", "is required")
    if request.strategy not in _STRATEGIES:
        raise InvalidArgument("backfill.strategy", f"unknown strategy {request.strategy}")
    if request.reprocess not in _REPROCESS:
        raise InvalidArgument("backfill.reprocess", f"unknown reprocess behaviour {request.reprocess}")
    max_active_runs = _bounded("backfill.max_active_runs", request.max_active_runs, DEFAULT_MAX_ACTIVE_RUNS)
    chunk_size = _bounded("backfill.chunk_size", request.chunk_size, DEFAULT_CHUNK_SIZE)
    spec = (await dag_store.get_dag(engine, dag_id)).spec
    timetable = timetable_of(spec)
    if timetable.kind in ("none", "continuous"):
        raise FailedPrecondition(
            f"dag {quote(dag_id)} has no schedule of ticks or intervals, so there is nothing to backfill"
        )
    conf = convert.from_struct(request.conf) if request.HasField("conf") else None
    if conf is not None:
        check_conf_bytes(request.conf.ByteSize(), "backfill.conf")
        check_run_params(spec, conf, field="backfill.conf")
    options = BackfillOptions(
        dag_id=dag_id,
        start_date=convert.from_ts(request.start_date),
        end_date=convert.from_ts(request.end_date),
        strategy=_STRATEGIES[request.strategy],
        max_active_runs=max_active_runs,
        chunk_size=chunk_size,
        backward=request.backward,
        reprocess=_REPROCESS[request.reprocess],
        conf=conf,
        run_on_latest_version=request.run_on_latest_version,
    )
    intervals = backfill_intervals(
        timetable, options.start_date, options.end_date, backward=options.backward, chunk_size=chunk_size
    )
    if dry_run:
        return backfills.dry_run(options, intervals, clock.now())
    return await backfills.create_backfill(engine, options, intervals, request_key)


def _bounded(field: str, value: int, default: int) -> int:
    if value < 0 or value > MAX_ACTIVE_RUNS:
        raise InvalidArgument(field, f"must be between 1 and {MAX_ACTIVE_RUNS} (0 for {default})")
    return value or default


async def next_runs(engine: Engine, clock: Clock, dag_id: str, count: int) -> list[DataInterval]:
    """The DAG's next scheduled runs: logical dates, data intervals, run times (none for a DAG
    without a schedule)."""
    if count < 0 or count > MAX_NEXT_RUNS:
        raise InvalidArgument("count", f"must be between 1 and {MAX_NEXT_RUNS} (0 for 5)")
    spec = (await dag_store.get_dag(engine, dag_id)).spec
    timetable = timetable_of(spec)
    async with engine.connect() as conn:
        stored = await schedules.stored_schedule(conn, dag_id)
    state = ScheduleState(
        next_interval=stored.next_interval,
        catchup=spec.catchup,
        active_runs=0,
        max_active_runs=0,
        latest_logical_date=stored.latest_logical_date,
        covered_until=stored.covered_until,
    )
    return list(upcoming_intervals(timetable, state, clock.now(), count or 5))
