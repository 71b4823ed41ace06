"""A worker's HTTP/2 keep-alive pings against a schedd gRPC server: an idle stream stays open.

A worker pings its registry every 2 s, also while nothing else moves on its stream, so it notices a
frozen registry quickly (``schedd_worker.agent.REGISTRY_CHANNEL_OPTIONS``). gRPC servers by default
take pings more often than every five minutes without data as abuse and answer the third with
GOAWAY "too_many_pings": every idle worker's stream broke at its first idle heartbeat (10 s after
the last), and the worker reconnected. A real server (``schedd_rpc.server.make_server``) and a
real channel with the worker's options; the idle stream is a health watch, which sends nothing
while the status stands, and a call after a quiet spell stands for the idle heartbeat.
"""

from __future__ import annotations

import asyncio
import socket

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from schedd_rpc.server import make_server
from schedd_worker.agent import REGISTRY_CHANNEL_OPTIONS

#: Seconds without a message before the call that stands for an idle heartbeat: more than three
#: of the worker's pings (the stream broke with 7 s, not with 6).
QUIET = 8.0
#: Seconds the stream is watched after that call.
AFTER = 3.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_an_idle_stream_outlives_the_workers_keepalive_pings() -> None:
    address = f"127.0.0.1:{_free_port()}"
    server, _ = make_server(address, [], lambda _: None)
    await server.start()
    try:
        async with grpc.aio.insecure_channel(address, options=REGISTRY_CHANNEL_OPTIONS) as channel:
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
