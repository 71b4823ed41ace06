"""``BundleService``: storing code bundles (content-addressed archives of Python modules).

An upload is checked whole before anything is stored (``schedd_store.bundles.put_bundle``): a
malformed hash, a hash that does not match, an archive that is not a bundle archive or is larger
than ``schedd_core.bundle_archive.MAX_ARCHIVE_BYTES`` is INVALID_ARGUMENT naming the field.
Uploading a bundle that is stored already answers OK with ``created`` false.
"""

from __future__ import annotations

import grpc
from sqlalchemy.ext.asyncio import AsyncEngine

from schedd.v1 import api_pb2
from schedd_core.bundle_archive import MAX_ARCHIVE_BYTES
from schedd_store import bundles

#: Largest request the api accepts: a bundle at its limit and the rest of its request.
MAX_REQUEST_BYTES = MAX_ARCHIVE_BYTES + 64 * 1024


class BundleServicer:
    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    async def UploadBundle(
        self, request: api_pb2.UploadBundleRequest, context: grpc.aio.ServicerContext
    ) -> api_pb2.UploadBundleResponse:
        created = await bundles.put_bundle(self._engine, request.sha256, request.archive)
        return api_pb2.UploadBundleResponse(
            sha256=request.sha256, size_bytes=len(request.archive), created=created
        )
