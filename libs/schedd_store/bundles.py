"""Code bundles in the store: archives kept by their SHA-256, written once and never changed.

:func:`put_bundle` checks the archive (``schedd_core.bundle_archive.check_archive``) and that it
hashes to the name it is stored under, so every stored bundle is one a worker can unpack;
storing one that exists already changes nothing. Reads are by hash, in pieces, so no caller
holds a whole archive in one database row read beyond ``piece_bytes``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from schedd_core.bundle_archive import (
    DEFAULT_LIMITS,
    ArchiveLimits,
    archive_sha256,
    check_archive,
    check_sha256,
)
from schedd_core.errors import InvalidArgument, NotFound
from schedd_store import statements as sql
from schedd_store.database import Engine

#: Bytes of an archive read (and sent) at a time.
PIECE_BYTES = 1024 * 1024


async def put_bundle(
    engine: Engine, sha256: str, archive: bytes, limits: ArchiveLimits = DEFAULT_LIMITS
) -> bool:
    """Store ``archive`` as bundle ``sha256``; returns whether it was new. InvalidArgument (field
    ``sha256`` or ``archive``) when the hash is malformed, does not match, or the archive is not a
    bundle archive within ``limits``; nothing is stored then."""
    check_sha256(sha256, "sha256")
    check_archive(archive, "archive", limits)
    actual = archive_sha256(archive)
    if actual != sha256:
        raise InvalidArgument("sha256", f"is {sha256}, but the archive's SHA-256 is {actual}")
    async with engine.begin() as conn:
        row = (
            await conn.execute(
                sql.INSERT_BUNDLE, {"sha256": sha256, "archive": archive, "size_bytes": len(archive)}
            )
        ).first()
    return row is not None


async def bundle_size(engine: Engine, sha256: str, field: str = "sha256") -> int:
    """The archive size of bundle ``sha256``; NotFound if it was never stored."""
    check_sha256(sha256, field)
    async with engine.connect() as conn:
        size = (await conn.execute(sql.BUNDLE_SIZE, {"sha256": sha256})).scalar()
    if size is None:
        raise NotFound(f"bundle {sha256} not found; it was never uploaded")
    return int(size)


async def read_bundle(
    engine: Engine, sha256: str, piece_bytes: int = PIECE_BYTES
) -> tuple[int, AsyncIterator[bytes]]:
    """The size of bundle ``sha256`` and its archive in pieces of at most ``piece_bytes``;
    NotFound (before any piece) if it was never stored."""
    size = await bundle_size(engine, sha256)

    async def pieces() -> AsyncIterator[bytes]:
        for offset in range(0, size, piece_bytes):
            async with engine.connect() as conn:
                data = (
                    await conn.execute(
                        sql.READ_BUNDLE_PIECE, {"sha256": sha256, "offset": offset, "length": piece_bytes}
                    )
                ).scalar()
            if data is None:
                raise NotFound(f"bundle {sha256} not found; it was never uploaded")
            yield bytes(data)

    return size, pieces()
