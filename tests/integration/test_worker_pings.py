"""HTTP/2 keep-alive pings against a schedd gRPC server: an idle stream stays open.

A worker pings its registry, also while nothing else moves on its stream, so it notices a frozen
registry (``schedd_worker.registry_channel``). gRPC servers by default take pings more often than
every five minutes without data as abuse and answer the third with GOAWAY "too_many_pings": when
workers pinged every 2 s, every idle worker's stream broke at its first idle heartbeat (10 s after
the last), and the worker reconnected. A real server (``schedd_rpc.server.make_server``) and a real
channel with the worker's options, pinging every 2 s here (five times the worker's rate, twice the
server's floor) so that three pings fit in a short test; the idle stream is a health watch, which
sends nothing while the status stands, and a call after a quiet spell stands for the idle heartbeat.
"""

from __future__ import annotations

import asyncio
import socket

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from schedd_rpc.server import MIN_CLIENT_PING_INTERVAL_MS, make_server
from schedd_worker.registry_channel import REGISTRY_CHANNEL_OPTIONS, REGISTRY_PING_INTERVAL_MS

#: The test's ping interval, in place of the worker's.
PING_MS = 2000

#: Seconds without a message before the call that stands for an idle heartbeat: more than three
#: pings (with the server's default policy the stream broke with 7 s, not with 6).
QUIET = 8.0
#: Seconds the stream is watched after that call.
AFTER = 3.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_workers_ping_no_more_often_than_servers_accept() -> None:
    assert REGISTRY_PING_INTERVAL_MS >= PING_MS >= MIN_CLIENT_PING_INTERVAL_MS


async def test_an_idle_stream_outlives_frequent_keepalive_pings() -> None:
    options = [(k, PING_MS if k == "grpc.keepalive_time_ms" else v) for k, v in REGISTRY_CHANNEL_OPTIONS]
    address = f"127.0.0.1:{_free_port()}"
    server, _ = make_server(address, [], lambda _: None)
    await server.start()
    try:
        async with grpc.aio.insecure_channel(address, options=options) as channel:
            watch = health_pb2_grpc.HealthStub(channel).Watch(health_pb2.HealthCheckRequest(service=""))
            first = await asyncio.wait_for(watch.read(), timeout=10)
            assert first.status == health_pb2.HealthCheckResponse.SERVING

            async def heartbeat_after_a_quiet_spell() -> None:
                await asyncio.sleep(QUIET)
                request = health_pb2.HealthCheckRequest(service="")
                await health_pb2_grpc.HealthStub(channel).Check(request, timeout=10)

            heartbeat = asyncio.create_task(heartbeat_after_a_quiet_spell())
            try:
                news = await asyncio.wait_for(watch.read(), timeout=QUIET + AFTER)
            except TimeoutError:
                news = None  # nothing happened on the stream: it is still open
            except grpc.aio.AioRpcError as exc:
                raise AssertionError(f"the idle stream broke: {exc.code().name}: {exc.details()}") from exc
            assert news is None, f"unexpected message on an idle stream: {news}"
            await heartbeat  # the call after the quiet spell went through
            watch.cancel()
    finally:
        await server.stop(None)
