"""gRPC servicers of the api: message translation only; the logic lives in ``dags`` and ``runs``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import grpc
from sqlalchemy.ext.asyncio import AsyncEngine

from schedd.v1 import api_pb2, api_pb2_grpc
from schedd.v1 import resources_pb2 as pb
from schedd_api import backfills, cluster, dags, runs, translate
from schedd_api.paging import keyset_token, page, page_size
from schedd_api.watch import RunWatchers
from schedd_coord.client import EtcdClient
from schedd_core.clock import Clock
from schedd_core.errors import InvalidArgument, NotFound, quote
from schedd_core.states import TaskState
from schedd_faults import FaultPoints
from schedd_rpc import convert, names
from schedd_rpc.request_keys import request_key
from schedd_store import backfills as backfill_store
from schedd_store import control
from schedd_store import dags as dag_store
from schedd_store import logs as log_store
from schedd_store import pools as pool_store
from schedd_store import runs as run_store
from schedd_store import workers as worker_store

MAX_LOG_BYTES = 1024 * 1024


class DagServicer(api_pb2_grpc.DagServiceServicer):
    def __init__(self, engine: AsyncEngine, clock: Clock) -> None:
        self._engine = engine
        self._clock = clock

    async def RegisterDag(
        self, request: api_pb2.RegisterDagRequest, context: grpc.aio.ServicerContext
    ) -> api_pb2.RegisterDagResponse:
        if request.validate_only:
            vhash, new = await dags.check(self._engine, request.spec)
            version = pb.DagVersion(
                name=f"{names.dag_name(request.spec.dag_id)}/versions/{vhash}",
                version_hash=vhash,
                spec=request.spec,
                task_count=len(request.spec.tasks),
            )
            return api_pb2.RegisterDagResponse(version=version, created_version=new)
        record, created = await dags.register(self._engine, request.spec, request_key(request))
        return api_pb2.RegisterDagResponse(
            dag=translate.dag(record), version=translate.dag_version(record), created_version=created
        )

    async def ListDagVersions(
        self, request: api_pb2.ListDagVersionsRequest, context: grpc.aio.ServicerContext
    ) -> api_pb2.ListDagVersionsResponse:
        dag_id = names.parse_dag_name(request.parent, "parent")
        limit = page_size(request.page_size)
        records = await dag_store.list_versions(
            self._engine, dag_id, before=keyset_token(request.page_token), limit=limit + 1
        )
        items, more = page(records, limit, translate.version)
        token = str(records[len(items) - 1].id) if more else ""
        return api_pb2.ListDagVersionsResponse(versions=items, next_page_token=token)

    async def GetDagVersion(
        self, request: api_pb2.GetDagVersionRequest, context: grpc.aio.ServicerContext
    ) -> pb.DagVersion:
        dag_id, version_hash = names.parse_version_name(request.name)
        return translate.version(await dag_store.get_version(self._engine, dag_id, version_hash))

    async def GetDag(self, request: api_pb2.GetDagRequest, context: grpc.aio.ServicerContext) -> pb.Dag:
        return translate.dag(await dag_store.get_dag(self._engine, names.parse_dag_name(request.name)))

    async def PauseDag(self, request: api_pb2.PauseDagRequest, context: grpc.aio.ServicerContext) -> pb.Dag:
        dag_id = names.parse_dag_name(request.name)
        await control.set_paused(self._engine, dag_id, True)
        return translate.dag(await dag_store.get_dag(self._engine, dag_id))

    async def UnpauseDag(self, request: api_pb2.PauseDagRequest, context: grpc.aio.ServicerContext) -> pb.Dag:
        dag_id = names.parse_dag_name(request.name)
        await control.set_paused(self._engine, dag_id, False)
        return translate.dag(await dag_store.get_dag(self._engine, dag_id))

    async def ListNextRuns(
        self, request: api_pb2.ListNextRunsRequest, context: grpc.aio.ServicerContext
    ) -> api_pb2.ListNextRunsResponse:
        dag_id = names.parse_dag_name(request.name)
        found = await backfills.next_runs(self._engine, self._clock, dag_id, request.count)
        return api_pb2.ListNextRunsResponse(intervals=translate.intervals(found))

    async def ListDags(
        self, request: api_pb2.ListDagsRequest, context: grpc.aio.ServicerContext
    ) -> api_pb2.ListDagsResponse:
        limit = page_size(request.page_size)
        records = await dag_store.list_dags(self._engine, after=request.page_token, limit=limit + 1)
        items, more = page(records, limit, translate.dag)
        token = records[len(items) - 1].dag_id if more else ""
        return api_pb2.ListDagsResponse(dags=items, next_page_token=token)


class RunServicer(api_pb2_grpc.RunServiceServicer):
    def __init__(
        self,
        engine: AsyncEngine,
        clock: Clock,
        faults: FaultPoints | None = None,
        watchers: RunWatchers | None = None,
    ) -> None:
        self._engine = engine
        self._clock = clock
        self._faults = faults
        self._watchers = watchers or RunWatchers()

    async def CreateRun(
        self, request: api_pb2.CreateRunRequest, context: grpc.aio.ServicerContext
    ) -> pb.DagRun:
        dag_id = names.parse_dag_name(request.parent, "parent")
        record = await runs.trigger(
            self._engine,
            self._clock,
            dag_id=dag_id,
            run_id=request.run_id,
            logical_date=convert.from_ts(request.logical_date) if request.HasField("logical_date") else None,
            conf=convert.from_struct(request.conf),
            conf_bytes=request.conf.ByteSize(),
            request=request_key(request),
        )
        return translate.run(record)

    async def GetRun(self, request: api_pb2.GetRunRequest, context: grpc.aio.ServicerContext) -> pb.DagRun:
        dag_id, run_id = await self._run_name(request.name)
        return translate.run(await run_store.get_run(self._engine, dag_id, run_id))

    async def _run_name(self, name: str) -> tuple[str, str]:
        """The run a name means; ``dags/{dag}/runs/@latest`` is the DAG's newest run."""
        dag_id, run_id = names.parse_run_name(name, latest=True)
        if run_id == names.LATEST_RUN:
            newest = await run_store.list_runs(self._engine, dag_id=dag_id, before=2**62, limit=1)
            if not newest:
                raise NotFound(f"dag {quote(dag_id)} has no runs")
            run_id = newest[0].run_id
        return dag_id, run_id

    async def WatchRun(
        self, request: api_pb2.GetRunRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.DagRun]:
        dag_id, run_id = await self._run_name(request.name)
        first = await run_store.get_run(self._engine, dag_id, run_id)

        async def read() -> pb.DagRun:
            return translate.run(await run_store.get_run(self._engine, dag_id, run_id))

        async for run in self._watchers.follow(first.pk, read):
            yield run

    async def GetTaskLogs(
        self, request: api_pb2.GetTaskLogsRequest, context: grpc.aio.ServicerContext
    ) -> api_pb2.TaskLogs:
        dag_id, run_id, task_id = names.parse_task_name(request.name)
        if request.try_number < 0:
            raise InvalidArgument("try_number", "must not be negative")
        if request.offset < 0:
            raise InvalidArgument("offset", "must not be negative")
        if request.max_bytes < 0:
            raise InvalidArgument("max_bytes", "must not be negative")
        max_bytes = min(request.max_bytes or MAX_LOG_BYTES, MAX_LOG_BYTES)
        logs = await log_store.read_logs(
            self._engine,
            dag_id=dag_id,
            run_id=run_id,
            task_id=task_id,
            try_number=request.try_number,
            offset=request.offset,
            max_bytes=max_bytes,
        )
        return api_pb2.TaskLogs(
            data=logs.data, next_offset=logs.next_offset, try_number=logs.try_number, complete=logs.complete
        )

    async def CancelRun(
        self, request: api_pb2.CancelRunRequest, context: grpc.aio.ServicerContext
    ) -> pb.DagRun:
        dag_id, run_id = names.parse_run_name(request.name)
        await control.cancel_run(self._engine, dag_id, run_id, faults=self._faults)
        return translate.run(await run_store.get_run(self._engine, dag_id, run_id))

    async def ClearTaskInstances(
        self, request: api_pb2.ClearTaskInstancesRequest, context: grpc.aio.ServicerContext
    ) -> api_pb2.ClearTaskInstancesResponse:
        dag_id, run_id = names.parse_run_name(request.parent, "parent")
        cleared = await control.clear(
            self._engine,
            dag_id,
            run_id,
            list(request.task_ids),
            downstream=request.include_downstream,
            upstream=request.include_upstream,
            only_failed=request.only_failed,
            faults=self._faults,
        )
        return api_pb2.ClearTaskInstancesResponse(cleared_task_ids=cleared)

    async def SetTaskInstanceState(
        self, request: api_pb2.SetTaskInstanceStateRequest, context: grpc.aio.ServicerContext
    ) -> pb.TaskInstance:
        dag_id, run_id, task_id = names.parse_task_name(request.name)
        if request.state not in (pb.TASK_STATE_SUCCESS, pb.TASK_STATE_FAILED):
            raise InvalidArgument("state", "must be TASK_STATE_SUCCESS or TASK_STATE_FAILED")
        target = TaskState.SUCCESS if request.state == pb.TASK_STATE_SUCCESS else TaskState.FAILED
        await control.set_state(self._engine, dag_id, run_id, task_id, target, faults=self._faults)
        run = await run_store.get_run(self._engine, dag_id, run_id)
        return next(translate.task_instance(run, t) for t in run.task_instances if t.task_id == task_id)

    async def ExplainTaskInstance(
        self, request: api_pb2.ExplainTaskInstanceRequest, context: grpc.aio.ServicerContext
    ) -> api_pb2.Explanation:
        dag_id, run_id, task_id = names.parse_task_name(request.name)
        state, reasons = await control.explain_task(self._engine, dag_id, run_id, task_id)
        return api_pb2.Explanation(
            state=pb.TaskState.Value("TASK_STATE_" + state.value.upper()), reasons=reasons
        )

    async def ListRuns(
        self, request: api_pb2.ListRunsRequest, context: grpc.aio.ServicerContext
    ) -> api_pb2.ListRunsResponse:
        dag_id = None if request.parent == "dags/-" else names.parse_dag_name(request.parent, "parent")
        limit = page_size(request.page_size)
        records = await run_store.list_runs(
            self._engine,
            dag_id=dag_id,
            before=keyset_token(request.page_token),
            limit=limit + 1,
            states=[_enum_name(pb.RunState, s, "states") for s in request.states],
            run_type=_enum_name(pb.RunType, request.run_type, "run_type") if request.run_type else None,
            date_from=convert.from_ts(request.logical_date_from)
            if request.HasField("logical_date_from")
            else None,
            date_until=convert.from_ts(request.logical_date_until)
            if request.HasField("logical_date_until")
            else None,
        )
        items, more = page(records, limit, translate.run)
        token = str(records[len(items) - 1].pk) if more else ""
        return api_pb2.ListRunsResponse(runs=items, next_page_token=token)


