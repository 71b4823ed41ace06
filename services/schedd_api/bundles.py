"""``BundleService``: storing code bundles (content-addressed archives of Python modules).

An upload is a client stream of pieces (each under the server's message limit,
``schedd_rpc.server``). The total is bounded while it streams: past
``schedd_core.bundle_archive.MAX_ARCHIVE_BYTES`` the call ends with INVALID_ARGUMENT at once,
without reading the rest. The whole archive is then checked before anything is stored
(``schedd_store.bundles.put_bundle``, with this api's :class:`ArchiveLimits`): a malformed hash, a
hash that does not match, an archive that is not a bundle archive (a link, a device, a sparse file,
too many members, too many unpacked bytes...) is INVALID_ARGUMENT naming the field and the member
(``tests/security/test_archives.py``). Uploading a bundle that is stored already answers OK with
``created`` false.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc

from schedd.v1 import api_pb2
from schedd_core.bundle_archive import DEFAULT_LIMITS, ArchiveLimits, check_sha256
from schedd_core.errors import InvalidArgument
from schedd_core.limits import MAX_ARCHIVE_BYTES
from schedd_store import bundles
from schedd_store.database import Engine


class BundleServicer:
    def __init__(self, engine: Engine, limits: ArchiveLimits = DEFAULT_LIMITS) -> None:
        self._engine = engine
        self._limits = limits

    async def UploadBundle(
        self, requests: AsyncIterator[api_pb2.UploadBundleRequest], context: grpc.aio.ServicerContext
    ) -> api_pb2.UploadBundleResponse:
        sha256, archive = await receive_upload(requests)
        created = await bundles.put_bundle(self._engine, sha256, archive, self._limits)
        return api_pb2.UploadBundleResponse(sha256=sha256, size_bytes=len(archive), created=created)


async def receive_upload(requests: AsyncIterator[api_pb2.UploadBundleRequest]) -> tuple[str, bytes]:
    """The hash the first piece names and the archive the pieces add up to; InvalidArgument as soon
    as the hash is malformed or changes, or the archive grows past MAX_ARCHIVE_BYTES."""
    sha256 = ""
    archive = bytearray()
    async for request in requests:
        if not sha256:
            sha256 = check_sha256(request.sha256, "sha256")
        elif request.sha256 and request.sha256 != sha256:
            raise InvalidArgument("sha256", f"changed from {sha256} to {request.sha256} within one upload")
        archive += request.archive
        if len(archive) > MAX_ARCHIVE_BYTES:
            raise InvalidArgument(
                "archive",
                f"is more than {MAX_ARCHIVE_BYTES} bytes; a bundle may be at most {MAX_ARCHIVE_BYTES}",
            )
    if not sha256:
        raise InvalidArgument("sha256", "is missing: the upload sent no message")
    return sha256, bytes(archive)
