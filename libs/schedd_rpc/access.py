"""Authentication, authorization and audit of every call, in one server interceptor.

For each call of a schedd service (health checking and reflection are public):

1. the bearer token in the ``authorization`` metadata is looked up (in the :class:`Callers` the
   interceptor is given: ``schedd_store.callers.StoredCallers``): no
   token, a malformed, unknown, revoked or expired one ends the call with UNAUTHENTICATED;
2. the principal's role is checked against the method's (``schedd_auth.roles.METHODS``): too
   weak a role, a worker token on the API, a user token on the worker protocol, or a method with no
   role at all ends it with PERMISSION_DENIED;
3. the handler runs with the principal bound (``schedd_auth.principal.current``);
4. a call of an audited method (every one that changes something) and every refused call is
   written to the audit log with who, what, the resource and request id named in the request, the
   status code it ended with and the peer. Refusals before the caller is known (UNAUTHENTICATED)
   are written once per peer, method and code in a window and counted after that
   (``schedd_rpc.refused_calls``); those of a known token, one row each.

With ``call_turns`` (``schedd_rpc.call_turns``), a call (of a method it does not exempt) waits for
a turn before step 1, its lane the token it presents (or its peer), and holds it to its end (a
unary call: through its audit row) or, for a stream, through its admission only: so one caller's
flood of calls cannot hold the others back at the database.

With ``stream_limits``, the streams it names take a slot each after step 2 and are refused with
RESOURCE_EXHAUSTED over a cap (``schedd_rpc.stream_limits``); the refusal is audited like any other.

A refused call never reaches its handler, so it changes nothing. With authentication disabled
(``SCHEDD_AUTH=none``, development only) every call is admitted as ``anonymous`` and audited the
same way. The audit row of a call is written after the call ends; if the database cannot take it,
the call's outcome stands and the failure is logged (the audit log is not a commit protocol).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import Any, Protocol

import grpc
from google.protobuf.descriptor import ServiceDescriptor
from google.protobuf.message import Message
from google.protobuf.message_factory import GetMessageClass

from schedd_auth import principal as principals, roles
from schedd_auth.audit import AuditRecord
from schedd_auth.principal import ANONYMOUS, Principal
from schedd_auth.tokens import Token, parse
from schedd_rpc.call_turns import CallTurns
from schedd_rpc.refused_calls import DEFAULT_WINDOW_SECONDS, RefusedCalls
from schedd_rpc.stream_limits import OverCap, StreamLimits

log = logging.getLogger(__name__)

_BEARER = "bearer "


class Callers(Protocol):
    """Who the callers are and where their calls are written down (the metadata database)."""

    async def principal_of(self, token: Token) -> Principal | str:
        """The principal of ``token``, or why it is refused."""
        ...

    async def record(self, entry: AuditRecord) -> None:
        """Write one audit row."""
        ...

    def is_transient(self, exc: BaseException) -> bool:
        """Whether a failure of the calls above means they cannot be answered now."""
        ...


class Refused(Exception):
    def __init__(self, code: grpc.StatusCode, message: str, who: Principal | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.who = who


class AccessInterceptor(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """See the module docstring. ``services`` are those the server serves (to read request ids and
    resource names for the audit log); ``refusal_window`` is the window, in seconds, of counted
    refusals. Call :meth:`close` at shutdown to write the counts still held."""

    def __init__(
        self,
        callers: Callers,
        services: Iterable[ServiceDescriptor],
        *,
        enabled: bool,
        refusal_window: float = DEFAULT_WINDOW_SECONDS,
        stream_limits: StreamLimits | None = None,
        call_turns: CallTurns | None = None,
    ) -> None:
        self._callers = callers
        self._call_turns = call_turns
        self._enabled = enabled
        self._refused = RefusedCalls(self._write, window_seconds=refusal_window)
        self._stream_limits = stream_limits
        self._inputs: dict[str, type[Message]] = {
            f"/{s.full_name}/{m.name}": GetMessageClass(m.input_type) for s in services for m in s.methods
        }

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(details)
        method: str = details.method
        if handler is None or roles.is_public(method):
            return handler
        header = _authorization(details.invocation_metadata)
        if handler.unary_unary is not None:
            return grpc.unary_unary_rpc_method_handler(
                self._unary(method, header, handler.unary_unary),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        if handler.stream_unary is not None:
            return grpc.stream_unary_rpc_method_handler(
                self._client_stream(method, header, handler.stream_unary),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        if handler.unary_stream is not None:
            return grpc.unary_stream_rpc_method_handler(
                self._server_stream(method, header, handler.unary_stream),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        return grpc.stream_stream_rpc_method_handler(
            self._bidi(method, header, handler.stream_stream),
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )

    def _unary(self, method: str, header: str | None, inner: Any) -> Any:
        async def handle(raw: bytes, context: grpc.aio.ServicerContext) -> Any:
            async with self._turn(method, header, context):
                who = await self._admit(method, header, context, raw)
                return await self._audited(who, method, raw, context, lambda: inner(raw, context))

        return handle

    def _client_stream(self, method: str, header: str | None, inner: Any) -> Any:
        """Admitted before the first message is read; audited like a unary call (with no resource)."""

        async def handle(requests: AsyncIterator[Any], context: grpc.aio.ServicerContext) -> Any:
            async with self._turn(method, header, context):
                who = await self._admit(method, header, context, b"")
            return await self._audited(who, method, b"", context, lambda: inner(requests, context))

        return handle

    async def _audited(
        self,
        who: Principal,
        method: str,
        raw: bytes,
        context: grpc.aio.ServicerContext,
        call: Callable[[], Awaitable[Any]],
    ) -> Any:
        """``call()`` with ``who`` bound; then the audit row of an audited method, however it ended."""
        bound = principals.bind(who)
        code = "OK"
        try:
            return await call()
        except BaseException:
            code = _code_name(context)
            raise
        finally:
            principals.unbind(bound)
            if roles.METHODS[method].audited:
                await self._audit(who, method, raw, code, "", context)

    def _server_stream(self, method: str, header: str | None, inner: Any) -> Any:
        async def handle(raw: bytes, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
            async with self._turn(method, header, context):
                who = await self._admit(method, header, context, raw)
                slot = await self._stream_slot(method, who, raw, context)
            bound = principals.bind(who)
            try:
                with slot:
                    async for response in inner(raw, context):
                        yield response
            finally:
                _unbind(bound)

        return handle

    def _bidi(self, method: str, header: str | None, inner: Any) -> Any:
        async def handle(
            requests: AsyncIterator[Any], context: grpc.aio.ServicerContext
        ) -> AsyncIterator[Any]:
            async with self._turn(method, header, context):
                who = await self._admit(method, header, context, b"")
            bound = principals.bind(who)
            try:
                async for response in inner(requests, context):
                    yield response
            finally:
                _unbind(bound)

        return handle

    def _turn(
        self, method: str, header: str | None, context: grpc.aio.ServicerContext
    ) -> contextlib.AbstractAsyncContextManager[None]:
        """The call's turn at the database (none without ``call_turns`` or for a method it exempts),
        in the lane of the token it presents, or of its peer when it presents none of a token's form."""
        if self._call_turns is None or method in self._call_turns.exempt:
            return contextlib.nullcontext()
        token = parse(header[len(_BEARER) :]) if header and header.lower().startswith(_BEARER) else None
        lane = f"token:{token.token_id}" if token is not None else f"peer:{context.peer() or ''}"
        return self._call_turns.turn(lane)

    async def _admit(
        self, method: str, header: str | None, context: grpc.aio.ServicerContext, raw: bytes
    ) -> Principal:
        """The caller's principal; otherwise the call is audited and aborted."""
        try:
            who = await self._authenticate(header)
            access = roles.METHODS.get(method)
            if access is None:
                raise Refused(
                    grpc.StatusCode.PERMISSION_DENIED, f"{method} has no role; refused to everyone", who
                )
            if self._enabled and not roles.allows(who.role, access.role):
                raise Refused(
                    grpc.StatusCode.PERMISSION_DENIED,
                    f"token {who.name!r} has role {who.role}; {method} needs role {access.role}",
                    who,
                )
            return who
        except Refused as refusal:
            await self._audit(refusal.who, method, raw, refusal.code.name, refusal.message, context)
            await context.abort(refusal.code, refusal.message)
            raise AssertionError("unreachable") from None

    async def _stream_slot(
        self, method: str, who: Principal, raw: bytes, context: grpc.aio.ServicerContext
    ) -> contextlib.AbstractContextManager[object]:
        """The stream's slot under the caps (none to take for other methods); otherwise the call
        is audited and aborted with RESOURCE_EXHAUSTED."""
        if self._stream_limits is None or method not in self._stream_limits.methods:
            return contextlib.nullcontext()
        try:
            return self._stream_limits.take(who.name)
        except OverCap as over:
            code = grpc.StatusCode.RESOURCE_EXHAUSTED
            await self._audit(who, method, raw, code.name, str(over), context)
            await context.abort(code, str(over))
            raise AssertionError("unreachable") from None

    async def close(self) -> None:
        """Write the counts of refused calls still held (see ``schedd_rpc.refused_calls``)."""
        await self._refused.close()

    async def _authenticate(self, header: str | None) -> Principal:
        if not self._enabled:
            return ANONYMOUS
        if header is None:
            raise Refused(
                grpc.StatusCode.UNAUTHENTICATED,
                "no bearer token: send the metadata 'authorization: Bearer <token>'",
            )
        if not header.lower().startswith(_BEARER):
            raise Refused(
                grpc.StatusCode.UNAUTHENTICATED, "the authorization metadata must be 'Bearer <token>'"
            )
        token = parse(header[len(_BEARER) :])
        if token is None:
            raise Refused(
                grpc.StatusCode.UNAUTHENTICATED, "malformed token: schedd tokens look like sdt_<id>_<secret>"
            )
        try:
            found = await self._callers.principal_of(token)
        except Exception as exc:
            if not self._callers.is_transient(exc):
                raise
            raise Refused(
                grpc.StatusCode.UNAVAILABLE, "cannot check the token now: the database is unavailable"
            ) from None
        if isinstance(found, str):
            raise Refused(grpc.StatusCode.UNAUTHENTICATED, found)
        return found

    async def _audit(
        self,
        who: Principal | None,
        method: str,
        raw: bytes,
        code: str,
        detail: str,
        context: grpc.aio.ServicerContext,
    ) -> None:
        resource, request_id = self._described(method, raw)
        entry = AuditRecord(
            principal=who.name if who else "-",
            role=who.role if who else "",
            method=method,
            code=code,
            resource=resource,
            request_id=request_id,
            detail=detail or (context.details() or "" if hasattr(context, "details") else ""),
            peer=context.peer() or "",
        )
        try:
            if who is None:
                await self._refused.refused(entry)
            else:
                await self._write(entry)
        except Exception as exc:
            log.error(
                "cannot write the audit record of %s by %s (%s): %s", method, entry.principal, code, exc
            )

    async def _write(self, entry: AuditRecord) -> None:
        await self._callers.record(entry)

    def _described(self, method: str, raw: bytes) -> tuple[str, str]:
        """The resource named in the request and its request id ('' where there are none)."""
        message_class = self._inputs.get(method)
        if message_class is None or not raw:
            return "", ""
        try:
            message = message_class.FromString(raw)
        except Exception:
            return "", ""
        return resource_of(message), str(getattr(message, "request_id", "") or "")


