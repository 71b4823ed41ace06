"""A host neighbour against the worker's bundle cache: a cache directory another user owns, or one
others may read or write, is refused at start-up (and never silently fixed); the default directory
is private and not at a predictable shared path; unpacked bundles are read-only; and code planted in
the cache is found when the next pool starts, thrown away and fetched again, so the real code runs."""

from __future__ import annotations

import asyncio
import json
import os
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from schedd_exec.bundle_cache import BundleCache, BundleCacheUnsafe
from schedd_exec.bundle_pack import PackedBundle, pack
from schedd_exec.bundle_pools import BundlePools
from schedd_exec.python_pool import PythonPool

pytestmark = pytest.mark.e2e

NOBODY = 65534
WORKER_EXIT_TIMEOUT = 60.0


def _bundle(source: Path, version: int) -> PackedBundle:
    source.mkdir(parents=True, exist_ok=True)
    (source / "versioned.py").write_text(
        f"VERSION = {version}\n\ndef report():\n    return {{'version': VERSION}}\n"
    )
    return pack(source)


class _Registry:
    """What a registry answers: the uploaded archives, counting fetches."""

    def __init__(self, *bundles: PackedBundle) -> None:
        self.archives = {b.sha256: b.archive for b in bundles}
        self.fetches: list[str] = []

    async def fetch(self, sha256: str) -> bytes:
        self.fetches.append(sha256)
        return self.archives[sha256]


def _pools(cache: BundleCache) -> BundlePools:
    return BundlePools(cache, lambda path: PythonPool(1, kill_grace=0.5, import_path=path))


async def _version(pools: BundlePools, sha256: str) -> int:
    try:
        outcome = await pools.run(sha256, "versioned:report", env={}, timeout=30)
    finally:
        await pools.close()
    assert outcome.succeeded, outcome.error
    return int(json.loads(outcome.result_json)["version"])


def _private(path: Path) -> Path:
    path.mkdir(mode=0o700, parents=True)
    return path


def test_a_cache_directory_another_user_owns_is_refused(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("making a directory another user owns needs root")
    foreign = _private(tmp_path / "foreign")
    os.chown(foreign, NOBODY, NOBODY)
    with pytest.raises(
        BundleCacheUnsafe, match=rf"{foreign}: is owned by uid {NOBODY}, not by this worker's user"
    ):
        BundleCache(foreign, _Registry().fetch)
    assert foreign.stat().st_uid == NOBODY and stat.S_IMODE(foreign.stat().st_mode) == 0o700
    assert list(foreign.iterdir()) == []


@pytest.mark.parametrize(
    ("mode", "problem"),
    [(0o777, "writable by others"), (0o770, "writable by its group"), (0o755, "readable by others")],
)
def test_a_cache_directory_others_may_read_or_write_is_refused(
    tmp_path: Path, mode: int, problem: str
) -> None:
    shared = _private(tmp_path / "shared")
    shared.chmod(mode)
    with pytest.raises(BundleCacheUnsafe, match=rf"{shared}: is {problem} \(mode 0{mode:o}\)"):
        BundleCache(shared, _Registry().fetch)
    assert stat.S_IMODE(shared.stat().st_mode) == mode  # refused, not silently fixed
    assert list(shared.iterdir()) == []


def test_a_symbolic_link_as_the_cache_directory_is_refused(tmp_path: Path) -> None:
    target = _private(tmp_path / "elsewhere")
    link = tmp_path / "cache"
    link.symlink_to(target)
    with pytest.raises(BundleCacheUnsafe, match=rf"{link}: is a symbolic link"):
        BundleCache(link, _Registry().fetch)


def test_a_worker_with_an_unsafe_cache_directory_stops_at_start_up_naming_it(tmp_path: Path) -> None:
    shared = _private(tmp_path / "shared")
    shared.chmod(0o777)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCHEDD_")}
    env.update({"SCHEDD_BUNDLE_CACHE_DIR": str(shared), "SCHEDD_REGISTRY": "127.0.0.1:9"})
    try:
        done = subprocess.run(
            [sys.executable, "-m", "schedd_worker.main"],
            env=env,
            capture_output=True,
            text=True,
            timeout=WORKER_EXIT_TIMEOUT,
            check=False,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"the worker kept running with the world-writable cache directory {shared}")
    assert done.returncode == 2, done.stderr
    assert f"{shared}: is writable by others (mode 0777)" in done.stderr, done.stderr


def test_the_default_cache_is_private_and_ignores_a_planted_shared_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another user creates the old predictable directory in the shared temporary directory and
    plants a bundle's hash there with code of their own; the worker never reads it."""
    shared_tmp = tmp_path / "tmp"
    shared_tmp.mkdir()
    shared_tmp.chmod(0o1777)
    monkeypatch.setattr(tempfile, "tempdir", str(shared_tmp))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "home" / ".cache"))
    real = _bundle(tmp_path / "src", 1)
    planted = shared_tmp / "schedd-bundles-w1" / real.sha256
    planted.mkdir(parents=True)
    (planted / "versioned.py").write_text("def report():\n    return {'version': 666}\n")
    (shared_tmp / "schedd-bundles-w1").chmod(0o777)

    registry = _Registry(real)
    cache = BundleCache.for_owner("w1", registry.fetch)
    try:
        assert asyncio.run(_version(_pools(cache), real.sha256)) == 1
        assert cache.root == tmp_path / "home" / ".cache" / "schedd" / "bundles" / "w1"
        assert stat.S_IMODE(cache.root.stat().st_mode) == 0o700
    finally:
        cache.close()


