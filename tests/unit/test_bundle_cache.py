"""The worker's bundle cache: verified fetches, one fetch per bundle, LRU eviction sparing bundles in
use; and the per-bundle pools: one version per process."""

from __future__ import annotations

import asyncio
import json
import stat
import tempfile
from pathlib import Path

import pytest

from schedd_exec.bundle_cache import BundleCache, BundleCacheBusy, BundleMismatch
from schedd_exec.bundle_pack import PackedBundle, pack
from schedd_exec.bundle_pools import BundlePools
from schedd_exec.python_pool import PythonPool


def _bundle(root: Path, version: int, padding: int = 0) -> PackedBundle:
    root.mkdir(parents=True, exist_ok=True)
    (root / "versioned.py").write_text(
        "import os\n"
        f"VERSION = {version}\n"
        "def report():\n"
        "    return {'version': VERSION, 'pid': os.getpid()}\n"
    )
    (root / "padding.txt").write_text("x" * padding)
    return pack(root)


class _Store:
    """What a registry would answer, counting the fetches."""

    def __init__(self, *bundles: PackedBundle) -> None:
        self.archives = {b.sha256: b.archive for b in bundles}
        self.fetches: list[str] = []

    async def fetch(self, sha256: str) -> bytes:
        self.fetches.append(sha256)
        await asyncio.sleep(0)
        return self.archives[sha256]


async def test_a_bundle_is_fetched_once_and_unpacked_under_its_hash(tmp_path: Path) -> None:
    b1 = _bundle(tmp_path / "src", 1)
    store = _Store(b1)
    cache = BundleCache(tmp_path / "cache", store.fetch)

    async def use() -> str:
        async with cache.checkout(b1.sha256) as directory:
            return (directory / "versioned.py").read_text()

    texts = await asyncio.gather(use(), use(), use())
    assert all("VERSION = 1" in t for t in texts)
    assert store.fetches == [b1.sha256]
    assert (tmp_path / "cache" / b1.sha256 / "versioned.py").is_file()
    # A new cache on the same directory (a restarted worker) keeps what was unpacked.
    cache.close()
    again = BundleCache(tmp_path / "cache", store.fetch)
    assert again.cached == [b1.sha256]


async def test_a_fetched_archive_that_does_not_match_is_refused(tmp_path: Path) -> None:
    b1 = _bundle(tmp_path / "one", 1)
    b2 = _bundle(tmp_path / "two", 2)
    store = _Store(b1)
    store.archives[b1.sha256] = b2.archive  # a registry (or the wire) hands over other bytes
    cache = BundleCache(tmp_path / "cache", store.fetch)
    with pytest.raises(BundleMismatch, match=b2.sha256):
        async with cache.checkout(b1.sha256):
            pass
    assert cache.cached == []
    assert [p.name for p in (tmp_path / "cache").iterdir()] == [".lock"]


async def test_eviction_is_lru_and_spares_bundles_in_use(tmp_path: Path) -> None:
    bundles = [_bundle(tmp_path / f"src{i}", i, padding=40_000) for i in range(4)]
    store = _Store(*bundles)
    # Each bundle takes its files and its kept archive.
    one_size = 40_000 + len((tmp_path / "src0" / "versioned.py").read_bytes()) + len(bundles[0].archive)
    cache = BundleCache(tmp_path / "cache", store.fetch, max_bytes=2 * one_size)
    b0, b1, b2, b3 = (b.sha256 for b in bundles)
    async with cache.checkout(b0):
        pass
    async with cache.checkout(b1):
        pass
    async with cache.checkout(b0):  # b0 is now the most recently used
        pass
    async with cache.checkout(b2):
        pass
    assert cache.cached == [b0, b2]  # b1, least recently used, went
    assert not (tmp_path / "cache" / b1).exists()
    cache.pin(b0)  # a pool imports from it
    async with cache.checkout(b2), cache.checkout(b3):
        assert set(cache.cached) == {b0, b2, b3}  # all in use: over the bound rather than evicted
    # b3 (the inner block) stopped being in use first, while b0 and b2 still were: it had to go.
    assert cache.cached == [b0, b2]
    assert not (tmp_path / "cache" / b3).exists()
    cache.unpin(b0)
    assert cache.size <= 2 * one_size


async def test_a_bundle_runs_in_processes_of_its_own_version_only(tmp_path: Path) -> None:
    b1 = _bundle(tmp_path / "src", 1)
    b2 = _bundle(tmp_path / "src", 2)
    store = _Store(b1, b2)
    cache = BundleCache(tmp_path / "cache", store.fetch)
    pools = BundlePools(cache, lambda path: PythonPool(1, kill_grace=0.5, import_path=path), max_pools=1)
    try:
        first = await pools.run(b1.sha256, "versioned:report", env={}, timeout=30)
        second = await pools.run(b2.sha256, "versioned:report", env={}, timeout=30)
        third = await pools.run(b1.sha256, "versioned:report", env={}, timeout=30)
    finally:
        await pools.close()
    seen = [json.loads(o.result_json) for o in (first, second, third)]
    assert [s["version"] for s in seen] == [1, 2, 1]
    # max_pools=1: each switch retired the other version's process and started a new one.
    assert len({s["pid"] for s in seen}) == 3
    assert sorted(cache.cached) == sorted([b1.sha256, b2.sha256])


async def test_an_import_error_is_not_retryable(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "broken.py").write_text("import no_such_module_anywhere\n")
    packed = pack(tmp_path / "src")
    cache = BundleCache(tmp_path / "cache", _Store(packed).fetch)
    pools = BundlePools(cache, lambda path: PythonPool(1, kill_grace=0.5, import_path=path))
    try:
        broken = await pools.run(packed.sha256, "broken:main", env={}, timeout=30)
        missing = await pools.run(packed.sha256, "padding:main", env={}, timeout=30)
    finally:
        await pools.close()
    assert not broken.succeeded and not broken.retryable
    assert "ModuleNotFoundError: No module named 'no_such_module_anywhere'" in broken.error
    assert 'broken.py", line 1' in broken.error  # the traceback
    assert not missing.succeeded and not missing.retryable


async def test_one_process_owns_a_cache_directory(tmp_path: Path) -> None:
    store = _Store()
    owner = BundleCache(tmp_path / "cache", store.fetch)
    with pytest.raises(BundleCacheBusy, match="another process uses this bundle cache"):
        BundleCache(tmp_path / "cache", store.fetch)
    owner.close()
    BundleCache(tmp_path / "cache", store.fetch).close()  # free again


def test_an_owner_whose_default_directory_is_taken_gets_a_private_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    store = _Store()
    first = BundleCache.for_owner("w1", store.fetch, env=env)
    second = BundleCache.for_owner("w1", store.fetch, env=env)
    assert first.root == tmp_path / "cache" / "schedd" / "bundles" / "w1"
    assert second.root.parent == tmp_path / "tmp"
    second.close()
    assert not second.root.exists()  # a private directory goes with its owner
    first.close()
    assert first.root.exists()  # the cache stays for the next owner


def test_a_default_directory_that_cannot_be_made_gives_a_private_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker whose home is read-only (a container's read-only root file system)."""
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "home").write_text("a file, so nothing can be made under it")
    cache = BundleCache.for_owner("w1", _Store().fetch, env={"XDG_CACHE_HOME": str(tmp_path / "home")})
    assert cache.root.parent == tmp_path / "tmp" and cache.root.name.startswith("schedd-bundles-w1-")
    assert stat.S_IMODE(cache.root.stat().st_mode) == 0o700
    cache.close()
    assert not cache.root.exists()
