"""The benchmark's warm Python pool figures, on real child processes and no cluster: no-op tasks per
second with 2 children, and how long the pool takes to end a task whose timeout passed (one that
stops on SIGTERM, one that ignores it until SIGKILL after the kill grace) and to close with a task
that ignores SIGTERM still running. ``tests/unit/test_python_pool.py`` asserts what happens; this
measures how fast."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from schedd_exec.python_pool import PythonPool
from tests.unit.pypool_tasks import IDENTITY

TASKS = "tests.unit.pypool_tasks:"
#: The kill grace of the pools measured (seconds between SIGTERM and SIGKILL).
KILL_GRACE = 0.5


async def _throughput(tasks_per_caller: int, callers: int) -> float:
    async with PythonPool(2) as pool:

        async def caller(n: int) -> None:
            for _ in range(n):
                out = await pool.run(TASKS + "noop", env=dict(IDENTITY), timeout=10)
                assert out.succeeded, out.error

        await asyncio.gather(*(caller(20) for _ in range(4)))  # warm up: imports
        began = time.perf_counter()
        await asyncio.gather(*(caller(tasks_per_caller) for _ in range(callers)))
        return tasks_per_caller * callers / (time.perf_counter() - began)


async def _seconds_to_end(target: str, timeout: float, params: dict[str, Any] | None = None) -> float:
    """From handing ``target`` to the pool to its outcome, the task overrunning ``timeout``."""
    async with PythonPool(1, kill_grace=KILL_GRACE) as pool:
        began = time.monotonic()
        out = await pool.run(TASKS + target, env={}, timeout=timeout, params=params)
        assert out.error == f"execution timeout of {timeout}s exceeded", out.error
        return time.monotonic() - began


async def _seconds_to_close() -> float:
    """From ``close()`` to its return, with a task that ignores SIGTERM running."""
    pool = PythonPool(2, kill_grace=KILL_GRACE)
    await pool.start()
    started = asyncio.Event()
    busy = asyncio.create_task(
        pool.run(TASKS + "ignore_sigterm_and_hang", env={}, timeout=None, on_output=lambda _: started.set())
    )
    await asyncio.wait_for(started.wait(), 30)
    began = time.monotonic()
    await pool.close()
    closed = time.monotonic() - began
    await busy
    return closed


async def _measure() -> dict[str, float]:
    return {
        "noop_tasks_per_s_2_children": await _throughput(500, 8),
        "timeout_0_3s_to_outcome_s": await _seconds_to_end("sleep_and_print", 0.3, {"seconds": 30}),
        "timeout_0_2s_sigkill_to_outcome_s": await _seconds_to_end("ignore_sigterm_and_hang", 0.2),
        "close_with_sigterm_ignored_s": await _seconds_to_close(),
    }


def measure_pypool() -> dict[str, float]:
    """The pool's figures (see the module's docstring)."""
    return asyncio.run(_measure())
