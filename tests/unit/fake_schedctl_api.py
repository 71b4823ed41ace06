"""An in-process fake of the api's DAG, run, backfill and bundle services for schedctl's unit tests:
it answers from a few fixed resources and keeps every request it gets.

DAG ``nightly`` has the time zone Europe/Berlin, any other DAG none; DAG ``fan`` has runs ``r1`` and
``r2`` (the newest, what ``@latest`` means), with no task instances unless a test gives the fake a
run of that name; RegisterDag refuses a spec of DAG ``refused``, and GetDag answers NOT_FOUND for a
DAG it is told is new.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent import futures
from datetime import UTC, datetime
from typing import Any

import grpc
from google.protobuf import empty_pb2
from typer.testing import CliRunner, Result

import schedctl.main  # noqa: F401  (registers every command)
from schedctl.cli import app
from schedd.v1 import api_pb2, api_pb2_grpc, resources_pb2 as pb
from schedd_rpc import convert

LATEST = "dags/fan/runs/r2"


class FakeApi(
    api_pb2_grpc.DagServiceServicer,
    api_pb2_grpc.RunServiceServicer,
    api_pb2_grpc.BackfillServiceServicer,
    api_pb2_grpc.BundleServiceServicer,
):
    def __init__(self) -> None:
        self.requests: list[Any] = []
        #: What GetDag answers for a DAG id (else a DAG with an empty spec of that id).
        self.dags: dict[str, pb.Dag] = {}
        #: DAG ids GetDag answers NOT_FOUND for.
        self.missing: set[str] = set()
        #: What GetRun answers for a run's name (else a failed run of DAG ``fan`` without instances).
        self.runs: dict[str, pb.DagRun] = {}

    def GetDag(self, request: api_pb2.GetDagRequest, context: grpc.ServicerContext) -> pb.Dag:
        dag_id = request.name.removeprefix("dags/")
        if dag_id in self.missing:
            context.abort(grpc.StatusCode.NOT_FOUND, f"dag {dag_id!r} not found")
        if dag_id in self.dags:
            return self.dags[dag_id]
        zone = "Europe/Berlin" if dag_id == "nightly" else ""
        return pb.Dag(name=request.name, dag_id=dag_id, spec=pb.DagSpec(dag_id=dag_id, timezone=zone))

    def RegisterDag(
        self, request: api_pb2.RegisterDagRequest, context: grpc.ServicerContext
    ) -> api_pb2.RegisterDagResponse:
        self.requests.append(request)
        if request.spec.dag_id == "refused":
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "spec.tasks: cycle: a -> b -> a")
        version = pb.DagVersion(version_hash="v1", spec=request.spec)
        return api_pb2.RegisterDagResponse(version=version, created_version=True)

    def UploadBundle(
        self, request_iterator: Iterator[api_pb2.UploadBundleRequest], context: grpc.ServicerContext
    ) -> api_pb2.UploadBundleResponse:
        self.requests.extend(request_iterator)
        return api_pb2.UploadBundleResponse(created=True)

    def GetRun(self, request: api_pb2.GetRunRequest, context: grpc.ServicerContext) -> pb.DagRun:
        self.requests.append(request)
        name = LATEST if request.name == "dags/fan/runs/@latest" else request.name
        if name in self.runs:
            return self.runs[name]
        return pb.DagRun(name=name, dag_id="fan", run_id=name.rpartition("/")[2], state=pb.RUN_STATE_FAILED)

    def CancelRun(self, request: api_pb2.CancelRunRequest, context: grpc.ServicerContext) -> pb.DagRun:
        self.requests.append(request)
        return pb.DagRun(name=request.name, state=pb.RUN_STATE_FAILED)

    def DeleteRun(self, request: api_pb2.DeleteRunRequest, context: grpc.ServicerContext) -> empty_pb2.Empty:
        self.requests.append(request)
        return empty_pb2.Empty()

    def ClearTaskInstances(
        self, request: api_pb2.ClearTaskInstancesRequest, context: grpc.ServicerContext
    ) -> api_pb2.ClearTaskInstancesResponse:
        self.requests.append(request)
        return api_pb2.ClearTaskInstancesResponse(cleared_task_ids=request.task_ids)

    def SetTaskInstanceState(
        self, request: api_pb2.SetTaskInstanceStateRequest, context: grpc.ServicerContext
    ) -> pb.TaskInstance:
        self.requests.append(request)
        return pb.TaskInstance(name=request.name, state=request.state)

    def GetTaskResult(
        self, request: api_pb2.GetTaskResultRequest, context: grpc.ServicerContext
    ) -> api_pb2.StoredTaskResult:
        self.requests.append(request)
        return api_pb2.StoredTaskResult(
            name=f"{request.name}/result", has_value=True, state=pb.TASK_STATE_SUCCESS
        )

    def ExplainTaskInstance(
        self, request: api_pb2.ExplainTaskInstanceRequest, context: grpc.ServicerContext
    ) -> api_pb2.Explanation:
        self.requests.append(request)
        return api_pb2.Explanation(state=pb.TASK_STATE_FAILED, reasons=["it is finished (failed)"])

    def GetTaskLogs(
        self, request: api_pb2.GetTaskLogsRequest, context: grpc.ServicerContext
    ) -> api_pb2.TaskLogs:
        self.requests.append(request)
        return api_pb2.TaskLogs(data="out\n", next_offset=4, try_number=1, complete=False)

    def ListRuns(
        self, request: api_pb2.ListRunsRequest, context: grpc.ServicerContext
    ) -> api_pb2.ListRunsResponse:
        self.requests.append(request)
        return api_pb2.ListRunsResponse()

    def CreateBackfill(
        self, request: api_pb2.CreateBackfillRequest, context: grpc.ServicerContext
    ) -> pb.Backfill:
        self.requests.append(request)
        made = pb.Backfill()
        made.CopyFrom(request.backfill)
        made.dag_id = request.parent.removeprefix("dags/")
        made.state = pb.BACKFILL_STATE_RUNNING
        if request.dry_run:
            start = datetime(2024, 6, 1, tzinfo=UTC)
            made.intervals.add(start=convert.ts(start), end=convert.ts(start.replace(day=2)))
        else:
            made.name = "backfills/1"
        return made


def serve() -> Iterator[tuple[str, FakeApi]]:
    """A started server of a fresh :class:`FakeApi`: its address and the fake (a fixture's body)."""
    # The services' methods the fake does not define answer UNIMPLEMENTED (the generated defaults).
    fake = FakeApi()  # type: ignore[abstract]
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    api_pb2_grpc.add_DagServiceServicer_to_server(fake, server)
    api_pb2_grpc.add_RunServiceServicer_to_server(fake, server)
    api_pb2_grpc.add_BackfillServiceServicer_to_server(fake, server)
    api_pb2_grpc.add_BundleServiceServicer_to_server(fake, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield f"127.0.0.1:{port}", fake
    server.stop(grace=None)


def invoke(api: tuple[str, FakeApi], *args: str) -> Result:
    """``schedctl --api ADDRESS ARGS...`` in this process, the fake's requests cleared first."""
    api[1].requests.clear()
    return CliRunner().invoke(app, ["--api", api[0], *args], terminal_width=80)
