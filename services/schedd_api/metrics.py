"""Prometheus metrics of the api: every call counted by method and the gRPC code it ended with,
and its duration by method, measured by a server interceptor.

The interceptor sits outside authentication, so refused calls (UNAUTHENTICATED,
PERMISSION_DENIED) are counted too. ``method`` is the gRPC method path without its leading slash
(``schedd.v1.RunService/CreateRun``): only methods the server serves are counted, so the label
is bounded by the API. A streaming call's duration is the stream's whole life.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc
from prometheus_client import CollectorRegistry, Counter, Histogram

from schedd_telemetry import exposition

#: Seconds; from a cached read to a slow write or a short stream.
BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class ApiMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "schedd_api_requests",
            "API calls, by method and the gRPC status code they ended with.",
            ["method", "code"],
            registry=self.registry,
        )
        self.seconds = Histogram(
            "schedd_api_request_seconds",
            "Duration of API calls (a stream's whole life), by method.",
            ["method"],
            registry=self.registry,
            buckets=BUCKETS,
        )

    def serve(self, address: str) -> None:
        exposition.serve(self.registry, address)

    def observe(self, method: str, code: str, seconds: float) -> None:
        self.requests.labels(method=method, code=code).inc()
        self.seconds.labels(method=method).observe(seconds)


class MetricsInterceptor(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """Counts and times every call of a method the server serves (see the module docstring)."""

    def __init__(self, metrics: ApiMetrics) -> None:
        self._metrics = metrics

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(details)
        if handler is None:
            return None
        method = str(details.method).lstrip("/")
        if handler.unary_unary is not None:
            return grpc.unary_unary_rpc_method_handler(
                self._unary(method, handler.unary_unary),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        if handler.unary_stream is not None:
            return grpc.unary_stream_rpc_method_handler(
                self._stream(method, handler.unary_stream),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        if handler.stream_unary is not None:
            return grpc.stream_unary_rpc_method_handler(
                self._unary(method, handler.stream_unary),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        return grpc.stream_stream_rpc_method_handler(
            self._stream(method, handler.stream_stream),
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )

    def _unary(self, method: str, inner: Any) -> Any:
        async def handle(request: Any, context: grpc.aio.ServicerContext) -> Any:
            started = time.perf_counter()
            code = "OK"
            try:
                return await inner(request, context)
            except BaseException:
                code = code_name(context, "UNKNOWN")
                raise
            finally:
                if code == "OK":
                    code = code_name(context, "OK")
                self._metrics.observe(method, code, time.perf_counter() - started)

        return handle

    def _stream(self, method: str, inner: Any) -> Any:
        async def handle(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
            started = time.perf_counter()
            code = "OK"
            try:
                async for response in inner(request, context):
                    yield response
            except BaseException as exc:
                default = (
                    "CANCELLED" if isinstance(exc, (GeneratorExit, asyncio.CancelledError)) else "UNKNOWN"
                )
                code = code_name(context, default)
                raise
            finally:
                if code == "OK":
                    code = code_name(context, "OK")
                self._metrics.observe(method, code, time.perf_counter() - started)

        return handle


def code_name(context: grpc.aio.ServicerContext, default: str) -> str:
    """The name of the status code the handler set on ``context`` (by ``abort`` or ``set_code``), or
    ``default`` when it set none."""
    code = context.code() if hasattr(context, "code") else None
    if isinstance(code, grpc.StatusCode):
        return str(code.name)
    if isinstance(code, int):
        return next((c.name for c in grpc.StatusCode if c.value[0] == code), default)
    return default