async def test_code_planted_in_the_cache_is_refetched_by_the_next_pool(tmp_path: Path) -> None:
    real = _bundle(tmp_path / "src", 1)
    registry = _Registry(real)
    cache = BundleCache(_private(tmp_path / "cache"), registry.fetch)
    try:
        assert await _version(_pools(cache), real.sha256) == 1
        unpacked = next(cache.root.rglob("versioned.py"))
        unpacked.parent.chmod(0o700)
        unpacked.chmod(0o600)
        unpacked.write_text("VERSION = 666\n\ndef report():\n    return {'version': VERSION}\n")
        assert await _version(_pools(cache), real.sha256) == 1
        assert registry.fetches == [real.sha256, real.sha256]
        assert "666" not in next(cache.root.rglob("versioned.py")).read_text()
    finally:
        cache.close()


async def test_a_module_added_to_a_cached_bundle_is_refetched_by_the_next_pool(tmp_path: Path) -> None:
    """A planted module that shadows one the task imports from the worker's environment."""
    real = _bundle(tmp_path / "src", 1)
    registry = _Registry(real)
    cache = BundleCache(_private(tmp_path / "cache"), registry.fetch)
    try:
        assert await _version(_pools(cache), real.sha256) == 1
        directory = next(cache.root.rglob("versioned.py")).parent
        directory.chmod(0o700)
        (directory / "json.py").write_text("raise SystemExit('planted')\n")
        assert await _version(_pools(cache), real.sha256) == 1
        assert len(registry.fetches) == 2
        assert not list(cache.root.rglob("json.py"))
    finally:
        cache.close()


async def test_unpacked_bundles_are_read_only(tmp_path: Path) -> None:
    source = tmp_path / "src"
    (source / "pkg").mkdir(parents=True)
    (source / "pkg" / "__init__.py").write_text("")
    real = _bundle(source, 1)
    cache = BundleCache(_private(tmp_path / "cache"), _Registry(real).fetch)
    try:
        async with cache.checkout(real.sha256) as directory:
            modes = {
                p.relative_to(directory).as_posix(): stat.S_IMODE(p.lstat().st_mode)
                for p in directory.rglob("*")
            }
            assert stat.S_IMODE(directory.stat().st_mode) == 0o555
        assert modes == {"versioned.py": 0o444, "pkg": 0o555, "pkg/__init__.py": 0o444}
        assert stat.S_IMODE(cache.root.stat().st_mode) == 0o700
    finally:
        cache.close()


def test_a_cache_a_task_user_may_traverse_is_0711(tmp_path: Path) -> None:
    root = tmp_path / "cache"
    cache = BundleCache(root, _Registry().fetch, traversable_by_others=True)
    try:
        assert stat.S_IMODE(root.stat().st_mode) == 0o711
    finally:
        cache.close()
    private = BundleCache(root, _Registry().fetch)  # traversal bits alone are not read or write
    try:
        assert stat.S_IMODE(root.stat().st_mode) == 0o700
    finally:
        private.close()
