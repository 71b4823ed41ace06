"""The frame every schedd gRPC server shares: health checking, reflection, TLS, the access
interceptor, graceful stop."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from collections.abc import Callable, Iterable, Sequence

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from schedd_core.errors import InvalidArgument
from schedd_core.limits import (
    MAX_RECEIVE_BYTES,
    MAX_RECEIVE_BYTES_SETTING,
    MAX_SEND_BYTES,
    MIN_RECEIVE_BYTES_SETTING,
)
from schedd_rpc.tls import ServerTLS

log = logging.getLogger(__name__)

#: The shortest interval between a client's HTTP/2 pings that a server accepts, with or without calls
#: and whether or not anything else moved on the connection. A worker pings its registry to notice a
#: frozen one (``schedd_worker.registry_channel``); gRPC's default (5 min without data, GOAWAY
#: "too_many_pings" at the third ping) broke every idle worker's stream at its first idle heartbeat
#: when it pinged every 2 s (``tests/integration/test_worker_pings.py``).
MIN_CLIENT_PING_INTERVAL_MS = 1000

#: Largest message a server receives by default (``SCHEDD_MAX_MESSAGE_BYTES``). gRPC refuses a
#: larger one with RESOURCE_EXHAUSTED before any interceptor or handler runs, so before the token is
#: looked up (``tests/security/test_message_size.py``). Large payloads (code bundles) are streamed.


def make_server(
    address: str,
    service_names: Iterable[str],
    register: Callable[[grpc.aio.Server], None],
    *,
    tls: ServerTLS | None = None,
    interceptors: Sequence[grpc.aio.ServerInterceptor] = (),
    max_receive_bytes: int = MAX_RECEIVE_BYTES,
) -> tuple[grpc.aio.Server, health.aio.HealthServicer]:
    """A server on ``address`` with the services ``register`` adds, plus health and reflection,
    serving TLS when ``tls`` is given and plaintext otherwise, every call passing ``interceptors``.

    Each message received is at most ``max_receive_bytes`` (whatever the method, before
    authentication); each sent, at most :data:`MAX_SEND_BYTES`.
    Returns the server (not started) and its health servicer; every named service starts SERVING.
    """
    server = grpc.aio.server(
        interceptors=list(interceptors),
        options=[
            ("grpc.max_receive_message_length", max_receive_bytes),
            ("grpc.max_send_message_length", MAX_SEND_BYTES),
            ("grpc.so_reuseport", 0),
            ("grpc.http2.min_ping_interval_without_data_ms", MIN_CLIENT_PING_INTERVAL_MS),
            ("grpc.keepalive_permit_without_calls", 1),
        ],
    )
    register(server)
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    names = list(service_names)
    reflection.enable_server_reflection([*names, health.SERVICE_NAME, reflection.SERVICE_NAME], server)
    port = server.add_secure_port(address, tls.credentials()) if tls else server.add_insecure_port(address)
    if port == 0:
        raise OSError(f"cannot listen on {address}")
    return server, health_servicer


async def set_serving(
    health_servicer: health.aio.HealthServicer, names: Iterable[str], serving: bool
) -> None:
    status = health_pb2.HealthCheckResponse.SERVING if serving else health_pb2.HealthCheckResponse.NOT_SERVING
    for name in ["", *names]:
        await health_servicer.set(name, status)


def auth_enabled(env: dict[str, str] | None = None) -> bool:
    """``SCHEDD_AUTH``: ``tokens`` (the default) requires a bearer token on every call; ``none``
    disables authentication for development, which the caller must log loudly."""
    value = (env if env is not None else dict(os.environ)).get("SCHEDD_AUTH", "tokens")
    if value not in ("tokens", "none"):
        raise InvalidArgument("SCHEDD_AUTH", f"must be 'tokens' or 'none', not {value!r}")
    return value == "tokens"


def max_receive_bytes(env: dict[str, str] | None = None) -> int:
    """``SCHEDD_MAX_MESSAGE_BYTES``: the largest message a server receives (default
    :data:`MAX_RECEIVE_BYTES`; at least 64 KiB, at most 64 MiB)."""
    raw = (env if env is not None else dict(os.environ)).get("SCHEDD_MAX_MESSAGE_BYTES", "").strip()
    if not raw:
        return MAX_RECEIVE_BYTES
    if not raw.isdigit() or not MIN_RECEIVE_BYTES_SETTING <= int(raw) <= MAX_RECEIVE_BYTES_SETTING:
        raise InvalidArgument(
            "SCHEDD_MAX_MESSAGE_BYTES",
            f"must be bytes between {MIN_RECEIVE_BYTES_SETTING} and {MAX_RECEIVE_BYTES_SETTING}, not {raw!r}",
        )
    return int(raw)


def warn_auth_disabled(service: str) -> None:
    log.warning(
        "AUTHENTICATION IS DISABLED (SCHEDD_AUTH=none): anyone who can reach this %s may call every "
        "method as an admin. Use this for local development only.",
        service,
    )


def stop_signals() -> asyncio.Event:
    """An event set on SIGTERM or SIGINT (installed on the running loop)."""
    event = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, event.set)
    return event
