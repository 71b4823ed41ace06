"""Serving a protobuf service: decoding, request hygiene and error translation, in one place.

:func:`add_service` registers a servicer for every method of a service descriptor. Each request
is decoded here (invalid bytes, invalid UTF-8 or nesting past protobuf's limit become
INVALID_ARGUMENT, not the INTERNAL gRPC would answer), checked by ``schedd_rpc.hygiene`` (NUL
characters, timestamp ranges, value depth), and only then given to the servicer method, whose
domain errors are mapped to status codes by the one table in ``schedd_rpc.errors``. When a client's
deadline passes, gRPC cancels the handler: the database and etcd calls it awaits are cancelled
and its transaction rolls back (``tests/e2e/test_api_conventions.py``). Servicer
methods therefore only translate messages: ``method(request, context)`` for unary methods,
``method(request_iterator, context)`` returning one response for client streams, and yielding
responses for bidirectional streams.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc
from google.protobuf.descriptor import MethodDescriptor, ServiceDescriptor
from google.protobuf.message import DecodeError, Message
from google.protobuf.message_factory import GetMessageClass

from schedd_core.errors import InvalidArgument
from schedd_rpc.errors import BackendErrors, abort_for
from schedd_rpc.hygiene import check_message


def add_service(
    server: grpc.aio.Server, service: ServiceDescriptor, servicer: object, *, backend: BackendErrors
) -> None:
    """Serve every method of ``service`` with the same-named method of ``servicer``; ``backend`` tells
    which failures of what the servicer calls are transient or timeouts (``schedd_rpc.errors``)."""
    handlers = {
        method.name: _handler(method, getattr(servicer, method.name), backend) for method in service.methods
    }
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(service.full_name, handlers),))


def decode(message_class: type[Message], raw: bytes, field: str = "request") -> Message:
    """Parse ``raw`` as ``message_class`` and check it; InvalidArgument if it is not one."""
    message = message_class()
    try:
        message.ParseFromString(raw)
    except (DecodeError, RecursionError, ValueError) as exc:
        raise InvalidArgument(field, f"is not a valid {message_class.DESCRIPTOR.full_name}: {exc}") from None
    check_message(message)
    return message


def _raw(data: bytes) -> bytes:
    return data


def _handler(
    method: MethodDescriptor, behavior: Callable[..., Any], backend: BackendErrors
) -> grpc.RpcMethodHandler:
    request_class = GetMessageClass(method.input_type)
    serialize = GetMessageClass(method.output_type).SerializeToString
    if method.client_streaming and method.server_streaming:
        return grpc.stream_stream_rpc_method_handler(
            _bidi(method.name, request_class, behavior, backend),
            request_deserializer=_raw,
            response_serializer=serialize,
        )
    if method.client_streaming:
        return grpc.stream_unary_rpc_method_handler(
            _client_stream(method.name, request_class, behavior, backend),
            request_deserializer=_raw,
            response_serializer=serialize,
        )
    if method.server_streaming:
        return grpc.unary_stream_rpc_method_handler(
            _server_stream(method.name, request_class, behavior, backend),
            request_deserializer=_raw,
            response_serializer=serialize,
        )
    return grpc.unary_unary_rpc_method_handler(
        _unary(method.name, request_class, behavior, backend),
        request_deserializer=_raw,
        response_serializer=serialize,
    )


def _unary(
    name: str,
    request_class: type[Message],
    behavior: Callable[[Message, Any], Awaitable[Message]],
    backend: BackendErrors,
) -> Callable[[bytes, grpc.aio.ServicerContext], Awaitable[Message]]:
    async def handle(raw: bytes, context: grpc.aio.ServicerContext) -> Message:
        try:
            return await behavior(decode(request_class, raw), context)
        except Exception as exc:
            await abort_for(context, exc, name, backend)
            raise AssertionError("unreachable") from exc

    return handle


def _server_stream(
    name: str,
    request_class: type[Message],
    behavior: Callable[[Message, Any], AsyncIterator[Message]],
    backend: BackendErrors,
) -> Callable[[bytes, grpc.aio.ServicerContext], AsyncIterator[Message]]:
    async def handle(raw: bytes, context: grpc.aio.ServicerContext) -> AsyncIterator[Message]:
        try:
            async for response in behavior(decode(request_class, raw), context):
                yield response
        except Exception as exc:
            await abort_for(context, exc, name, backend)

    return handle


def _client_stream(
    name: str,
    request_class: type[Message],
    behavior: Callable[[AsyncIterator[Message], Any], Awaitable[Message]],
    backend: BackendErrors,
) -> Callable[[AsyncIterator[bytes], grpc.aio.ServicerContext], Awaitable[Message]]:
    async def handle(requests: AsyncIterator[bytes], context: grpc.aio.ServicerContext) -> Message:
        async def decoded() -> AsyncIterator[Message]:
            async for raw in requests:
                yield decode(request_class, raw, "message")

        try:
            return await behavior(decoded(), context)
        except Exception as exc:
            await abort_for(context, exc, name, backend)
            raise AssertionError("unreachable") from exc

    return handle


def _bidi(
    name: str,
    request_class: type[Message],
    behavior: Callable[[AsyncIterator[Message], Any], AsyncIterator[Message]],
    backend: BackendErrors,
) -> Callable[[AsyncIterator[bytes], grpc.aio.ServicerContext], AsyncIterator[Message]]:
    async def handle(
        requests: AsyncIterator[bytes], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[Message]:
        async def decoded() -> AsyncIterator[Message]:
            async for raw in requests:
                yield decode(request_class, raw, "message")

        try:
            async for response in behavior(decoded(), context):
                yield response
        except Exception as exc:
            await abort_for(context, exc, name, backend)

    return handle
