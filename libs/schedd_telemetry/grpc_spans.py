"""A server span for every gRPC call, for servers with tracing on (install it only then).

The span is named after the method path (``schedd.v1.RunService/CreateRun``), continues the
caller's trace when the call carries a ``traceparent`` metadata entry, is current while the
handler runs (so what the handler records, a run's trace context for one, belongs to it) and
ends with the call, with the gRPC status code as ``rpc.grpc.status_code``; a code other than OK
marks it as an error.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import Any

import grpc
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from schedd_telemetry import tracing


class ServerSpanInterceptor(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    def __init__(self, service: str) -> None:
        self._tracer = tracing.tracer(service)

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(details)
        if handler is None:
            return None
        method = str(details.method).lstrip("/")
        parent = tracing.parent(_traceparent(details.invocation_metadata))
        options = {
            "request_deserializer": handler.request_deserializer,
            "response_serializer": handler.response_serializer,
        }
        if handler.unary_unary is not None:
            return grpc.unary_unary_rpc_method_handler(
                self._unary(method, parent, handler.unary_unary), **options
            )
        if handler.stream_unary is not None:
            return grpc.stream_unary_rpc_method_handler(
                self._unary(method, parent, handler.stream_unary), **options
            )
        if handler.unary_stream is not None:
            return grpc.unary_stream_rpc_method_handler(
                self._stream(method, parent, handler.unary_stream), **options
            )
        return grpc.stream_stream_rpc_method_handler(
            self._stream(method, parent, handler.stream_stream), **options
        )

    def _unary(self, method: str, parent: Any, inner: Any) -> Any:
        async def handle(request: Any, context: grpc.aio.ServicerContext) -> Any:
            with self._tracer.start_as_current_span(
                method, context=parent, kind=SpanKind.SERVER, record_exception=False
            ) as span:
                try:
                    return await inner(request, context)
                finally:
                    _end(span, context)

        return handle

    def _stream(self, method: str, parent: Any, inner: Any) -> Any:
        async def handle(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
            with self._tracer.start_as_current_span(
                method, context=parent, kind=SpanKind.SERVER, record_exception=False
            ) as span:
                try:
                    async for response in inner(request, context):
                        yield response
                finally:
                    _end(span, context)

        return handle


def _end(span: trace.Span, context: grpc.aio.ServicerContext) -> None:
    code = context.code() if hasattr(context, "code") else None
    name = code.name if isinstance(code, grpc.StatusCode) else "OK" if code is None else str(code)
    span.set_attribute("rpc.system", "grpc")
    span.set_attribute("rpc.grpc.status_code", name)
    if name != "OK":
        span.set_status(Status(StatusCode.ERROR, name))


def _traceparent(metadata: Iterable[tuple[str, str | bytes]] | None) -> str:
    for key, value in metadata or ():
        if key == "traceparent":
            return value.decode(errors="replace") if isinstance(value, bytes) else value
    return ""
