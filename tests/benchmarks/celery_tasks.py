"""The Celery app of the peer benchmark (tests.benchmarks.celery_peer): no-op tasks on Redis.

``SCHEDD_BENCH_REDIS`` names the Redis database used as broker and result backend (default
``redis://127.0.0.1:6379/15``). ``timed`` records when it started and ended (``time.time()``) in a
Redis list, so a chain's gaps are measured from inside the tasks, as schedd's are from its attempts.
"""

from __future__ import annotations

import os
import time

import redis
from celery import Celery

REDIS_URL = os.environ.get("SCHEDD_BENCH_REDIS", "redis://127.0.0.1:6379/15")

app = Celery("schedd_bench_peer", broker=REDIS_URL, backend=REDIS_URL)
app.conf.update(task_serializer="json", result_serializer="json", accept_content=["json"])
_redis = redis.Redis.from_url(REDIS_URL)


@app.task(name="bench.noop")
def noop() -> None:
    """Nothing, as tests.benchmarks.noop:noop for schedd."""


@app.task(name="bench.timed")
def timed(key: str) -> None:
    """Nothing, with its start and end appended to the list ``key`` as ``"start end"``."""
    started = time.time()
    _redis.rpush(key, f"{started} {time.time()}")
