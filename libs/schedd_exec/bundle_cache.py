"""A worker's cache of unpacked code bundles on disk, keyed by SHA-256 and bounded in size.

:meth:`BundleCache.checkout` gives the directory of a bundle, fetching it first when it is not
cached (through the ``fetch`` function the cache is built with: the worker's registry), and holds
it in use until the ``async with`` block ends; :meth:`BundleCache.pin` holds one in use for as long
as something outside a block needs it (a warm Python pool importing from it).

Guaranteed:

* A bundle is run only as uploaded: the fetched archive's SHA-256 must equal the hash asked for,
  or :class:`BundleMismatch` is raised and nothing is unpacked
  (``tests/unit/test_bundle_cache.py::test_a_fetched_archive_that_does_not_match_is_refused``).
* One process owns a cache directory: the cache holds an exclusive lock on ``<root>/.lock`` for its
  life, and :class:`BundleCacheBusy` is raised when another process holds it, so no other cache
  evicts what this one uses.
* A directory ``<root>/<sha256>`` is complete: archives are unpacked into a hidden directory and
  renamed into place, so a crash mid-unpack leaves only a hidden leftover, removed at the next
  start. Concurrent checkouts of one bundle fetch it once.
* Bounded: after a bundle is unpacked, and whenever one stops being in use, the least recently
  used bundles not in use are deleted until the unpacked files total at most ``max_bytes``. A
  bundle in use (checked out or pinned) is never deleted, so the cache can exceed ``max_bytes``
  while more is in use (``tests/unit/test_bundle_cache.py::test_eviction_is_lru_and_spares_bundles_in_use``).

Not counted in ``max_bytes``: files written later into a bundle's directory (``__pycache__`` of
its imported modules, anything its tasks write there).
"""

from __future__ import annotations

import asyncio
import fcntl
import logging
import os
import shutil
import tempfile
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from schedd_core.bundle_archive import archive_sha256, check_sha256, is_sha256, unpack

log = logging.getLogger(__name__)

#: What the cache holds unless told otherwise.
DEFAULT_MAX_BYTES = 1024 * 1024 * 1024

Fetch = Callable[[str], Awaitable[bytes]]
_LOCK_NAME = ".lock"


class BundleMismatch(Exception):
    """A fetched archive does not hash to the bundle it was fetched as."""


class BundleCacheBusy(Exception):
    """Another process owns the cache directory."""


@dataclass
class _Entry:
    size: int
    users: int = 0


class BundleCache:
    def __init__(
        self, root: Path, fetch: Fetch, *, max_bytes: int = DEFAULT_MAX_BYTES, temporary: bool = False
    ) -> None:
        if max_bytes < 0:
            raise ValueError("max_bytes must not be negative")
        self._root = root
        self._temporary = temporary
        self._fetch = fetch
        self._max_bytes = max_bytes
        self._entries: OrderedDict[str, _Entry] = OrderedDict()  # least recently used first
        self._locks: dict[str, asyncio.Lock] = {}
        root.mkdir(parents=True, exist_ok=True)
        self._lock_fd = os.open(root / _LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._lock_fd)
            raise BundleCacheBusy(f"{root}: another process uses this bundle cache") from None
        for child in sorted(root.iterdir()):
            if child.name == _LOCK_NAME:
                continue
            if child.name.startswith("."):
                shutil.rmtree(child, ignore_errors=True)  # an unpack that did not finish
            elif child.is_dir() and is_sha256(child.name):
                self._entries[child.name] = _Entry(_disk_size(child))

    @property
    def root(self) -> Path:
        return self._root

    @classmethod
    def for_owner(
        cls, owner: str, fetch: Fetch, *, directory: str = "", max_bytes: int = DEFAULT_MAX_BYTES
    ) -> BundleCache:
        """The cache of ``owner`` (a worker id): in ``directory`` when given (BundleCacheBusy if another
        process uses it), else in ``<tmp>/schedd-bundles-<owner>``, or, when another process uses
        that, in a private temporary directory removed by :meth:`close`."""
        if directory:
            return cls(Path(directory), fetch, max_bytes=max_bytes)
        try:
            return cls(Path(tempfile.gettempdir()) / f"schedd-bundles-{owner}", fetch, max_bytes=max_bytes)
        except BundleCacheBusy as exc:
            private = Path(tempfile.mkdtemp(prefix=f"schedd-bundles-{owner}-"))
            log.warning("%s; using %s until this process exits", exc, private)
            return cls(private, fetch, max_bytes=max_bytes, temporary=True)

    def close(self) -> None:
        """Give up the cache directory: its bundles stay for the next owner, unless it was a private
        temporary one, which is removed."""
        if self._lock_fd >= 0:
            os.close(self._lock_fd)
            self._lock_fd = -1
            if self._temporary:
                shutil.rmtree(self._root, ignore_errors=True)

    @property
    def cached(self) -> list[str]:
        """The hashes cached, least recently used first."""
        return list(self._entries)

    @property
    def size(self) -> int:
        """Bytes of the unpacked files of every cached bundle."""
        return sum(e.size for e in self._entries.values())

    @asynccontextmanager
    async def checkout(self, sha256: str) -> AsyncIterator[Path]:
        """The directory of bundle ``sha256`` (fetched and unpacked if needed), in use in the block."""
        check_sha256(sha256, "code_bundle")
        await self._ensure(sha256)
        self.pin(sha256)
        try:
            yield self._root / sha256
        finally:
            self.unpin(sha256)

    def pin(self, sha256: str) -> None:
        """Hold a cached bundle in use (never evicted) until :meth:`unpin`."""
        entry = self._entries[sha256]
        entry.users += 1
        self._entries.move_to_end(sha256)

    def unpin(self, sha256: str) -> None:
        entry = self._entries[sha256]
        entry.users -= 1
        self._entries.move_to_end(sha256)
        self._evict()

    async def _ensure(self, sha256: str) -> None:
        lock = self._locks.setdefault(sha256, asyncio.Lock())
        async with lock:
            if sha256 in self._entries:
                return
            archive = await self._fetch(sha256)
            actual = archive_sha256(archive)
            if actual != sha256:
                raise BundleMismatch(f"the archive fetched as bundle {sha256} has SHA-256 {actual}")
            partial = self._root / f".partial-{sha256}-{uuid.uuid4().hex}"
            try:
                size = await asyncio.to_thread(unpack, archive, partial)
                os.rename(partial, self._root / sha256)
            except BaseException:
                shutil.rmtree(partial, ignore_errors=True)
                raise
            self._entries[sha256] = _Entry(size)
            log.info("code bundle %s cached (%d bytes)", sha256, size)
            self._evict(keep=sha256)

    def _evict(self, keep: str = "") -> None:
        total = self.size
        for sha256, entry in list(self._entries.items()):
            if total <= self._max_bytes:
                return
            if entry.users > 0 or sha256 == keep:
                continue
            del self._entries[sha256]
            shutil.rmtree(self._root / sha256, ignore_errors=True)
            total -= entry.size
            log.info("code bundle %s evicted from the cache", sha256)


def _disk_size(directory: Path) -> int:
    return sum(p.stat().st_size for p in directory.rglob("*") if p.is_file() and not p.is_symlink())
