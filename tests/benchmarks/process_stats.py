"""What the benchmark reads about a cluster's processes from the kernel: the service processes by
name, their descendants, their proportional set size and the CPU time they used."""

from __future__ import annotations

import contextlib
import os
import subprocess
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
