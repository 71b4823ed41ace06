"""The peer in ``make bench``: Celery + Redis, run and measured the way schedd is.

Celery's worker runs with two prefork processes on Redis (broker and result backend), with no DAG
state and nothing durable: the yardstick the targets are written against. A :class:`CeleryPeer`
measures

- :meth:`CeleryPeer.chain`: ``links + 1`` no-op tasks in a ``celery.chain``, the end of one to the
  start of the next, from the times the tasks record themselves;
- :meth:`CeleryPeer.fan_out`: ``n`` no-op tasks sent at once (a group), tasks/s from the first send
  to the last result.

``tests.benchmarks.peers`` interleaves these with schedd's figures. Only where Redis answers and
Celery is installed (the bench extra): :func:`unavailable` says why not. Redis database 15 is flushed
first (``SCHEDD_BENCH_REDIS`` names another).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from typing import Any

from tests.benchmarks.common import stop

#: The worker's pool, as the targets name it.
PROCESSES = 2
READY_SECONDS = 60.0
#: Seconds a chain or a fan-out of the peer may take before the benchmark gives up.
WORKLOAD_SECONDS = 600


def unavailable() -> str | None:
    """Why Celery + Redis cannot be measured here (not installed, no Redis), or None. Flushes the
    bench's Redis database when it answers."""
    try:
        from tests.benchmarks import celery_tasks
    except ImportError as exc:
        return f"celery is not installed ({exc}): make bench installs the bench extra"
    try:
        celery_tasks._redis.flushdb()
    except Exception as exc:  # redis.ConnectionError and friends: no Redis to measure against
        return f"no Redis at {celery_tasks.REDIS_URL}: {exc}"
    return None


class CeleryPeer:
    """A running Celery worker and the workloads measured on it (see :func:`running_peer`)."""

    def __init__(self) -> None:
        from tests.benchmarks import celery_tasks

        self._tasks = celery_tasks

    def chain(self, links: int) -> list[float]:
        """The gaps (ms) between ``links + 1`` chained no-op tasks: each one's end to the next's start."""
        from celery import chain

        key = f"chain-{uuid.uuid4().hex}"
        signatures = (self._tasks.timed.si(key) for _ in range(links + 1))
        chain(*signatures).apply_async().get(timeout=WORKLOAD_SECONDS)
        spans = [tuple(map(float, raw.split())) for raw in self._tasks._redis.lrange(key, 0, -1)]
        self._tasks._redis.delete(key)
        return [(later[0] - earlier[1]) * 1000 for earlier, later in itertools.pairwise(spans)]

    def fan_out(self, n: int) -> float:
        """Tasks per second of ``n`` no-op tasks sent at once, from the first send to the last result."""
        from celery import group

        started = time.monotonic()
        group(self._tasks.noop.si() for _ in range(n)).apply_async().get(timeout=WORKLOAD_SECONDS)
        return n / (time.monotonic() - started)


@contextlib.contextmanager
def running_peer() -> Iterator[CeleryPeer]:
    """A Celery worker of two prefork processes, answering pings and warmed up (a short chain) before
    this yields; stopped after. Check :func:`unavailable` first."""
    from tests.benchmarks import celery_tasks

    with _worker(celery_tasks.app):
        peer = CeleryPeer()
        peer.chain(10)
        yield peer


@contextlib.contextmanager
def _worker(app: Any) -> Iterator[subprocess.Popen[bytes]]:
    command = [
        sys.executable, "-m", "celery", "-A", "tests.benchmarks.celery_tasks", "worker",
        "--pool", "prefork", "--concurrency", str(PROCESSES), "--loglevel", "WARNING",
        "--without-gossip", "--without-mingle", "--hostname", f"bench-{os.getpid()}@%h",
    ]  # fmt: skip
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + READY_SECONDS
        while not app.control.ping(timeout=0.5):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the Celery worker did not start (exit code {process.poll()})")
        yield process
    finally:
        stop(process)
