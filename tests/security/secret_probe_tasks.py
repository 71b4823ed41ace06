"""Task code that hunts for the secrets of the schedd process running it (test_task_secrets.py).

It finds its service ancestor (the worker, or the scheduler of a local executor) by walking up the
parent chain, then tries what any code of the task's user can try: that process's
``/proc/<pid>/environ``, ``/proc/<pid>/cmdline`` and its memory (``/proc/<pid>/maps`` and
``/proc/<pid>/mem``), and its own environment. Whatever looks like a secret is reported: a schedd
token, a PostgreSQL URL with credentials, or a ``CANARY_`` value the test planted in the service's
environment. As a Python task it returns the findings; run as ``python -m`` (a shell task) it
prints them after :data:`MARKER`.
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path
from typing import Any

MARKER = "SECRET-PROBE "
SERVICES = (b"schedd_worker.main", b"schedd_scheduler.main")
SECRET = re.compile(
    rb"sdt_[0-9a-f]{12}_[A-Za-z0-9_-]{43}"
    rb"|postgres(?:ql)?(?:\+asyncpg)?://[^\s\x00/@'\"]+@[^\s\x00'\"]{1,200}"
    rb"|CANARY_[A-Za-z0-9]{8,}"
)
_CHUNK = 1 << 20
_LARGEST_REGION = 64 << 20
_MOST_REPORTED = 20
_PATIENCE = 60.0


def _parent(pid: int) -> int:
    with open(f"/proc/{pid}/stat", "rb") as f:
        stat = f.read()
    return int(stat[stat.rindex(b")") + 2 :].split()[1])


def _cmdline(pid: int) -> bytes:
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        return f.read()


def service_ancestor() -> int:
    """The nearest ancestor whose command line runs a schedd worker or scheduler; 0 if none."""
    pid = os.getppid()
    while pid > 1:
        if any(marker in _cmdline(pid) for marker in SERVICES):
            return pid
        pid = _parent(pid)
    return 0


def _secrets(data: bytes, found: set[str]) -> None:
    for match in SECRET.finditer(data):
        if len(found) < _MOST_REPORTED:
            found.add(match.group().decode(errors="replace"))


def _read_file(path: str) -> dict[str, Any]:
    found: set[str] = set()
    try:
        with open(path, "rb") as f:
            _secrets(f.read(), found)
    except OSError as exc:
        return {"error": type(exc).__name__, "secrets": []}
    return {"error": "", "secrets": sorted(found)}


def _read_memory(pid: int) -> dict[str, Any]:
    """Search the writable mappings of ``pid`` (heap, anonymous memory) through ``/proc/pid/mem``."""
    found: set[str] = set()
    try:
        with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb", buffering=0) as mem:
            for line in maps:
                fields = line.split()
                start, end = (int(x, 16) for x in fields[0].split("-"))
                if not fields[1].startswith("rw") or end - start > _LARGEST_REGION:
                    continue
                for offset in range(start, end, _CHUNK):
                    try:
                        mem.seek(offset)
                        _secrets(mem.read(min(_CHUNK + 256, end - offset)), found)
                    except OSError:
                        break  # a mapping that cannot be read (a guard page, gone meanwhile)
    except OSError as exc:
        return {"error": type(exc).__name__, "secrets": []}
    return {"error": "", "secrets": sorted(found)}


def probe() -> dict[str, Any]:
    """What this task can read of its service's secrets, and of its own environment."""
    pid = service_ancestor()
    own: set[str] = set()
    for key, value in os.environ.items():
        _secrets(f"{key}={value}".encode(), own)
    report: dict[str, Any] = {
        "service_pid": pid,
        "uid": os.getuid(),
        "own_environment": sorted(own),
        "own_variables": sorted(os.environ),
    }
    if pid:
        report["environ"] = _read_file(f"/proc/{pid}/environ")
        report["cmdline"] = _read_file(f"/proc/{pid}/cmdline")
        report["mem"] = _read_memory(pid)
    return report


def _wait_for(path: str) -> str:
    """The content of ``path`` once it exists; raises after a minute."""
    deadline = time.monotonic() + _PATIENCE
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} did not appear in {_PATIENCE:g}s")
        time.sleep(0.05)
    return Path(path).read_text()


def hold_transaction(connection: Any, params: dict[str, Any]) -> None:
    """A transactional task that stays in its transaction (its child holds the task role's database URL
    and its commit secret) until the probe beside it is done."""
    Path(params["started"]).write_text(str(os.getpid()))
    _wait_for(params["done"])


def probe_sibling(params: dict[str, Any]) -> dict[str, Any]:
    """What this task can read of the memory of the transactional task running beside it."""
    try:
        holder = int(_wait_for(params["started"]))
        return {"holder_pid": holder, "uid": os.getuid(), "mem": _read_memory(holder)}
    finally:
        Path(params["done"]).touch()


if __name__ == "__main__":
    print(MARKER + json.dumps(probe()), flush=True)
