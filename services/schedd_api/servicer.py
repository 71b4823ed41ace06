"""gRPC servicers of the api for DAGs and runs: message translation only; the logic lives in ``dags``,
``runs``, ``log_stream`` and the store. The other services' servicers are in ``fleet_servicers``."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc
from google.protobuf import empty_pb2

from schedd.v1 import api_pb2, api_pb2_grpc, resources_pb2 as pb
from schedd_api import backfills, dags, runs, translate
from schedd_api.history import AttemptsMixin, VersionFilesMixin
from schedd_api.log_stream import follow_logs
from schedd_api.paging import keyset_token, page, page_size, run_cursor, run_token
from schedd_api.watch import RunWatchers
from schedd_core.clock import Clock
from schedd_core.errors import InvalidArgument, NotFound, quote
from schedd_core.limits import MAX_LOG_READ_BYTES
from schedd_core.states import RUN_FINISHED, RunState, TaskState
from schedd_faults import FaultPoints
from schedd_rpc import convert, names
from schedd_rpc.request_keys import request_key
from schedd_store import (
    control,
    dags as dag_store,
    deadline_misses,
    deletion,
    explaining,
    logs as log_store,
    runs as run_store,
)
from schedd_store.database import Engine
from schedd_store.logs import LogSlice


class DagServicer(VersionFilesMixin, api_pb2_grpc.DagServiceServicer):
    def __init__(
        self,
        engine: Engine,
        clock: Clock,
        *,
        paused_at_creation: bool = True,
        cron_data_intervals: bool = True,
    ) -> None:
        self._engine = engine
        self._clock = clock
        #: New DAGs start paused unless a registration asks otherwise (``RegisterDagRequest.unpause``).
        self._paused_at_creation = paused_at_creation
        #: What a plain cron string means in the specs registered here (``ApiConfig``).
        self._cron_data_intervals = cron_data_intervals

    async def RegisterDag(
        self, request: api_pb2.RegisterDagRequest, context: grpc.aio.ServicerContext
    ) -> api_pb2.RegisterDagResponse:
        if request.validate_only:
            vhash, new = await dags.check(
                self._engine, request.spec, cron_data_intervals=self._cron_data_intervals
            )
            version = pb.DagVersion(
                name=f"{names.dag_name(request.spec.dag_id)}/versions/{vhash}",
                version_hash=vhash,
                spec=request.spec,
                task_count=len(request.spec.tasks),
            )
            return api_pb2.RegisterDagResponse(version=version, created_version=new)
        done = await dags.register(
            self._engine,
            request.spec,
            request_key(request),
            paused_if_created=self._paused_at_creation and not request.unpause,
            cron_data_intervals=self._cron_data_intervals,
        )
        return api_pb2.RegisterDagResponse(
            dag=translate.dag(done.dag),
            version=translate.dag_version(done.dag),
            created_version=done.created_version,
            previous_version=done.previous_version,
            created_dag=done.created_dag,
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

    async def DeleteDag(
        self, request: api_pb2.DeleteDagRequest, context: grpc.aio.ServicerContext
    ) -> empty_pb2.Empty:
        await deletion.delete_dag(
            self._engine,
            names.parse_dag_name(request.name),
            request_key(request),
            cancel_runs=request.cancel_runs,
        )
        return empty_pb2.Empty()

    async def ListDags(
        self, request: api_pb2.ListDagsRequest, context: grpc.aio.ServicerContext
    ) -> api_pb2.ListDagsResponse:
        limit = page_size(request.page_size)
        records = await dag_store.list_dags(self._engine, after=request.page_token, limit=limit + 1)
        items, more = page(records, limit, translate.dag)
        token = records[len(items) - 1].dag_id if more else ""
        return api_pb2.ListDagsResponse(dags=items, next_page_token=token)


class RunServicer(AttemptsMixin, api_pb2_grpc.RunServiceServicer):
    def __init__(
        self,
        engine: Engine,
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
        read = runs.run_reader(request.view)
        dag_id, run_id = await self._run_name(request.name)
        message = translate.run(await read(self._engine, dag_id, run_id))
        deadline, missed = await deadline_misses.run_deadline(self._engine, dag_id, run_id)
        if deadline is not None:
            message.deadline_time.FromDatetime(deadline)
        if missed is not None:
            message.deadline_missed_time.FromDatetime(missed)
        return message

    async def _run_name(self, name: str, field: str = "name") -> tuple[str, str]:
        """The run a name means; ``dags/{dag}/runs/@latest`` is the DAG's newest run."""
        dag_id, run_id = names.parse_run_name(name, field, latest=True)
        return dag_id, await _resolve(self._engine, dag_id, run_id)

    async def _task_name(self, name: str) -> tuple[str, str, str]:
        """The task instance a name means, its run resolved as :meth:`_run_name` resolves one."""
        dag_id, run_id, key = names.parse_task_name(name, latest=True)
        return dag_id, await _resolve(self._engine, dag_id, run_id), key

    async def WatchRun(
        self, request: api_pb2.GetRunRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.DagRun]:
        read_record = runs.run_reader(request.view)
        dag_id, run_id = await self._run_name(request.name)
        first = await run_store.get_run_summary(self._engine, dag_id, run_id)

        async def read() -> pb.DagRun:
            return translate.run(await read_record(self._engine, dag_id, run_id))

        async for run in self._watchers.follow(first.pk, read, request.view):
            yield run

    async def GetTaskLogs(
        self, request: api_pb2.GetTaskLogsRequest, context: grpc.aio.ServicerContext
    ) -> api_pb2.TaskLogs:
        read = _log_reader(self._engine, request, await self._task_name(request.name))
        return _task_logs(await read(request.try_number, request.offset))

    async def WatchTaskLogs(
        self, request: api_pb2.GetTaskLogsRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[api_pb2.TaskLogs]:
        task = await self._task_name(request.name)
        read = _log_reader(self._engine, request, task)
        dag_id, run_id, _ = task

        async def run_ended() -> bool:
            run = await run_store.get_run(self._engine, dag_id, run_id)
            return RunState(run.state) in RUN_FINISHED

        async for logs in follow_logs(read, run_ended, try_number=request.try_number, offset=request.offset):
            yield _task_logs(logs)

    async def GetTaskResult(
        self, request: api_pb2.GetTaskResultRequest, context: grpc.aio.ServicerContext
    ) -> api_pb2.StoredTaskResult:
        dag_id, run_id, key = await self._task_name(request.name)
        found = await run_store.task_result(self._engine, dag_id, run_id, key)
        reply = api_pb2.StoredTaskResult(
            name=f"{names.task_name(dag_id, run_id, key)}/result",
            has_value=found.stored,
            state=pb.TaskState.Value("TASK_STATE_" + found.state.upper()),
            try_number=found.try_number,
        )
        if found.stored:
            reply.value.CopyFrom(convert.value(found.value))
        return reply

    async def DeleteRun(
        self, request: api_pb2.DeleteRunRequest, context: grpc.aio.ServicerContext
    ) -> empty_pb2.Empty:
        dag_id, run_id = await self._run_name(request.name)
        await deletion.delete_run(self._engine, dag_id, run_id, request_key(request))
        return empty_pb2.Empty()

    async def CancelRun(
        self, request: api_pb2.CancelRunRequest, context: grpc.aio.ServicerContext
    ) -> pb.DagRun:
        dag_id, run_id = await self._run_name(request.name)
        await control.cancel_run(
            self._engine, dag_id, run_id, faults=self._faults, request=request_key(request)
        )
        return translate.run(await run_store.get_run(self._engine, dag_id, run_id))

    async def ClearTaskInstances(
        self, request: api_pb2.ClearTaskInstancesRequest, context: grpc.aio.ServicerContext
    ) -> api_pb2.ClearTaskInstancesResponse:
        dag_id, run_id = await self._run_name(request.parent, "parent")
        cleared = await control.clear(
            self._engine,
            dag_id,
            run_id,
            list(request.task_ids),
            downstream=request.include_downstream,
            upstream=request.include_upstream,
            only_failed=request.only_failed,
            faults=self._faults,
            request=request_key(request),
            latest_version=request.run_on_latest_version,
        )
        return api_pb2.ClearTaskInstancesResponse(
            cleared_task_ids=cleared, dag_version=await run_store.pinned_version(self._engine, dag_id, run_id)
        )

    async def SetTaskInstanceState(
        self, request: api_pb2.SetTaskInstanceStateRequest, context: grpc.aio.ServicerContext
    ) -> pb.TaskInstance:
        dag_id, run_id, key = await self._task_name(request.name)
        if request.state not in (pb.TASK_STATE_SUCCESS, pb.TASK_STATE_FAILED):
            raise InvalidArgument("state", "must be TASK_STATE_SUCCESS or TASK_STATE_FAILED")
        target = TaskState.SUCCESS if request.state == pb.TASK_STATE_SUCCESS else TaskState.FAILED
        await control.set_state(
            self._engine,
            dag_id,
            run_id,
            key,
            target,
            faults=self._faults,
            request=request_key(request),
            latest_version=request.run_on_latest_version,
        )
        run = await run_store.get_run(self._engine, dag_id, run_id)
        return next(translate.task_instance(run, t) for t in run.task_instances if t.key == key)

    async def ExplainTaskInstance(
        self, request: api_pb2.ExplainTaskInstanceRequest, context: grpc.aio.ServicerContext
    ) -> api_pb2.Explanation:
        dag_id, run_id, key = await self._task_name(request.name)
        state, reasons = await explaining.explain_task(self._engine, dag_id, run_id, key)
        missed = deadline_misses.describe_miss(
            *await deadline_misses.run_deadline(self._engine, dag_id, run_id)
        )
        return api_pb2.Explanation(
            state=pb.TaskState.Value("TASK_STATE_" + state.value.upper()),
            reasons=[*reasons, missed] if missed else reasons,
        )

    async def ListRuns(
        self, request: api_pb2.ListRunsRequest, context: grpc.aio.ServicerContext
    ) -> api_pb2.ListRunsResponse:
        dag_id = None if request.parent == "dags/-" else names.parse_dag_name(request.parent, "parent")
        limit = page_size(request.page_size)
        order = " ".join(request.order_by.split()) or "create_time desc"
        if order not in run_store.RUN_ORDERS:
            raise InvalidArgument("order_by", f"must be one of {', '.join(run_store.RUN_ORDERS)}")
        records = await run_store.list_runs(
            self._engine,
            dag_id=dag_id,
            after=run_cursor(request.page_token, order),
            order=order,
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
        token = run_token(records[len(items) - 1], order) if more else ""
        return api_pb2.ListRunsResponse(runs=items, next_page_token=token)


def _enum_name(enum_type: Any, value: int, field: str) -> str:
    """The store's name of an enum value (``RUN_STATE_SUCCESS`` -> ``success``)."""
    prefix = enum_type.DESCRIPTOR.values[0].name.removesuffix("UNSPECIFIED")
    if value == 0 or value not in enum_type.DESCRIPTOR.values_by_number:
        raise InvalidArgument(field, f"{value} is not a value of {enum_type.DESCRIPTOR.name}")
    return str(enum_type.Name(value)).removeprefix(prefix).lower()


async def _resolve(engine: Engine, dag_id: str, run_id: str) -> str:
    """``run_id``, or for ``@latest`` the id of the DAG's newest run (the highest create time) at
    the moment of the call: a run created just after is not it, which matters to a write call."""
    if run_id != names.LATEST_RUN:
        return run_id
    newest = await run_store.list_runs(engine, dag_id=dag_id, order="create_time desc", limit=1)
    if not newest:
        raise NotFound(f"dag {quote(dag_id)} has no runs")
    return newest[0].run_id


def _log_reader(
    engine: Engine, request: api_pb2.GetTaskLogsRequest, task: tuple[str, str, str]
) -> Callable[[int, int], Awaitable[LogSlice]]:
    """Reads the logs of ``task`` (the request's name, resolved), from a try number and offset,
    after checking the request's fields."""
    dag_id, run_id, key = task
    if request.try_number < 0:
        raise InvalidArgument("try_number", "must not be negative")
    if request.offset < 0:
        raise InvalidArgument("offset", "must not be negative")
    if request.max_bytes < 0:
        raise InvalidArgument("max_bytes", "must not be negative")
    max_bytes = min(request.max_bytes or MAX_LOG_READ_BYTES, MAX_LOG_READ_BYTES)

    async def read(try_number: int, offset: int) -> LogSlice:
        return await log_store.read_logs(
            engine,
            dag_id=dag_id,
            run_id=run_id,
            task_key=key,
            try_number=try_number,
            offset=offset,
            max_bytes=max_bytes,
        )

    return read


def _task_logs(logs: LogSlice) -> api_pb2.TaskLogs:
    return api_pb2.TaskLogs(
        data=logs.data,
        next_offset=logs.next_offset,
        try_number=logs.try_number,
        complete=logs.complete,
        state=pb.TaskState.Value("TASK_STATE_" + logs.state.upper()),
        latest_try=logs.latest_try,
        max_tries=logs.max_tries,
    )
