"""The web service's gRPC client of the api: one channel per process, every call made with the
signed-in user's own token, so the api's roles and audit log apply to the person, not to the UI.

:class:`ApiError` wraps a failed call with its status code, message and the fields the api named
(``google.rpc.BadRequest`` field violations), for pages to show next to the form field.
"""

from __future__ import annotations

import re
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from typing import Any

import grpc
from google.rpc import error_details_pb2, status_pb2  # type: ignore[import-untyped]

from schedd.v1 import api_pb2, api_pb2_grpc, assets_pb2_grpc, resources_pb2 as pb
from schedd_rpc.tls import ClientTLS, token_metadata

#: Seconds a unary call may take.
CALL_TIMEOUT = 10.0
_STATUS_DETAILS_KEY = "grpc-status-details-bin"
_ROLE_IN_REFUSAL = re.compile(r"token '(?P<name>[^']*)' has role (?P<role>\w+)")


@dataclass
class ApiError(Exception):
    code: grpc.StatusCode
    message: str
    #: field path -> problem, as the api named them (``conf.rows`` -> ``0 is less than ...``)
    fields: dict[str, str] = field(default_factory=dict)

    def __str__(self) -> str:
        return self.message


def _field_violations(error: grpc.aio.AioRpcError) -> dict[str, str]:
    found: dict[str, str] = {}
    for key, value in error.trailing_metadata() or ():
        if key != _STATUS_DETAILS_KEY or not isinstance(value, bytes):
            continue
        status = status_pb2.Status.FromString(value)
        for detail in status.details:
            bad = error_details_pb2.BadRequest()
            if detail.Unpack(bad):
                found.update({v.field: v.description for v in bad.field_violations})
    return found


def api_error(error: grpc.aio.AioRpcError) -> ApiError:
    return ApiError(error.code(), error.details() or error.code().name, _field_violations(error))


@dataclass(frozen=True)
class Identity:
    role: str
    principal: str


class Api:
    """Stubs of the api on one channel; :meth:`call` adds the token and turns failures into
    :class:`ApiError`. Create it inside the running event loop."""

    def __init__(self, address: str, tls: ClientTLS | None = None) -> None:
        self.address = address
        self._channel = (
            grpc.aio.secure_channel(address, tls.credentials())
            if tls is not None
            else grpc.aio.insecure_channel(address)
        )
        self.dags = api_pb2_grpc.DagServiceStub(self._channel)
        self.runs = api_pb2_grpc.RunServiceStub(self._channel)
        self.tokens = api_pb2_grpc.TokenServiceStub(self._channel)
        self.cluster = api_pb2_grpc.ClusterServiceStub(self._channel)
        self.workers = api_pb2_grpc.WorkerServiceStub(self._channel)
        self.pools = api_pb2_grpc.PoolServiceStub(self._channel)
        self.backfills = api_pb2_grpc.BackfillServiceStub(self._channel)
        self.audit = api_pb2_grpc.AuditServiceStub(self._channel)
        self.assets = assets_pb2_grpc.AssetServiceStub(self._channel)

    async def close(self) -> None:
        await self._channel.close()

    async def call(self, method: Any, request: Any, token: str) -> Any:
        try:
            return await method(request, timeout=CALL_TIMEOUT, metadata=token_metadata(token))
        except grpc.aio.AioRpcError as exc:
            raise api_error(exc) from None

    async def identify(self, token: str) -> Identity:
        """Who the token is and its role, as the api sees it: ``ListTokens`` (admin only) answers an
        admin (whose name is found on its first page) and refuses anyone else naming the token and
        its role (that refusal is audited, as every refused call). An unknown wording of the refusal
        counts as a viewer: the UI then offers less, and the api decides anyway. ApiError
        UNAUTHENTICATED for a token the api does not accept."""
        try:
            listed = await self.call(self.tokens.ListTokens, api_pb2.ListTokensRequest(page_size=100), token)
        except ApiError as exc:
            if exc.code != grpc.StatusCode.PERMISSION_DENIED:
                raise
            found = _ROLE_IN_REFUSAL.search(exc.message)
            if found is None:
                return Identity("viewer", _public_id(token))
            return Identity(found["role"], found["name"])
        token_id = _token_id(token)
        name = next(
            (t.name.removeprefix("tokens/") for t in listed.tokens if token_id and t.token_id == token_id), ""
        )
        return Identity("admin", name or _public_id(token))

    async def watch_run(self, name: str, token: str) -> AsyncGenerator[pb.DagRun, None]:
        """``WatchRun``: the run now and at each change until its final state; ApiError on failure."""
        call = self.runs.WatchRun(api_pb2.GetRunRequest(name=name), metadata=token_metadata(token))
        try:
            async for run in call:
                yield run
        except grpc.aio.AioRpcError as exc:
            raise api_error(exc) from None
        finally:
            call.cancel()

    async def watch_logs(
        self, request: api_pb2.GetTaskLogsRequest, token: str
    ) -> AsyncGenerator[api_pb2.TaskLogs, None]:
        """``WatchTaskLogs``: the try's output as it is written, until the try ends."""
        call = self.runs.WatchTaskLogs(request, metadata=token_metadata(token))
        try:
            async for logs in call:
                yield logs
        except grpc.aio.AioRpcError as exc:
            raise api_error(exc) from None
        finally:
            call.cancel()


def _token_id(token: str) -> str:
    """The token's public id (``sdt_<id>_...``), which is no secret; empty when not of that form."""
    parts = token.split("_")
    return parts[1] if len(parts) >= 3 and parts[0] == "sdt" else ""


def _public_id(token: str) -> str:
    """How to name a token whose name the api did not say: by its public id, never by its secret."""
    token_id = _token_id(token)
    return f"token {token_id}" if token_id else "token"
