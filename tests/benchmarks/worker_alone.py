"""One real worker measured alone, against a stand-in registry (``tests.benchmarks.standin_registry``).

A worker's CPU per task in a fan-out mixes its own cost with the waiting the rest of the stack
imposes on it, and moves with everything else on the machine. Here the ``schedd-worker`` service
(8 slots, its warm Python processes all started) runs no-op Python tasks handed out by a stand-in
registry in another process that does nothing a registry does but hand out and acknowledge, so a
change to the worker shows in the worker's own figure. Two paces, each measured over ``windows``
windows of ``seconds`` after a warm-up:

- ``back_to_back``: every freed slot filled at once;
- ``paced``: every freed slot filled ``PACED_HOLD_MS`` later, about the rate each of 4 workers runs
  in the 1,000-task fan-out (docs/performance.md: a task costs several times more at this pace).

For each: tasks/s, and the CPU milliseconds per task of the worker with its task processes and of
the stand-in (medians of the windows).
"""

from __future__ import annotations

import contextlib
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from schedd_devstack.ports import free_port
from tests.benchmarks.common import stop
from tests.benchmarks.process_stats import cpu_seconds, descendants

ROOT = Path(__file__).resolve().parents[2]
SLOTS = 8
PACED_HOLD_MS = 20.0
WARM_UP_TASKS = 2000
START_SECONDS = 60.0


def measure_worker_alone(seconds: float = 4.0, windows: int = 3) -> dict[str, Any]:
    return {
        "slots": SLOTS,
        "back_to_back": _measure(0.0, seconds, windows),
        "paced": {"hold_ms": PACED_HOLD_MS, **_measure(PACED_HOLD_MS, seconds, windows)},
    }


def _measure(hold_ms: float, seconds: float, windows: int) -> dict[str, Any]:
    with _stand_in(hold_ms) as (registry, progress, port), _worker(port) as worker:
        _done_at_least(progress, WARM_UP_TASKS)
        rates, worker_cpu, registry_cpu = [], [], []
        for _ in range(windows):
            pids = [worker.pid, *descendants(worker.pid)]
            before, before_registry = cpu_seconds(pids), cpu_seconds([registry.pid])
            began, done_before = time.monotonic(), _done(progress)
            done = done_before
            while time.monotonic() - began < seconds:
                done = _done(progress)
            elapsed = time.monotonic() - began
            tasks = max(done - done_before, 1)
            rates.append(tasks / elapsed)
            worker_cpu.append(1000 * (cpu_seconds(pids) - before) / tasks)
            registry_cpu.append(1000 * (cpu_seconds([registry.pid]) - before_registry) / tasks)
    return {
        "tasks_per_s_median": statistics.median(rates),
        "cpu_ms_per_task": {
            "worker": statistics.median(worker_cpu),
            "stand_in_registry": statistics.median(registry_cpu),
        },
    }


def _done(progress: IO[str]) -> int:
    """The stand-in's next progress line: the results it has received."""
    line = progress.readline()
    if not line:
        raise RuntimeError("the stand-in registry exited")
    return int(line.split()[1])


def _done_at_least(progress: IO[str], tasks: int) -> None:
    deadline = time.monotonic() + START_SECONDS
    while _done(progress) < tasks:
        if time.monotonic() > deadline:
            raise TimeoutError(f"the worker did not run {tasks} tasks in {START_SECONDS:g} s")


@contextlib.contextmanager
def _stand_in(hold_ms: float) -> Iterator[tuple[subprocess.Popen[str], IO[str], int]]:
    port = free_port()
    command = [
        sys.executable, "-m", "tests.benchmarks.standin_registry", "--port", str(port),
        "--hold-ms", str(hold_ms),
    ]  # fmt: skip
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        if process.stdout.readline().strip() != "ready":
            raise RuntimeError("the stand-in registry did not start")
        yield process, process.stdout, port
    finally:
        stop(process)


@contextlib.contextmanager
def _worker(port: int) -> Iterator[subprocess.Popen[bytes]]:
    """The worker service with ``SLOTS`` slots and as many warm Python processes, on a token the
    stand-in never checks."""
    command = [
        sys.executable, "-m", "schedd_worker.main", "--registry", f"127.0.0.1:{port}",
        "--capacity", str(SLOTS), "--python-warm", str(SLOTS), "--log-level", "WARNING",
    ]  # fmt: skip
    env = {**os.environ, "SCHEDD_WORKER_TOKEN": "stand-in"}
    process = subprocess.Popen(command, cwd=ROOT, env=env)
    try:
        yield process
    finally:
        stop(process)
