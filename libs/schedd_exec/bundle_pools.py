"""Warm Python pools per code bundle: a task runs in a process that imports from its bundle only.

A Python task whose run pins a code bundle (``Assignment.code_bundle``) runs in a
:class:`~schedd_exec.python_pool.PythonPool` started for that bundle's unpacked directory
(``schedd_exec.bundle_cache``), which is first on the ``sys.path`` of every process of that pool
and the only place the pool's processes import task modules from that the worker's environment
does not already provide.

Guaranteed:

* Never two versions in one process: a pool serves one bundle hash for its whole life, and its
  processes are started with that bundle's directory only
  (``tests/e2e/test_bundles.py::test_a_code_change_reaches_the_next_run_without_a_worker_restart``).
* A run started before a code change finishes on its own bundle's pool; the next run's bundle gets
  a pool of its own, started on first use, without restarting the worker.
* At most ``max_pools`` pools are kept: when a pool is started beyond that, the least recently used
  pools with no task running are closed (their processes retired). A pool with a task running is
  never closed for this; it is retired once idle, if the limit still demands it.
* A bundle stays on disk while a pool for it lives (the pool pins it in the cache).
* A new pool starts only on a bundle the cache has just verified against its archive
  (:meth:`~schedd_exec.bundle_cache.BundleCache.verify`: re-fetched when anything differs), so
  code planted in the cache runs in no new pool
  (``tests/security/test_bundle_cache.py::test_code_planted_in_the_cache_is_refetched_by_the_next_pool``).

Not guaranteed: isolation between tasks of one bundle in one process (see
``schedd_exec.python_pool``).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from schedd_exec.bundle_cache import BundleCache
from schedd_exec.python_pool import PyOutcome, PythonPool

#: Pools kept warm at once (the newest versions in use).
DEFAULT_MAX_POOLS = 2

PoolFactory = Callable[[str], PythonPool]
"""Makes a pool (not started) whose processes import from the given directory."""


@dataclass
class _Warm:
    pool: PythonPool
    running: int = 0


class BundlePools:
    def __init__(
        self, cache: BundleCache, make_pool: PoolFactory, *, max_pools: int = DEFAULT_MAX_POOLS
    ) -> None:
        if max_pools < 1:
            raise ValueError("max_pools must be at least 1")
        self._cache = cache
        self._make_pool = make_pool
        self._max_pools = max_pools
        self._pools: OrderedDict[str, _Warm] = OrderedDict()  # least recently used first
        self._starting: dict[str, asyncio.Lock] = {}
        self._retiring: set[asyncio.Task[None]] = set()
        self._closed = False

    @property
    def pids(self) -> dict[str, list[int]]:
        """The pids of each warm pool's processes, by bundle hash."""
        return {sha256: warm.pool.pids for sha256, warm in self._pools.items()}

    async def run(self, sha256: str, target: str, **options: Any) -> PyOutcome:
        """Run ``target`` in a process of bundle ``sha256``'s pool (``options`` as for
        :meth:`PythonPool.run`), fetching the bundle and starting the pool when needed."""
        async with self._cache.checkout(sha256):
            warm = await self._warm(sha256)
            warm.running += 1
            try:
                return await warm.pool.run(target, **options)
            finally:
                warm.running -= 1
                if sha256 in self._pools:
                    self._pools.move_to_end(sha256)
                self._retire(keep=sha256)

    async def close(self) -> None:
        self._closed = True
        while self._pools:
            sha256, warm = self._pools.popitem()
            self._retiring.add(asyncio.ensure_future(self._stop(sha256, warm)))
        if self._retiring:
            await asyncio.gather(*self._retiring, return_exceptions=True)

    async def _warm(self, sha256: str) -> _Warm:
        lock = self._starting.setdefault(sha256, asyncio.Lock())
        async with lock:
            warm = self._pools.get(sha256)
            if warm is not None:
                self._pools.move_to_end(sha256)
                return warm
            if self._closed:
                raise RuntimeError("the executor is closing")
            await self._cache.verify(sha256)  # what a new pool imports is what was uploaded
            pool = self._make_pool(str(self._cache.root / sha256))
            await pool.start()
            self._cache.pin(sha256)
            warm = self._pools[sha256] = _Warm(pool)
            self._retire(keep=sha256)
            return warm

    def _retire(self, keep: str) -> None:
        excess = len(self._pools) - self._max_pools
        for sha256, warm in list(self._pools.items()):
            if excess <= 0:
                return
            if sha256 == keep or warm.running > 0:
                continue
            del self._pools[sha256]
            excess -= 1
            task = asyncio.ensure_future(self._stop(sha256, warm))
            self._retiring.add(task)
            task.add_done_callback(self._retiring.discard)

    async def _stop(self, sha256: str, warm: _Warm) -> None:
        try:
            with contextlib.suppress(Exception):
                await warm.pool.close()
        finally:
            self._cache.unpin(sha256)