def _enum_name(enum_type: Any, value: int, field: str) -> str:
    """The store's name of an enum value (``RUN_STATE_SUCCESS`` -> ``success``)."""
    prefix = enum_type.DESCRIPTOR.values[0].name.removesuffix("UNSPECIFIED")
    if value == 0 or value not in enum_type.DESCRIPTOR.values_by_number:
        raise InvalidArgument(field, f"{value} is not a value of {enum_type.DESCRIPTOR.name}")
    return str(enum_type.Name(value)).removeprefix(prefix).lower()


class BackfillServicer(api_pb2_grpc.BackfillServiceServicer):
    def __init__(self, engine: AsyncEngine, clock: Clock, faults: FaultPoints | None = None) -> None:
        self._engine = engine
        self._clock = clock
        self._faults = faults

    async def CreateBackfill(
        self, request: api_pb2.CreateBackfillRequest, context: grpc.aio.ServicerContext
    ) -> pb.Backfill:
        dag_id = names.parse_dag_name(request.parent, "parent")
        record = await backfills.create(
            self._engine,
            self._clock,
            dag_id,
            request.backfill,
            dry_run=request.dry_run,
            request_key=None if request.dry_run else request_key(request),
        )
        return translate.backfill(record)

    async def GetBackfill(
        self, request: api_pb2.GetBackfillRequest, context: grpc.aio.ServicerContext
    ) -> pb.Backfill:
        backfill_id = names.parse_backfill_name(request.name)
        return translate.backfill(await backfill_store.get_backfill(self._engine, backfill_id))

    async def ListBackfills(
        self, request: api_pb2.ListBackfillsRequest, context: grpc.aio.ServicerContext
    ) -> api_pb2.ListBackfillsResponse:
        dag_id = None if request.parent in ("", "dags/-") else names.parse_dag_name(request.parent, "parent")
        limit = page_size(request.page_size)
        before = keyset_token(request.page_token)
        records = await backfill_store.list_backfills(
            self._engine, dag_id=dag_id, before=before, limit=limit + 1
        )
        items, more = page(records, limit, translate.backfill)
        token = str(records[len(items) - 1].id) if more else ""
        return api_pb2.ListBackfillsResponse(backfills=items, next_page_token=token)

    async def PauseBackfill(
        self, request: api_pb2.GetBackfillRequest, context: grpc.aio.ServicerContext
    ) -> pb.Backfill:
        backfill_id = names.parse_backfill_name(request.name)
        return translate.backfill(await backfill_store.pause_backfill(self._engine, backfill_id))

    async def ResumeBackfill(
        self, request: api_pb2.GetBackfillRequest, context: grpc.aio.ServicerContext
    ) -> pb.Backfill:
        backfill_id = names.parse_backfill_name(request.name)
        return translate.backfill(await backfill_store.resume_backfill(self._engine, backfill_id))

    async def CancelBackfill(
        self, request: api_pb2.GetBackfillRequest, context: grpc.aio.ServicerContext
    ) -> pb.Backfill:
        backfill_id = names.parse_backfill_name(request.name)
        return translate.backfill(
            await backfill_store.cancel_backfill(self._engine, backfill_id, faults=self._faults)
        )


