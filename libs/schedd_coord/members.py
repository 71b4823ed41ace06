"""Worker membership in etcd: each worker keeps ``/schedd/workers/{id}`` under its own lease.

When a worker dies or is cut off, its lease ends and etcd deletes the key. The leading
scheduler lists the keys (a linearizable read) before it fails over attempts, because a
worker without a live key is allowed to run unheard only for its shorter fence window;
and it watches the prefix to look again as soon as a key goes.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

from schedd_coord.client import EtcdClient

WORKERS_PREFIX = b"/schedd/workers/"


def worker_key(worker_id: str) -> bytes:
    return WORKERS_PREFIX + worker_id.encode()


async def announce_worker(client: EtcdClient, worker_id: str, incarnation: str, lease_id: int) -> None:
    await client.put(worker_key(worker_id), json.dumps({"incarnation": incarnation}).encode(), lease=lease_id)


async def leased_workers(client: EtcdClient) -> list[str]:
    """The ids of the workers whose liveness key exists now (their lease is alive in etcd)."""
    return sorted(kv.key[len(WORKERS_PREFIX) :].decode() for kv in await client.get_prefix(WORKERS_PREFIX))


async def departed_workers(client: EtcdClient) -> AsyncIterator[list[str]]:
    """Yield the ids of workers whose key was deleted (lease ended or revoked), from now on."""
    revision = await client.ping()
    async for events in client.watch(WORKERS_PREFIX, start_revision=revision + 1, prefix=True):
        gone = [kv.key[len(WORKERS_PREFIX) :].decode() for kind, kv in events if kind == "delete"]
        if gone:
            yield gone
