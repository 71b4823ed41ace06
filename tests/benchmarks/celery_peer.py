"""The peer in ``make bench``: Celery + Redis measured the way schedd is, in the same run.

Celery's worker runs with two prefork processes on Redis (broker and result backend), with no DAG
state and nothing durable: the yardstick the targets are written against. Figures:

- ``chain``: ``links + 1`` no-op tasks in a ``celery.chain``, the end of one to the start of the next
  (median, p90, p99), from the times the tasks record themselves;
- ``fan_out``: ``n`` no-op tasks sent at once (a group), tasks/s from the first send to the last
  result, median of ``runs``.

Measured only where Redis answers and Celery is installed (the bench extra); otherwise the result
says why it was skipped. Redis database 15 is flushed first (``SCHEDD_BENCH_REDIS`` names another).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from typing import Any

from tests.benchmarks.common import percentile

#: The worker's pool, as the targets name it.
PROCESSES = 2
READY_SECONDS = 60.0


def measure_celery(links: int, fan_out: int, runs: int) -> dict[str, Any]:
    """The chain and fan-out figures of Celery + Redis, or ``{"skipped": reason}``."""
    try:
        from celery import chain, group

        from tests.benchmarks import celery_tasks
    except ImportError as exc:
        return {"skipped": f"celery is not installed ({exc}): make bench installs the bench extra"}
    try:
        celery_tasks._redis.flushdb()
    except Exception as exc:  # redis.ConnectionError and friends: no Redis to measure against
        return {"skipped": f"no Redis at {celery_tasks.REDIS_URL}: {exc}"}
    with _worker(celery_tasks.app):
        key = f"chain-{uuid.uuid4().hex}"
        chain(*(celery_tasks.timed.si(f"{key}-warm") for _ in range(10))).apply_async().get(timeout=60)
        chain(*(celery_tasks.timed.si(key) for _ in range(links + 1))).apply_async().get(timeout=600)
        spans = [tuple(map(float, raw.split())) for raw in celery_tasks._redis.lrange(key, 0, -1)]
        gaps = [(later[0] - earlier[1]) * 1000 for earlier, later in itertools.pairwise(spans)]
        rates = []
        for _ in range(runs):
            started = time.monotonic()
            group(celery_tasks.noop.si() for _ in range(fan_out)).apply_async().get(timeout=600)
            rates.append(fan_out / (time.monotonic() - started))
    return {
        "processes": PROCESSES,
        "chain": {
            "links": len(gaps),
            "gap_ms_median": statistics.median(gaps),
            "gap_ms_p90": percentile(gaps, 90),
            "gap_ms_p99": percentile(gaps, 99),
        },
        "fan_out": {"tasks": fan_out, "runs": runs, "tasks_per_s_median": statistics.median(rates)},
    }


@contextlib.contextmanager
def _worker(app: Any) -> Iterator[subprocess.Popen[bytes]]:
    """A Celery worker of two prefork processes, answering pings before this yields; stopped after."""
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
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
