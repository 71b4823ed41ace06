"""The machine's own limits, measured in the same run as schedd's figures: what the parts schedd is
built from cost here, with nothing of schedd in the way.

- PostgreSQL: a single-row UPDATE transaction (synchronous commit on), one connection, its latency;
  transactions per second with 1 and 4 connections, and with 4 connections when each transaction
  also sends a NOTIFY (a notifying commit holds PostgreSQL's one cluster-wide notification lock
  through its WAL flush, so such commits serialise: the ceiling of a design that notifies once per
  result); LISTEN/NOTIFY from a committing connection to a listening one.
- gRPC: a unary call and a message round trip on a bidirectional stream, both on localhost, in Python.
- etcd: a transaction (the compare-and-put an election makes).

A chain link needs at least three durable commits (the result, the leader's pass, the claim), two
notifications and two stream hops; :func:`link_floor` adds those up.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import asyncpg  # type: ignore[import-untyped, unused-ignore]
import grpc

from schedd_coord.client import EtcdClient
from schedd_core.database_url import asyncpg_dsn

_ECHO = "/floor.Echo/"


async def _timed(call: Callable[[], Awaitable[object]], n: int) -> list[float]:
    samples = []
    for _ in range(n):
        started = time.perf_counter()
        await call()
        samples.append((time.perf_counter() - started) * 1000)
    return samples


def _summary(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {"median_ms": statistics.median(ordered), "p99_ms": ordered[int(0.99 * (len(ordered) - 1))]}


async def postgres_floor(database_url: str, n: int = 2000) -> dict[str, Any]:
    dsn = asyncpg_dsn(database_url)
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute("CREATE TABLE IF NOT EXISTS bench_floor (id int PRIMARY KEY, v bigint)")
        await conn.execute(
            "INSERT INTO bench_floor VALUES (1, 0), (2, 0), (3, 0), (4, 0) ON CONFLICT DO NOTHING"
        )
        update = await conn.prepare("UPDATE bench_floor SET v = v + 1 WHERE id = $1")
        commit = _summary(await _timed(lambda: update.fetch(1), n))
        select = _summary(await _timed(lambda: conn.fetchval("SELECT 1"), n))
        per_s_1 = await _commits_per_second([conn], n)
        others = [await asyncpg.connect(dsn) for _ in range(3)]
        try:
            per_s_4 = await _commits_per_second([conn, *others], n)
            per_s_4_notifying = await _commits_per_second([conn, *others], n, notify=True)
            notify = _summary(await _notify_latency(conn, others[0], n // 4))
        finally:
            for other in others:
                await other.close()
        await conn.execute("DROP TABLE bench_floor")
    finally:
        await conn.close()
    return {
        "update_commit": commit,
        "select_round_trip": select,
        "commits_per_s_1_connection": per_s_1,
        "commits_per_s_4_connections": per_s_4,
        "commits_per_s_4_connections_notifying": per_s_4_notifying,
        "notify_to_listener": notify,
    }


async def _commits_per_second(conns: list[Any], n: int, *, notify: bool = False) -> float:
    async def work(conn: Any, key: int) -> None:
        for _ in range(n // len(conns)):
            if not notify:
                await conn.execute("UPDATE bench_floor SET v = v + 1 WHERE id = $1", key)
                continue
            async with conn.transaction():
                await conn.execute("UPDATE bench_floor SET v = v + 1 WHERE id = $1", key)
                await conn.execute("SELECT pg_notify('bench_floor_commits', '')")

    started = time.perf_counter()
    await asyncio.gather(*(work(c, i + 1) for i, c in enumerate(conns)))
    return (n // len(conns)) * len(conns) / (time.perf_counter() - started)


async def _notify_latency(sender: Any, listener: Any, n: int) -> list[float]:
    received: asyncio.Queue[float] = asyncio.Queue()
    await listener.add_listener("bench_floor", lambda *_: received.put_nowait(time.perf_counter()))
    samples = []
    for _ in range(n):
        started = time.perf_counter()
        await sender.execute("SELECT pg_notify('bench_floor', '')")
        samples.append((await received.get() - started) * 1000)
    return samples


async def grpc_floor(n: int = 2000) -> dict[str, Any]:
    async def unary(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        return request

    async def stream(
        requests: AsyncIterator[bytes], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[bytes]:
        async for request in requests:
            yield request

    handler = grpc.method_handlers_generic_handler(
        "floor.Echo",
        {
            "Unary": grpc.unary_unary_rpc_method_handler(unary),
            "Stream": grpc.stream_stream_rpc_method_handler(stream),
        },
    )
    server = grpc.aio.server()
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            call_unary = channel.unary_unary(_ECHO + "Unary")
            unary_samples = await _timed(lambda: call_unary(b"x"), n)
            call = channel.stream_stream(_ECHO + "Stream")()

            async def ping() -> None:
                await call.write(b"x")
                await call.read()

            stream_samples = await _timed(ping, n)
            await call.done_writing()
    finally:
        await server.stop(None)
    return {"unary_round_trip": _summary(unary_samples), "stream_round_trip": _summary(stream_samples)}


async def etcd_floor(endpoints: str, n: int = 500) -> dict[str, Any]:
    client = EtcdClient(endpoints)
    try:
        keys = iter(range(n))
        samples = await _timed(
            lambda: client.create_if_absent(f"/bench-floor/{next(keys)}".encode(), b"v", lease=0), n
        )
    finally:
        await client.close()
    return {"transaction": _summary(samples)}


def link_floor(floors: dict[str, Any]) -> float:
    """Milliseconds a chain link needs at least: three durable commits, two notifications, two stream
    hops (half a round trip each)."""
    pg, rpc = floors["postgres"], floors["grpc"]
    return float(
        3 * pg["update_commit"]["median_ms"]
        + 2 * pg["notify_to_listener"]["median_ms"]
        + rpc["stream_round_trip"]["median_ms"]
    )


def measure_floors(database_url: str, etcd_endpoints: str) -> dict[str, Any]:
    floors: dict[str, Any] = {
        "postgres": asyncio.run(postgres_floor(database_url)),
        "grpc": asyncio.run(grpc_floor()),
        "etcd": asyncio.run(etcd_floor(etcd_endpoints)),
    }
    floors["chain_link_floor_ms"] = link_floor(floors)
    return floors
