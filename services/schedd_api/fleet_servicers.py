"""gRPC servicers of the api for backfills, workers, pools and the cluster: message translation only."""

from __future__ import annotations

import grpc
from google.protobuf import empty_pb2

from schedd.v1 import api_pb2, api_pb2_grpc, resources_pb2 as pb
from schedd_api import backfills, cluster, translate
from schedd_api.paging import keyset_token, page, page_size
from schedd_coord.client import EtcdClient
from schedd_core.clock import Clock
from schedd_faults import FaultPoints
from schedd_rpc import names
from schedd_rpc.request_keys import request_key
from schedd_store import backfills as backfill_store, deletion, pools as pool_store, workers as worker_store
from schedd_store.database import Engine
from schedd_store.observe import schema_revision


class BackfillServicer(api_pb2_grpc.BackfillServiceServicer):
    def __init__(self, engine: Engine, clock: Clock, faults: FaultPoints | None = None) -> None:
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
    def __init__(self, engine: Engine) -> None:
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
    def __init__(self, engine: Engine) -> None:
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

    async def DeletePool(
        self, request: api_pb2.DeletePoolRequest, context: grpc.aio.ServicerContext
    ) -> empty_pb2.Empty:
        await deletion.delete_pool(self._engine, names.parse_pool_name(request.name), request_key(request))
        return empty_pb2.Empty()


class ClusterServicer(api_pb2_grpc.ClusterServiceServicer):
    def __init__(self, engine: Engine, etcd: EtcdClient | None) -> None:
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
            schema_revision=await schema_revision(self._engine),
        )
