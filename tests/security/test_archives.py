"""Archives that could bomb or escape: every member that is not a plain regular file or directory,
and archives past the member count or unpacked size caps, are refused by name at upload (the api
answers INVALID_ARGUMENT and stores nothing) and at unpack on a worker (nothing is unpacked)."""

from __future__ import annotations

import asyncio
import hashlib
import io
import secrets
import tarfile
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import pytest

from schedd.v1 import api_pb2
from schedd_core.bundle_archive import ArchiveLimits
from schedd_core.errors import InvalidArgument
from schedd_devstack.postgres import create_database, drop_database, with_database
from schedd_devstack.services import Cluster
from schedd_exec.bundle_cache import BundleCache

pytestmark = pytest.mark.e2e

RPC_TIMEOUT = 30.0
#: The caps the module's api is started with (lower than the defaults, so tests stay small).
MAX_FILES = 50
MAX_UNPACKED = 1024 * 1024
LIMITS = ArchiveLimits(max_files=MAX_FILES, max_unpacked_bytes=MAX_UNPACKED)
UPLOAD = "/schedd.v1.BundleService/UploadBundle"


def _header(name: str, size: int, typeflag: bytes, extra: dict[int, bytes]) -> bytes:
    """A 512-byte tar header in the GNU layout, its checksum computed."""
    block = bytearray(512)

    def put(offset: int, value: bytes) -> None:
        block[offset : offset + len(value)] = value

    put(0, name.encode())
    put(100, b"0000644\0")
    put(108, b"0000000\0")
    put(116, b"0000000\0")
    put(124, f"{size:011o}\0".encode())
    put(136, b"00000000000\0")
    put(156, typeflag)
    put(257, b"ustar  \0")
    for offset, value in extra.items():
        put(offset, value)
    put(148, b" " * 8)
    put(148, f"{sum(block):06o}\0 ".encode())
    return bytes(block)


def gnu_sparse(name: str, apparent: int) -> bytes:
    """An archive of one GNU sparse member: 512 bytes of data that unpack to ``apparent`` bytes
    (below 8 GiB, the most its octal header field holds)."""
    sparse_map = f"{apparent - 512:011o}\0".encode() + f"{512:011o}\0".encode()
    header = _header(name, 512, tarfile.GNUTYPE_SPARSE, {386: sparse_map, 483: f"{apparent:011o}\0".encode()})
    return header + b"x" * 512 + b"\0" * 1024


def pax_sparse(name: str, apparent: int) -> bytes:
    """The same bomb in the PAX form (GNU sparse 1.0): its map heads the member's data."""
    sparse_map = f"1\n{apparent - 512}\n512\n".encode().ljust(512, b"\0")
    info = tarfile.TarInfo(f"GNUSparseFile.0/{name}")
    info.pax_headers = {
        "GNU.sparse.major": "1",
        "GNU.sparse.minor": "0",
        "GNU.sparse.name": name,
        "GNU.sparse.realsize": str(apparent),
    }
    return _tar((info, sparse_map + b"z" * 512))


