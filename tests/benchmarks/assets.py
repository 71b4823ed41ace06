"""The benchmark's asset workload: how long from an asset event to the start of the run it triggers,
for events recorded through the api and for messages on a Redis stream the leader watches. Each
event gets its own run (the next one is sent once the previous run ended). The event side is the
event's commit time (api) or the moment the message was sent (the stream); the run side is the run's
start as the database recorded it."""

from __future__ import annotations

import json
import secrets
import statistics
import time
from pathlib import Path
from typing import Any

import grpc
import redis

from schedd.v1 import assets_pb2 as apb, assets_pb2_grpc
from schedd_devstack.services import Cluster
from tests.benchmarks.common import percentile, register

REDIS_URL = "redis://127.0.0.1:6379/0"
#: Longest the workload waits for one run.
RUN_SECONDS = 60.0


def watcher_env(stream: str) -> dict[str, str]:
    """The scheduler's environment for a watcher of ``stream`` (asset ``redis://bench/stream``)."""
    watcher = {
        "name": "bench",
        "kind": "redis_stream",
        "url": REDIS_URL,
        "stream": stream,
        "asset": "redis://bench/stream",
    }
    return {"SCHEDD_ASSET_WATCHERS": json.dumps([watcher])}


def _consumer(dag_id: str, uri: str) -> dict[str, Any]:
    return {
        "dag_id": dag_id,
        "asset_schedule": {"asset": {"uri": uri}},
        "tasks": [{"task_id": "t", "shell": {"command": "true"}}],
    }


def _run_started(cluster: Cluster, dag_id: str, nth: int) -> float:
    """The start (epoch seconds) of the DAG's ``nth`` asset-triggered run, once it has ended."""
    deadline = time.monotonic() + RUN_SECONDS
    while time.monotonic() < deadline:
        rows = cluster.fetch(
            "SELECT EXTRACT(EPOCH FROM started_at) AS started, state FROM dag_runs WHERE dag_id = $1 "
            "AND run_type = 'asset_triggered' ORDER BY id",
            dag_id,
        )
        if len(rows) >= nth and rows[nth - 1]["state"] in ("success", "failed"):
            return float(rows[nth - 1]["started"])
        time.sleep(0.01)
    raise RuntimeError(f"timed out waiting for run {nth} of {dag_id}")


def _figures(delays: list[float]) -> dict[str, Any]:
    ms = sorted(d * 1000 for d in delays)
    return {"n": len(ms), "median_ms": statistics.median(ms), "p90_ms": percentile(ms, 90), "max_ms": ms[-1]}


def measure_asset_latency(cluster: Cluster, workdir: Path, stream: str, events: int) -> dict[str, Any]:
    register(cluster, _consumer("bench_api", "bench://events"), workdir)
    register(cluster, _consumer("bench_stream", "redis://bench/stream"), workdir)
    api: list[float] = []
    with grpc.insecure_channel(cluster.api_address) as channel:
        stub = assets_pb2_grpc.AssetServiceStub(channel)
        for n in range(1, events + 1):
            event = stub.CreateAssetEvent(apb.CreateAssetEventRequest(uri="bench://events"), timeout=10)
            api.append(_run_started(cluster, "bench_api", n) - event.create_time.ToDatetime().timestamp())
    client = redis.Redis.from_url(REDIS_URL)
    broker: list[float] = []
    try:
        for n in range(1, events + 1):
            sent = time.time()
            client.xadd(stream, {"n": str(n), "nonce": secrets.token_hex(4)})
            broker.append(_run_started(cluster, "bench_stream", n) - sent)
    finally:
        client.delete(stream)
    return {"api_event_to_run_start": _figures(api), "broker_message_to_run_start": _figures(broker)}
