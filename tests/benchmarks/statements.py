"""What PostgreSQL spends on each statement while the stack runs a fan-out and a chain.

``make bench BENCH_ARGS="--only statements"`` starts PostgreSQL with ``pg_stat_statements`` loaded
(the whole run's PostgreSQL: run this group on its own, the extension costs every statement a
little), resets its counters before each workload and reports, per task of the workload, how many
statements ran and how long they took to execute, and the statements that took most of it (their
first characters, calls and execution milliseconds per task, share of the total).

Execution time is wall time inside PostgreSQL's executor: on a busy machine it includes waiting for
a core, so it tells which statements cost most relative to each other, not what a core spent; the
throughput group's ``cpu_ms_per_task.postgres`` is the CPU. Commit (the WAL flush) is counted in
``COMMIT``'s own row. Without the extension's library the group is skipped, saying why.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from schedd_devstack.binaries import find_postgres_bindir
from schedd_devstack.services import Cluster
from tests.benchmarks.workloads import measure_chain, measure_fan_out

LIBRARY = "pg_stat_statements"
#: What PostgreSQL starts with when this group runs.
SETTINGS = {"shared_preload_libraries": LIBRARY, "pg_stat_statements.track": "all"}
#: Statements listed per workload.
TOP = 12
#: Characters of a statement shown (whitespace collapsed).
HEAD = 100

_SPACE = re.compile(r"\s+")


def missing_library() -> str:
    """Why the group cannot run here, or "" when it can."""
    try:
        lib = find_postgres_bindir().parent / "lib" / f"{LIBRARY}.so"
    except Exception as exc:
        return f"no PostgreSQL found: {exc}"
    return "" if Path(lib).exists() else f"{lib} is not installed (PostgreSQL's contrib modules)"


def measure_statements(cluster: Cluster, workdir: Path, *, fan_out: int, links: int) -> dict[str, Any]:
    """A fan-out of ``fan_out`` no-op tasks and a chain of ``links`` links, each on its own counters."""
    reason = missing_library()
    if reason:
        return {"skipped": reason}
    cluster.fetch(f"CREATE EXTENSION IF NOT EXISTS {LIBRARY}")
    return {
        "fan_out": _per_task(
            cluster, fan_out, lambda: measure_fan_out(cluster, workdir, fan_out, runs=1, label="statements")
        ),
        "chain": _per_task(cluster, links + 1, lambda: measure_chain(cluster, workdir, links, "statements")),
    }


def _per_task(cluster: Cluster, tasks: int, workload: Callable[[], object]) -> dict[str, Any]:
    cluster.fetch("SELECT pg_stat_statements_reset()")
    workload()
    rows = cluster.fetch(
        "SELECT query, calls, rows, total_exec_time FROM pg_stat_statements "
        "WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) "
        f"AND query NOT LIKE '%{LIBRARY}%'"
    )
    total_ms = sum(float(r["total_exec_time"]) for r in rows) or 1.0
    top = sorted(rows, key=lambda r: -float(r["total_exec_time"]))[:TOP]
    return {
        "tasks": tasks,
        "statements_per_task": sum(int(r["calls"]) for r in rows) / tasks,
        "exec_ms_per_task": total_ms / tasks,
        "top": [
            {
                "statement": _SPACE.sub(" ", str(r["query"])).strip()[:HEAD],
                "calls_per_task": int(r["calls"]) / tasks,
                "rows_per_call": int(r["rows"]) / max(int(r["calls"]), 1),
                "exec_ms_per_task": float(r["total_exec_time"]) / tasks,
                "share": float(r["total_exec_time"]) / total_ms,
            }
            for r in top
        ],
    }
