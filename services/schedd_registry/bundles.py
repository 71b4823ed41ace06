"""Serving code bundles to workers: ``WorkerRegistry.FetchBundle``.

A worker fetches the archive of the bundle an assignment pins (``Assignment.code_bundle``); the
registry reads it from PostgreSQL in pieces and streams them. A malformed hash is
INVALID_ARGUMENT, a hash never uploaded NOT_FOUND (before any chunk); only worker tokens may call
it (``schedd_auth.roles``). The worker checks the archive's SHA-256 itself
(``schedd_exec.bundle_cache``), so a corrupted transfer is never run.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from schedd.v1 import worker_pb2
from schedd_store import bundles
from schedd_store.database import Engine


async def stream_bundle(engine: Engine, sha256: str) -> AsyncIterator[worker_pb2.BundleChunk]:
    """The chunks of bundle ``sha256``'s archive, in order."""
    size, pieces = await bundles.read_bundle(engine, sha256)
    async for data in pieces:
        yield worker_pb2.BundleChunk(data=data, total_bytes=size)