def _tar(*members: tuple[tarfile.TarInfo, bytes | None]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for info, data in members:
            info.size = len(data) if data is not None else 0
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return buffer.getvalue()


def _member(name: str, kind: bytes = tarfile.REGTYPE, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = link
    return info


def _regular(name: str, data: bytes) -> tuple[tarfile.TarInfo, bytes]:
    return _member(name), data


def truncated(name: str) -> bytes:
    """One member that claims a gigabyte of data the archive does not hold."""
    return _header(name, 1024**3, tarfile.REGTYPE, {}) + b"y" * 512 + b"\0" * 1024


ATTACKS: dict[str, tuple[Callable[[], bytes], str]] = {
    "sparse": (lambda: gnu_sparse("bomb.bin", 4 * 1024**3), "entry 'bomb.bin' is a sparse file"),
    "pax_sparse": (lambda: pax_sparse("bomb.bin", 64 * 1024**3), "entry 'bomb.bin' is a sparse file"),
    "symlink": (
        lambda: _tar(
            _regular("mod.py", b"X = 1\n"), (_member("evil.py", tarfile.SYMTYPE, "/etc/passwd"), None)
        ),
        "entry 'evil.py' is a symbolic link",
    ),
    "hardlink": (
        lambda: _tar(_regular("mod.py", b"X = 1\n"), (_member("copy.py", tarfile.LNKTYPE, "mod.py"), None)),
        "entry 'copy.py' is a hard link",
    ),
    "device": (
        lambda: _tar((_member("null", tarfile.CHRTYPE), None)),
        "entry 'null' is a device",
    ),
    "fifo": (lambda: _tar((_member("pipe", tarfile.FIFOTYPE), None)), "entry 'pipe' is a FIFO"),
    "too_many_members": (
        lambda: _tar(*(_regular(f"m{i:03}.py", b"") for i in range(MAX_FILES + 1))),
        f"entry 'm{MAX_FILES:03}.py' is member {MAX_FILES + 1}; a bundle may hold at most {MAX_FILES}",
    ),
    "too_large_total": (
        lambda: _tar(_regular("a.bin", b"a" * (MAX_UNPACKED // 2)), _regular("b.bin", b"b" * MAX_UNPACKED)),
        f"entry 'b.bin' takes the unpacked bundle past {MAX_UNPACKED} bytes",
    ),
    "truncated": (lambda: truncated("huge.bin"), "entry 'huge.bin' claims more data than the archive holds"),
}


@pytest.fixture(scope="module")
def capped(
    database_url: str, etcd_endpoints: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    name = f"t_{secrets.token_hex(8)}"
    create_database(database_url, name)
    limits = {
        "SCHEDD_BUNDLE_MAX_FILES": str(MAX_FILES),
        "SCHEDD_BUNDLE_MAX_UNPACKED_BYTES": str(MAX_UNPACKED),
    }
    try:
        with Cluster(
            with_database(database_url, name),
            etcd_endpoints,
            tmp_path_factory.mktemp("archives"),
            workers=0,
            auth=True,
            service_env=limits,
        ) as cluster:
            yield cluster
    finally:
        drop_database(database_url, name)


def upload(cluster: Cluster, archive: bytes) -> grpc.RpcError | None:
    """Upload ``archive`` under its own hash as the admin, in pieces of 1 MiB; the error, if any."""
    sha256 = hashlib.sha256(archive).hexdigest()
    pieces = [archive[i : i + 1024 * 1024] for i in range(0, len(archive), 1024 * 1024)]
    requests = [api_pb2.UploadBundleRequest(sha256=sha256, archive=piece) for piece in pieces]
    with grpc.insecure_channel(cluster.api_address) as channel:
        call = channel.stream_unary(
            UPLOAD,
            request_serializer=api_pb2.UploadBundleRequest.SerializeToString,
            response_deserializer=api_pb2.UploadBundleResponse.FromString,
        )
        try:
            call(
                iter(requests),
                metadata=(("authorization", f"Bearer {cluster.admin_token}"),),
                timeout=RPC_TIMEOUT,
            )
        except grpc.RpcError as exc:
            return exc
    return None


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_a_hostile_archive_is_refused_at_upload_and_nothing_is_stored(capped: Cluster, attack: str) -> None:
    build, problem = ATTACKS[attack]
    before = capped.fetchval("SELECT count(*) FROM code_bundles")
    refused = upload(capped, build())
    assert refused is not None, f"the api stored the {attack} archive"
    assert refused.code() == grpc.StatusCode.INVALID_ARGUMENT, refused
    assert f"archive: {problem}" in (refused.details() or ""), refused.details()
    assert capped.fetchval("SELECT count(*) FROM code_bundles") == before


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_a_hostile_archive_is_refused_at_unpack_and_nothing_is_unpacked(tmp_path: Path, attack: str) -> None:
    """A registry (or the store behind it) that hands a worker a hostile archive under its true hash."""
    build, problem = ATTACKS[attack]
    archive = build()
    sha256 = hashlib.sha256(archive).hexdigest()

    async def fetch(_: str) -> bytes:
        return archive

    root = tmp_path / "cache"
    root.mkdir(mode=0o700)
    cache = BundleCache(root, fetch, max_bytes=10 * 1024**3, limits=LIMITS)

    async def checkout() -> None:
        async with cache.checkout(sha256):
            pass

    try:
        with pytest.raises(InvalidArgument, match=problem):
            asyncio.run(checkout())
        assert cache.cached == []
        assert sorted(p.name for p in root.iterdir()) == [".lock"]
    finally:
        cache.close()
