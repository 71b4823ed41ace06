"""A worker's cache of unpacked code bundles on disk, keyed by SHA-256, private and bounded in size.

:meth:`BundleCache.checkout` gives the directory of a bundle, fetching it first when it is not
cached (through the ``fetch`` function the cache is built with: the worker's registry), and holds
it in use until the ``async with`` block ends; :meth:`BundleCache.pin` holds one in use for as long
as something outside a block needs it (a warm Python pool importing from it), and
:meth:`BundleCache.verify` checks a cached bundle before a new pool starts on it.

Guaranteed:

* Private: the cache directory is made 0700 (0711 with ``traversable_by_others``: a task running
  as another user can reach a bundle whose path it is given, not list the cache), and one that
  another user owns, that others may read or write, or that is a symbolic link is refused with
  :class:`BundleCacheUnsafe` naming it and what is wrong, never repaired
  (``tests/security/test_bundle_cache.py``; ``schedd_exec.private_directory``). Without a directory
  given, :meth:`BundleCache.for_owner` uses ``$XDG_CACHE_HOME/schedd/bundles/<owner>`` (else
  ``~/.cache/...``), not a predictable path in a shared directory
  (``test_the_default_cache_is_private_and_ignores_a_planted_shared_directory``).
* A bundle is run only as uploaded: the fetched archive's SHA-256 must equal the hash asked for,
  or :class:`BundleMismatch` is raised and nothing is unpacked
  (``tests/unit/test_bundle_cache.py::test_a_fetched_archive_that_does_not_match_is_refused``);
  the archive must pass the checks and :class:`~schedd_core.bundle_archive.ArchiveLimits` of
  ``schedd_exec.bundle_unpack`` (``tests/security/test_archives.py``), and is unpacked read-only.
* Verified before each new pool: the archive is kept beside its tree (``<root>/<sha256>.tar``)
  and :meth:`verify` re-hashes it and compares the tree with it file by file; any difference
  (a changed, added or missing file, other modes, a link) throws both away and fetches the bundle
  again (``test_code_planted_in_the_cache_is_refetched_by_the_next_pool``). Tasks of a pool
  already running are not re-checked.
* One process owns a cache directory: the cache holds an exclusive lock on ``<root>/.lock`` for its
  life, and :class:`BundleCacheBusy` is raised when another process holds it, so no other cache
  evicts what this one uses.
* A directory ``<root>/<sha256>`` is complete: archives are unpacked into a hidden directory and
  renamed into place, so a crash mid-unpack leaves only a hidden leftover, removed at the next
  start. Concurrent checkouts of one bundle fetch it once.
* Bounded: after a bundle is unpacked, and whenever one stops being in use, the least recently
  used bundles not in use are deleted until their files and kept archives total at most
  ``max_bytes``. A bundle in use (checked out or pinned) is never deleted, so the cache can exceed
  ``max_bytes`` while more is in use
  (``tests/unit/test_bundle_cache.py::test_eviction_is_lru_and_spares_bundles_in_use``).
"""

from __future__ import annotations

import asyncio
import fcntl
import logging
import os
import tempfile
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from schedd_core.bundle_archive import DEFAULT_LIMITS, ArchiveLimits, archive_sha256, check_sha256, is_sha256
from schedd_exec.bundle_unpack import remove_tree, tree_problem, unpack
from schedd_exec.private_directory import UnsafeDirectory, private_directory

log = logging.getLogger(__name__)

#: What the cache holds unless told otherwise.
DEFAULT_MAX_BYTES = 1024 * 1024 * 1024

Fetch = Callable[[str], Awaitable[bytes]]
_LOCK_NAME = ".lock"
_ARCHIVE = ".tar"
_PARTIAL = ".partial-"


class BundleMismatch(Exception):
    """A fetched archive does not hash to the bundle it was fetched as."""


class BundleCacheBusy(Exception):
    """Another process owns the cache directory."""