class WorkerServicer(api_pb2_grpc.WorkerServiceServicer):
    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    async def ListWorkers(
        self, request: api_pb2.ListWorkersRequest, context: grpc.aio.ServicerContext
    ) -> api_pb2.ListWorkersResponse:
        limit = page_size(request.page_size)
        records = await worker_store.list_workers(
            self._engine, after=request.page_token, limit=limit + 1, include_gone=request.include_gone
        )
        token = records[limit - 1].worker_id if len(records) > limit else ""
        return api_pb2.ListWorkersResponse(
            workers=[translate.worker(r) for r in records[:limit]], next_page_token=token
        )

    async def DrainWorker(
        self, request: api_pb2.DrainWorkerRequest, context: grpc.aio.ServicerContext
    ) -> api_pb2.Worker:
        worker_id = names.parse_worker_name(request.name)
        return translate.worker(await worker_store.request_drain(self._engine, worker_id))


class PoolServicer(api_pb2_grpc.PoolServiceServicer):
    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    async def ListPools(
        self, request: api_pb2.ListPoolsRequest, context: grpc.aio.ServicerContext
    ) -> api_pb2.ListPoolsResponse:
        return api_pb2.ListPoolsResponse(
            pools=[translate.pool(p) for p in await pool_store.list_pools(self._engine)]
        )

    async def SetPool(
        self, request: api_pb2.SetPoolRequest, context: grpc.aio.ServicerContext
    ) -> api_pb2.Pool:
        share = request.backfill_share if request.HasField("backfill_share") else None
        description = request.description if request.HasField("description") else None
        return translate.pool(
            await pool_store.set_pool(self._engine, request.pool, request.slots, description, share)
        )


class ClusterServicer(api_pb2_grpc.ClusterServiceServicer):
    def __init__(self, engine: AsyncEngine, etcd: EtcdClient | None) -> None:
        self._engine = engine
        self._etcd = etcd

    async def GetLeader(
        self, request: api_pb2.GetLeaderRequest, context: grpc.aio.ServicerContext
    ) -> api_pb2.Leader:
        status = await cluster.leader_status(self._engine, self._etcd)
        reply = api_pb2.Leader(
            fence_token=status.fence_token, standbys=[translate.replica(s) for s in status.standbys]
        )
        if status.leader is not None:
            reply.elected = True
            reply.token = status.leader.token
            reply.leader.CopyFrom(translate.replica(status.leader))
        return reply

    async def GetVersion(
        self, request: api_pb2.GetVersionRequest, context: grpc.aio.ServicerContext
    ) -> api_pb2.Version:
        return api_pb2.Version(
            version=cluster.release(),
            api="schedd.v1",
            schema_revision=await cluster.schema_revision(self._engine),
        )
