"""Where the services spend their CPU during a workload: py-spy samples each service while a
function runs, and the functions with the most samples of their own (self time) are reported per
service. Without py-spy, or where the machine does not allow attaching to processes, nothing is
sampled and the report says so."""

from __future__ import annotations

import collections
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from schedd_devstack.services import Cluster

RATE = 200
_LINE = re.compile(r":\d+\)")


def _py_spy() -> str | None:
    beside = Path(sys.executable).with_name("py-spy")
    return str(beside) if beside.exists() else shutil.which("py-spy")


def top_self(raw: Path, top: int) -> dict[str, Any]:
    """The functions with the most samples of their own in a py-spy ``raw`` file (collapsed stacks)."""
    own: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack:
            continue
        total += int(count)
        own[_LINE.sub(")", stack.split(";")[-1])] += int(count)
    return {
        "cpu_seconds": total / RATE,
        "top": [{"function": name, "share": n / total} for name, n in own.most_common(top)] if total else [],
    }


def profile(cluster: Cluster, workload: Callable[[], object], *, top: int = 8) -> dict[str, Any]:
    tool = _py_spy()
    if tool is None:
        return {"skipped": "py-spy is not installed"}
    leader = next((p for p in cluster.schedulers.values() if p.alive), None)
    pids = {"scheduler": leader.pid} if leader is not None else {}
    if cluster.registry is not None:
        pids["registry"] = cluster.registry.pid
    first_worker = next(iter(cluster.workers.values()), None)
    if first_worker is not None:
        pids["worker"] = first_worker.pid
    out = Path(tempfile.mkdtemp(prefix="schedd-profile-"))
    spies = {
        name: subprocess.Popen(
            [
                tool,
                "record",
                "-p",
                str(pid),
                "-o",
                str(out / f"{name}.txt"),
                "-f",
                "raw",
                "-r",
                str(RATE),
                "--nonblocking",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        for name, pid in pids.items()
        if pid
    }
    try:
        workload()
    finally:
        for spy in spies.values():
            spy.send_signal(2)
    found: dict[str, Any] = {}
    for name, spy in spies.items():
        _, err = spy.communicate(timeout=60)
        raw = out / f"{name}.txt"
        found[name] = top_self(raw, top) if raw.exists() else {"skipped": err.decode(errors="replace")[-300:]}
    shutil.rmtree(out, ignore_errors=True)
    return found