class BundleCacheUnsafe(UnsafeDirectory):
    """The cache directory is not private to the worker's user; the message names it and says why."""


@dataclass
class _Entry:
    size: int
    users: int = 0


class BundleCache:
    def __init__(
        self,
        root: Path,
        fetch: Fetch,
        *,
        max_bytes: int = DEFAULT_MAX_BYTES,
        temporary: bool = False,
        traversable_by_others: bool = False,
        limits: ArchiveLimits = DEFAULT_LIMITS,
    ) -> None:
        """A cache in ``root`` (see the module docstring). ``traversable_by_others`` makes the
        directory 0711 instead of 0700, for tasks run as another user; ``limits`` caps what one
        archive may unpack to."""
        if max_bytes < 0:
            raise ValueError("max_bytes must not be negative")
        self._root = root
        self._temporary = temporary
        self._fetch = fetch
        self._max_bytes = max_bytes
        self._limits = limits
        self._entries: OrderedDict[str, _Entry] = OrderedDict()  # least recently used first
        self._locks: dict[str, asyncio.Lock] = {}
        try:
            private_directory(root, traversable_by_others=traversable_by_others)
        except UnsafeDirectory as exc:
            raise BundleCacheUnsafe(str(exc)) from None
        self._lock_fd = os.open(
            root / _LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600
        )
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._lock_fd)
            raise BundleCacheBusy(f"{root}: another process uses this bundle cache") from None
        self._load()

    def _load(self) -> None:
        """Take up the complete bundles a previous owner left; remove what is left of unfinished
        unpacks and halves of bundles. Names the cache never makes are left alone."""
        for child in sorted(self._root.iterdir()):
            name = child.name
            if name.startswith(_PARTIAL):
                remove_tree(child)
            elif is_sha256(name) and child.is_dir() and not child.is_symlink():
                archive = self._archive(name)
                if archive.is_file() and not archive.is_symlink():
                    self._entries[name] = _Entry(_disk_size(child) + archive.stat().st_size)
                else:
                    remove_tree(child)
        for child in self._root.glob(f"*{_ARCHIVE}"):
            if (
                is_sha256(child.name.removesuffix(_ARCHIVE))
                and child.name.removesuffix(_ARCHIVE) not in self._entries
            ):
                remove_tree(child)

    @property
    def root(self) -> Path:
        return self._root

    @classmethod
    def for_owner(
        cls,
        owner: str,
        fetch: Fetch,
        *,
        directory: str = "",
        max_bytes: int = DEFAULT_MAX_BYTES,
        traversable_by_others: bool = False,
        env: Mapping[str, str] | None = None,
    ) -> BundleCache:
        """The cache of ``owner`` (a worker id): in ``directory`` when given (BundleCacheBusy if another
        process uses it), else in :func:`default_directory`, or, when another process uses that or
        it cannot be made (a read-only file system), in a private temporary directory (``mkdtemp``:
        0700, a random name) removed by :meth:`close`. BundleCacheUnsafe when the directory exists
        but is not private: that is never worked around."""

        def cache(root: Path, temporary: bool = False) -> BundleCache:
            return cls(
                root,
                fetch,
                max_bytes=max_bytes,
                temporary=temporary,
                traversable_by_others=traversable_by_others,
            )

        if directory:
            return cache(Path(directory))
        default = default_directory(owner, os.environ if env is None else env)
        try:
            return cache(default)
        except (BundleCacheBusy, OSError) as exc:  # in use, or cannot be made (a read-only home)
            private = Path(tempfile.mkdtemp(prefix=f"schedd-bundles-{owner}-"))
            log.warning("bundle cache %s: %s; using %s until this process exits", default, exc, private)
            return cache(private, temporary=True)

    def close(self) -> None:
        """Give up the cache directory: its bundles stay for the next owner, unless it was a private
        temporary one, which is removed."""
        if self._lock_fd >= 0:
            os.close(self._lock_fd)
            self._lock_fd = -1
            if self._temporary:
                remove_tree(self._root)

    @property
    def cached(self) -> list[str]:
        """The hashes cached, least recently used first."""
        return list(self._entries)

    @property
    def size(self) -> int:
        """Bytes of the unpacked files and kept archives of every cached bundle."""
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

    async def verify(self, sha256: str) -> None:
        """Check cached bundle ``sha256`` against its kept archive; on any difference, throw the copy
        away and fetch the bundle again. Its directory stays the same; it stays pinned as it was."""
        async with self._locks.setdefault(sha256, asyncio.Lock()):
            problem = await asyncio.to_thread(self._problem, sha256)
            if problem is None:
                return
            log.warning("code bundle %s in %s: %s; fetching it again", sha256, self._root, problem)
            await asyncio.to_thread(self._discard, sha256)
            self._entries[sha256].size = await self._install(sha256)

    async def _ensure(self, sha256: str) -> None:
        async with self._locks.setdefault(sha256, asyncio.Lock()):
            if sha256 in self._entries:
                return
            self._entries[sha256] = _Entry(await self._install(sha256))
            self._evict(keep=sha256)

    async def _install(self, sha256: str) -> int:
        """Fetch, check and unpack bundle ``sha256``, keeping its archive; returns the bytes used."""
        archive = await self._fetch(sha256)
        actual = archive_sha256(archive)
        if actual != sha256:
            raise BundleMismatch(f"the archive fetched as bundle {sha256} has SHA-256 {actual}")
        partial = self._root / f"{_PARTIAL}{sha256}-{uuid.uuid4().hex}"
        try:
            size = await asyncio.to_thread(unpack, archive, partial, self._limits)
            await asyncio.to_thread(_write_read_only, partial.with_name(partial.name + _ARCHIVE), archive)
            os.rename(partial.with_name(partial.name + _ARCHIVE), self._archive(sha256))
            os.rename(partial, self._root / sha256)
        except BaseException:
            remove_tree(partial)
            remove_tree(partial.with_name(partial.name + _ARCHIVE))
            raise
        log.info("code bundle %s cached (%d bytes)", sha256, size)
        return size + len(archive)

    def _problem(self, sha256: str) -> str | None:
        """What is wrong with the cached copy of ``sha256`` (None: it is the uploaded bundle)."""
        try:
            fd = os.open(self._archive(sha256), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
            with os.fdopen(fd, "rb") as f:
                archive = f.read()
            if archive_sha256(archive) != sha256:
                return "its kept archive was changed"
            return tree_problem(self._root / sha256, archive)
        except OSError as exc:
            return f"cannot be read ({exc})"

    def _discard(self, sha256: str) -> None:
        remove_tree(self._root / sha256)
        remove_tree(self._archive(sha256))

    def _archive(self, sha256: str) -> Path:
        return self._root / f"{sha256}{_ARCHIVE}"

    def _evict(self, keep: str = "") -> None:
        total = self.size
        for sha256, entry in list(self._entries.items()):
            if total <= self._max_bytes:
                return
            if entry.users > 0 or sha256 == keep:
                continue
            del self._entries[sha256]
            self._discard(sha256)
            total -= entry.size
            log.info("code bundle %s evicted from the cache", sha256)


def default_directory(owner: str, env: Mapping[str, str]) -> Path:
    """``$XDG_CACHE_HOME/schedd/bundles/<owner>``, or ``~/.cache/schedd/bundles/<owner>`` when the
    variable is unset or not an absolute path."""
    if not owner or "/" in owner or owner in (".", ".."):
        raise ValueError(f"{owner!r} cannot name a bundle cache directory")
    base = env.get("XDG_CACHE_HOME", "")
    root = Path(base) if base and Path(base).is_absolute() else Path.home() / ".cache"
    return root / "schedd" / "bundles" / owner


def _write_read_only(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o400)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.chmod(path, 0o444)


def _disk_size(directory: Path) -> int:
    return sum(p.lstat().st_size for p in directory.rglob("*") if p.is_file() and not p.is_symlink())