def resource_of(message: Message) -> str:
    """The resource a request names: its ``name`` or ``parent``, else the id of the resource it
    carries (``dags/{dag_id}`` for a DAG spec, ``pools/{name}`` for a pool, ``variables/{key}`` and
    ``connections/{conn_id}``; never a value)."""
    names = message.DESCRIPTOR.fields_by_name
    for key in ("name", "parent"):
        if key in names and getattr(message, key):
            return str(getattr(message, key))
    secret = _secret_name(message)
    if secret:
        return secret
    for descriptor in message.DESCRIPTOR.fields:
        if descriptor.message_type is None or descriptor.is_repeated:
            continue
        if not message.HasField(descriptor.name):
            continue
        inner = getattr(message, descriptor.name)
        inner_names = inner.DESCRIPTOR.fields_by_name
        if "dag_id" in inner_names and inner.dag_id:
            return f"dags/{inner.dag_id}"
        if "name" in inner_names and isinstance(inner.name, str) and inner.name:
            return f"{descriptor.name}s/{inner.name}"
        if _secret_name(inner):
            return _secret_name(inner)
    return ""


def _secret_name(message: Message) -> str:
    """``variables/{key}`` or ``connections/{conn_id}`` for a message of the secrets protos."""
    if message.DESCRIPTOR.file.name != "schedd/v1/secrets.proto":
        return ""
    for field, kind in (("key", "variables"), ("conn_id", "connections")):
        if field in message.DESCRIPTOR.fields_by_name and getattr(message, field):
            return f"{kind}/{getattr(message, field)}"
    return ""


def _authorization(metadata: Iterable[tuple[str, str | bytes]] | None) -> str | None:
    for key, value in metadata or ():
        if key == "authorization":
            return value.decode(errors="replace") if isinstance(value, bytes) else value
    return None


def _code_name(context: grpc.aio.ServicerContext) -> str:
    code = context.code() if hasattr(context, "code") else None
    if isinstance(code, grpc.StatusCode):
        return str(code.name)
    return "UNKNOWN" if code is None else str(code)


def _unbind(bound: Any) -> None:
    with contextlib.suppress(ValueError):  # a stream closed from another context: nothing to restore
        principals.unbind(bound)
