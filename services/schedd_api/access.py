"""gRPC servicers of tokens and the audit log: message translation only (``schedd_store.tokens``,
``schedd_store.audit``). Both services need the admin role (``schedd_auth.roles``)."""

from __future__ import annotations

import grpc

from schedd.v1 import api_pb2, api_pb2_grpc, resources_pb2 as pb
from schedd_api.paging import keyset_token, page_size
from schedd_auth import principal
from schedd_auth.audit import AuditRecord
from schedd_core.errors import InvalidArgument
from schedd_rpc import convert, names
from schedd_store import audit, tokens
from schedd_store.database import Engine


def _token(record: tokens.TokenRecord) -> pb.ApiToken:
    return pb.ApiToken(
        name=f"tokens/{record.name}",
        role=record.role,
        worker_id=record.worker_id or "",
        create_time=convert.ts(record.created_at),
        created_by=record.created_by,
        expire_time=convert.ts(record.expires_at),
        revoke_time=convert.ts(record.revoked_at),
        token_id=record.token_id,
        queues=list(record.queues),
        max_uses=record.max_uses or 0,
        uses=record.uses,
    )


def _record(entry: AuditRecord) -> pb.AuditRecord:
    return pb.AuditRecord(
        id=entry.id,
        time=convert.ts(entry.at),
        principal=entry.principal,
        role=entry.role,
        method=entry.method,
        resource=entry.resource,
        request_id=entry.request_id,
        code=entry.code,
        detail=entry.detail,
        peer=entry.peer,
    )


class TokenServicer(api_pb2_grpc.TokenServiceServicer):
    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    async def CreateToken(
        self, request: api_pb2.CreateTokenRequest, context: grpc.aio.ServicerContext
    ) -> api_pb2.CreateTokenResponse:
        caller = principal.current()
        record, token = await tokens.create_token(
            self._engine,
            request.name,
            request.role,
            worker_id=request.worker_id or None,
            expires_at=convert.from_ts(request.expire_time) if request.HasField("expire_time") else None,
            created_by=caller.name if caller else "",
            queues=tuple(request.queues),
            max_uses=request.max_uses or None,
        )
        return api_pb2.CreateTokenResponse(token=_token(record), secret=str(token))

    async def ListTokens(
        self, request: api_pb2.ListTokensRequest, context: grpc.aio.ServicerContext
    ) -> api_pb2.ListTokensResponse:
        limit = page_size(request.page_size)
        if request.page_token and not request.page_token.startswith("tokens/"):
            raise InvalidArgument("page_token", "is not a token this server issued")
        after = names.parse_token_name(request.page_token, "page_token") if request.page_token else ""
        records = await tokens.list_tokens(
            self._engine, after=after, limit=limit + 1, include_revoked=request.include_revoked
        )
        more = len(records) > limit
        return api_pb2.ListTokensResponse(
            tokens=[_token(r) for r in records[:limit]],
            next_page_token=f"tokens/{records[limit - 1].name}" if more else "",
        )

    async def RevokeToken(
        self, request: api_pb2.RevokeTokenRequest, context: grpc.aio.ServicerContext
    ) -> pb.ApiToken:
        return _token(await tokens.revoke_token(self._engine, names.parse_token_name(request.name)))


class AuditServicer(api_pb2_grpc.AuditServiceServicer):
    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    async def ListAuditRecords(
        self, request: api_pb2.ListAuditRecordsRequest, context: grpc.aio.ServicerContext
    ) -> api_pb2.ListAuditRecordsResponse:
        limit = page_size(request.page_size)
        records = await audit.list_records(
            self._engine,
            before=keyset_token(request.page_token),
            limit=limit + 1,
            principal=request.principal,
            method=request.method,
            code=request.code,
            since=convert.from_ts(request.since) if request.HasField("since") else None,
        )
        more = len(records) > limit
        return api_pb2.ListAuditRecordsResponse(
            records=[_record(r) for r in records[:limit]],
            next_page_token=str(records[limit - 1].id) if more else "",
        )
