"""Store records to protobuf messages."""

from __future__ import annotations

from datetime import datetime

from schedd.v1 import api_pb2, resources_pb2 as pb
from schedd_coord.election import LeaderInfo
from schedd_core.timetables import DataInterval
from schedd_rpc import convert, names
from schedd_store.dags import VersionRecord
from schedd_store.pools import PoolRecord
from schedd_store.records import BackfillRecord, DagRecord, RunRecord, TaskInstanceRecord
from schedd_store.workers import WorkerRecord


def dag(record: DagRecord) -> pb.Dag:
    return pb.Dag(
        name=names.dag_name(record.dag_id),
        dag_id=record.dag_id,
        paused=record.paused,
        latest_version=record.version_hash,
        create_time=convert.ts(record.created_at),
        update_time=convert.ts(record.updated_at),
        spec=record.spec,
    )


def dag_version(record: DagRecord) -> pb.DagVersion:
    return pb.DagVersion(
        name=f"{names.dag_name(record.dag_id)}/versions/{record.version_hash}",
        version_hash=record.version_hash,
        create_time=convert.ts(record.version_created_at),
        spec=record.spec,
        task_count=len(record.spec.tasks),
        current=True,
    )


def version(record: VersionRecord) -> pb.DagVersion:
    message = pb.DagVersion(
        name=f"{names.dag_name(record.dag_id)}/versions/{record.version_hash}",
        version_hash=record.version_hash,
        create_time=convert.ts(record.created_at),
        task_count=record.task_count,
        current=record.current,
    )
    if record.spec is not None:
        message.spec.CopyFrom(record.spec)
    return message


def run(record: RunRecord) -> pb.DagRun:
    message = pb.DagRun(
        name=names.run_name(record.dag_id, record.run_id),
        dag_id=record.dag_id,
        run_id=record.run_id,
        state=pb.RunState.Value("RUN_STATE_" + record.state.upper()),
        run_type=pb.RunType.Value("RUN_TYPE_" + record.run_type.upper()),
        logical_date=convert.ts(record.logical_date),
        create_time=convert.ts(record.created_at),
        start_time=convert.ts(record.started_at),
        end_time=convert.ts(record.ended_at),
        dag_version=record.version_hash,
        conf=convert.struct(record.conf),
        task_instances=[task_instance(record, t) for t in record.task_instances],
        error=record.error or "",
        cancelled=record.cancelled,
        task_state_counts=[
            pb.TaskStateCount(state=pb.TaskState.Value("TASK_STATE_" + state.upper()), count=n)
            for state, n in sorted(record.task_state_counts.items())
        ],
    )
    if record.data_interval_start is not None and record.data_interval_end is not None:
        message.data_interval.CopyFrom(interval(record.data_interval_start, record.data_interval_end))
    if record.backfill_id is not None:
        message.backfill = names.backfill_name(record.backfill_id)
    return message


def interval(start: datetime, end: datetime) -> pb.DataInterval:
    return pb.DataInterval(start=convert.ts(start), end=convert.ts(end))


def intervals(found: list[DataInterval]) -> list[pb.DataInterval]:
    """Runs to be made: each interval with its logical date and run time."""
    return [
        pb.DataInterval(
            start=convert.ts(i.start),
            end=convert.ts(i.end),
            logical_date=convert.ts(i.logical_date),
            run_after=convert.ts(i.run_after),
        )
        for i in found
    ]


_STRATEGY = {
    "sequential": pb.BACKFILL_STRATEGY_SEQUENTIAL,
    "parallel": pb.BACKFILL_STRATEGY_PARALLEL,
    "chunked": pb.BACKFILL_STRATEGY_CHUNKED,
}
_REPROCESS = {
    "skip_existing": pb.REPROCESS_BEHAVIOR_SKIP_EXISTING,
    "rerun_failed": pb.REPROCESS_BEHAVIOR_RERUN_FAILED,
    "rerun_all": pb.REPROCESS_BEHAVIOR_RERUN_ALL,
}


def backfill(record: BackfillRecord) -> pb.Backfill:
    p = record.progress
    message = pb.Backfill(
        name=names.backfill_name(record.id) if record.id else "",
        dag_id=record.dag_id,
        start_date=convert.ts(record.start_date),
        end_date=convert.ts(record.end_date),
        strategy=_STRATEGY[record.strategy],
        max_active_runs=record.max_active_runs,
        chunk_size=record.chunk_size,
        backward=record.backward,
        reprocess=_REPROCESS[record.reprocess],
        state=pb.BackfillState.Value("BACKFILL_STATE_" + record.state.upper()),
        create_time=convert.ts(record.created_at),
        update_time=convert.ts(record.updated_at),
        progress=pb.BackfillProgress(
            total=p.total,
            pending=p.pending,
            running=p.running,
            succeeded=p.succeeded,
            failed=p.failed,
            skipped=p.skipped,
        ),
        error=record.error or "",
        intervals=[
            pb.DataInterval(start=convert.ts(start), end=convert.ts(end), logical_date=convert.ts(logical))
            for start, end, logical in record.intervals
        ],
        run_on_latest_version=record.run_on_latest_version,
    )
    if record.conf is not None:
        message.conf.CopyFrom(convert.struct(record.conf))
    return message


def task_instance(run_record: RunRecord, t: TaskInstanceRecord) -> pb.TaskInstance:
    """Named by its key (``.../tasks/{task_id}[{map_index}]`` for a mapped instance); ``task_id`` is the
    plain task id and ``map_index`` -1 for a task instance that is not one of a mapped task's."""
    return pb.TaskInstance(
        name=names.task_name(run_record.dag_id, run_record.run_id, t.key),
        task_id=t.task_id,
        map_index=t.map_index,
        state=pb.TaskState.Value("TASK_STATE_" + t.state.upper()),
        try_number=t.try_number,
        max_tries=t.max_tries,
        attempt_id=t.attempt_id or "",
        worker_id=t.worker_id or "",
        queued_time=convert.ts(t.queued_at),
        start_time=convert.ts(t.started_at),
        end_time=convert.ts(t.ended_at),
        exit_code=t.exit_code or 0,
        error=t.error or "",
        priority_weight=t.priority_weight,
        pool=t.pool,
        queue=t.queue,
        dag_version=t.version_hash or "",
    )


def replica(info: LeaderInfo) -> api_pb2.SchedulerReplica:
    since = convert.ts(datetime.fromisoformat(info.since)) if info.since else None
    return api_pb2.SchedulerReplica(identity=info.identity, address=info.address, since=since)


def worker(record: WorkerRecord) -> api_pb2.Worker:
    return api_pb2.Worker(
        name=f"workers/{record.worker_id}",
        worker_id=record.worker_id,
        hostname=record.hostname,
        queues=record.queues,
        capacity=record.capacity,
        running=record.running,
        state=record.state,
        code_version=record.code_version,
        registry=record.registry,
        register_time=convert.ts(record.registered_at),
        last_seen_time=convert.ts(record.last_seen_at),
    )


def pool(record: PoolRecord) -> api_pb2.Pool:
    return api_pb2.Pool(
        name=f"pools/{record.name}",
        pool=record.name,
        slots=record.slots,
        description=record.description,
        used=record.used,
        waiting=record.waiting,
        backfill_share=record.backfill_share,
    )
