"""The frame every schedd gRPC server shares: health checking, reflection, graceful stop."""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Callable, Iterable

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

log = logging.getLogger(__name__)

#: Largest request a server accepts. Larger requests fail with RESOURCE_EXHAUSTED.
MAX_MESSAGE_BYTES = 8 * 1024 * 1024


def make_server(
    address: str, service_names: Iterable[str], register: Callable[[grpc.aio.Server], None]
) -> tuple[grpc.aio.Server, health.aio.HealthServicer]:
    """A server on ``address`` with the services ``register`` adds, plus health and reflection.

    Returns the server (not started) and its health servicer; every named service starts SERVING.
    """
    server = grpc.aio.server(
        options=[
            ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
            ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
            ("grpc.so_reuseport", 0),
        ]
    )
    register(server)
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    names = list(service_names)
    reflection.enable_server_reflection([*names, health.SERVICE_NAME, reflection.SERVICE_NAME], server)
    port = server.add_insecure_port(address)
    if port == 0:
        raise OSError(f"cannot listen on {address}")
    return server, health_servicer


async def set_serving(
    health_servicer: health.aio.HealthServicer, names: Iterable[str], serving: bool
) -> None:
    status = health_pb2.HealthCheckResponse.SERVING if serving else health_pb2.HealthCheckResponse.NOT_SERVING
    for name in ["", *names]:
        await health_servicer.set(name, status)


def stop_signals() -> asyncio.Event:
    """An event set on SIGTERM or SIGINT (installed on the running loop)."""
    event = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, event.set)
    return event
