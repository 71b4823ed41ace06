"""Fetching code bundles from the registries (``WorkerRegistry.FetchBundle``) for the bundle cache.

The registries are tried in the configured order; a registry that cannot be reached is skipped,
an answer that no registry could change (the bundle does not exist, the token may not fetch it)
ends the fetch at once. What arrives is checked by the cache (``schedd_exec.bundle_cache``: its
SHA-256 must be the one asked for, and it must pass the archive checks before anything is
unpacked); here only its size is bounded, so a misbehaving peer cannot fill the worker's memory.
"""

from __future__ import annotations

from collections.abc import Callable

import grpc

from schedd.v1 import worker_pb2, worker_pb2_grpc
from schedd_core.limits import MAX_ARCHIVE_BYTES
from schedd_rpc.tls import token_metadata

#: Seconds one registry has to send a whole bundle.
FETCH_TIMEOUT = 120.0
_FINAL = frozenset(
    {
        grpc.StatusCode.NOT_FOUND,
        grpc.StatusCode.INVALID_ARGUMENT,
        grpc.StatusCode.PERMISSION_DENIED,
        grpc.StatusCode.UNAUTHENTICATED,
    }
)


class BundleFetchError(Exception):
    """No registry sent the bundle; the message says what each answered."""


class RegistryBundleFetcher:
    def __init__(
        self, registries: tuple[str, ...], token: str, channel: Callable[[str], grpc.aio.Channel]
    ) -> None:
        self._registries = registries
        self._token = token
        self._channel = channel

    async def fetch(self, sha256: str) -> bytes:
        """The archive of bundle ``sha256`` as a registry sent it."""
        problems = []
        for registry in self._registries:
            try:
                async with self._channel(registry) as channel:
                    call = worker_pb2_grpc.WorkerRegistryStub(channel).FetchBundle(
                        worker_pb2.FetchBundleRequest(sha256=sha256),
                        metadata=token_metadata(self._token),
                        timeout=FETCH_TIMEOUT,
                    )
                    data = bytearray()
                    async for chunk in call:
                        data += chunk.data
                        if len(data) > MAX_ARCHIVE_BYTES:
                            raise BundleFetchError(
                                f"registry {registry} sent more than {MAX_ARCHIVE_BYTES} bytes for bundle "
                                f"{sha256}"
                            )
                    return bytes(data)
            except grpc.aio.AioRpcError as exc:
                problem = f"registry {registry}: {exc.code().name}: {exc.details()}"
                if exc.code() in _FINAL:
                    raise BundleFetchError(f"cannot fetch code bundle {sha256}: {problem}") from None
                problems.append(problem)
        raise BundleFetchError(f"cannot fetch code bundle {sha256}: {'; '.join(problems)}")
