"""A synchronous gRPC client of the api, with the errors schedctl reports."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TypeVar

import grpc

from schedd.v1 import api_pb2, api_pb2_grpc, assets_pb2_grpc, resources_pb2 as pb, secrets_pb2_grpc
from schedd_rpc.tls import ClientTLS, token_metadata

T = TypeVar("T")


class ApiClient:
    def __init__(
        self, address: str, *, timeout: float = 10.0, token: str = "", tls: ClientTLS | None = None
    ) -> None:
        self.address = address
        self.timeout = timeout
        self._metadata = token_metadata(token)
        self._channel = (
            grpc.secure_channel(address, tls.credentials())
            if tls is not None
            else grpc.insecure_channel(address)
        )
        self.dags = api_pb2_grpc.DagServiceStub(self._channel)
        self.runs = api_pb2_grpc.RunServiceStub(self._channel)
        self.cluster = api_pb2_grpc.ClusterServiceStub(self._channel)
        self.workers = api_pb2_grpc.WorkerServiceStub(self._channel)
        self.pools = api_pb2_grpc.PoolServiceStub(self._channel)
        self.backfills = api_pb2_grpc.BackfillServiceStub(self._channel)
        self.tokens = api_pb2_grpc.TokenServiceStub(self._channel)
        self.audit = api_pb2_grpc.AuditServiceStub(self._channel)
        self.bundles = api_pb2_grpc.BundleServiceStub(self._channel)
        self.assets = assets_pb2_grpc.AssetServiceStub(self._channel)
        self.secrets = secrets_pb2_grpc.SecretsServiceStub(self._channel)

    def watch_run(
        self, name: str, timeout: float | None, view: api_pb2.RunView.ValueType = api_pb2.RUN_VIEW_FULL
    ) -> Iterator[pb.DagRun]:
        """The run's states as ``WatchRun`` streams them in ``view`` (``timeout``: for the whole
        stream)."""
        yield from self.runs.WatchRun(
            api_pb2.GetRunRequest(name=name, view=view), timeout=timeout, metadata=self._metadata
        )

    def watch_task_logs(self, request: api_pb2.GetTaskLogsRequest) -> Iterator[api_pb2.TaskLogs]:
        """The attempt's output as ``WatchTaskLogs`` streams it, until the attempt ends."""
        yield from self.runs.WatchTaskLogs(request, metadata=self._metadata)

    def call(self, method: Callable[..., T], request: object) -> T:
        return method(request, timeout=self.timeout, metadata=self._metadata)

    def close(self) -> None:
        self._channel.close()
