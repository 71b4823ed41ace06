"""What the benchmark reads about a cluster's processes from the kernel: the service processes by
name, their descendants, their proportional set size and the CPU time they used."""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from pathlib import Path

from schedd_devstack.services import Cluster


def service_pids(cluster: Cluster) -> dict[str, int]:
    """The pid of each running service of ``cluster`` by name: api, registry, web, the schedulers
    numbered (``scheduler-1``...; not named by their random ids, so an interleaved comparison pairs
    them up) and the workers."""
    services: dict[str, int] = {"api": cluster.api.pid} if cluster.api and cluster.api.pid else {}
    if cluster.registry is not None and cluster.registry.pid:
        services["registry"] = cluster.registry.pid
    if cluster.web is not None and cluster.web.pid:
        services["web"] = cluster.web.pid
    schedulers = [p.pid for p in cluster.schedulers.values() if p.alive and p.pid]
    services |= {f"scheduler-{i}": pid for i, pid in enumerate(schedulers, 1) if pid}
    services |= {name: p.pid for name, p in cluster.workers.items() if p.alive and p.pid}
    return services


def descendants(pid: int) -> list[int]:
    out = subprocess.run(["ps", "-e", "-o", "pid=,ppid="], capture_output=True, text=True, check=True).stdout
    children: dict[int, list[int]] = {}
    for line in out.splitlines():
        child, parent = (int(x) for x in line.split())
        children.setdefault(parent, []).append(child)
    result, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            result.append(c)
            todo.append(c)
    return result


def pss_kib(pids: list[int]) -> int:
    total = 0
    for p in pids:
        try:
            for line in Path(f"/proc/{p}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1])
        except OSError:
            pass
    return total


def cpu_seconds(pids: list[int]) -> float:
    """CPU seconds of ``pids`` (every thread of each), from the kernel scheduler's nanosecond accounting
    (``/proc/PID/task/TID/schedstat``), not the 10 ms ticks of ``/proc/PID/stat``: at a few tenths
    of a percent of a core, a 20-second window of ticks has a resolution of 0.05 % per process."""
    total = 0
    for p in pids:
        try:
            threads = os.listdir(f"/proc/{p}/task")
        except OSError:
            continue
        for t in threads:
            with contextlib.suppress(OSError):  # the thread ended meanwhile
                total += int(Path(f"/proc/{p}/task/{t}/schedstat").read_text().split()[0])
    return total / 1e9


#: What "quiet" means to :func:`wait_until_quiet`: the share of the machine's CPU time busy over a window.
QUIET_SHARE = 0.15
QUIET_WINDOW = 0.25


def wait_until_quiet(at_most: float = 10.0) -> float:
    """Wait until the whole machine was busy less than ``QUIET_SHARE`` of a ``QUIET_WINDOW`` (what the
    last measurement left running, an autovacuum say, is over), at most ``at_most`` seconds; returns
    the seconds waited. Reads ``/proc/stat``; elsewhere it returns at once."""
    began = time.monotonic()
    while time.monotonic() - began < at_most:
        before = _cpu_times()
        if before is None:
            break
        time.sleep(QUIET_WINDOW)
        after = _cpu_times()
        if after is None:
            break
        total, idle = after[0] - before[0], after[1] - before[1]
        if total <= 0 or (total - idle) / total < QUIET_SHARE:
            break
    return time.monotonic() - began


def _cpu_times() -> tuple[int, int] | None:
    """All CPUs' time and their idle time (with I/O wait) since boot, in ticks."""
    try:
        fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return None
    return sum(fields), fields[3] + fields[4]
