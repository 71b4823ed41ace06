"""``make bench``: schedd's performance figures, measured on real processes.

Starts a durable PostgreSQL and etcd (fsync on: every state change is durable), then
clusters of the real services, and measures:

- fan-out: 1,000 independent no-op Python tasks with 4 workers (tasks/s, trigger to run end), and
  the same with shell tasks (a process per task);
- one no-op task from trigger to success;
- chained latency: end of one no-op task to the start of the next, over 100 links (median, p99);
- the same with 1,000 idle DAGs and 10,000 finished task instances present;
- leader fail-over: kill -9 and SIGTERM, to the next scheduling pass;
- the stack's memory (PSS of api, scheduler, registry, 2 workers and their task processes) and its
  CPU use while idle;
- a 365-interval backfill of a 3-task no-op DAG (parallel strategy), and how late a DAG scheduled
  every 2 seconds starts its runs meanwhile (``tests.benchmarks.backfill``).

Figures are printed and written to ``bench-results.json``; nothing is asserted. Run it on an
otherwise idle machine for figures worth comparing.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import asyncpg  # type: ignore[import-untyped, unused-ignore]

from schedd_devstack.services import Cluster
from schedd_devstack.stack import DevStack
from schedd_store.engine import asyncpg_dsn
from tests.benchmarks.backfill import measure_backfill
from tests.benchmarks.common import FAST_LEASE, NOOP, percentile, register, schedctl


def fan_out_spec(n: int, *, shell: bool = False) -> dict[str, Any]:
    action: dict[str, Any] = {"shell": {"command": "true"}} if shell else {"python": {"target": NOOP}}
    return {
        "dag_id": "fanout_shell" if shell else "fanout",
        "tasks": [{"task_id": f"t{i:04d}", **action} for i in range(n)],
    }


def chain_spec(n: int) -> dict[str, Any]:
    tasks: list[dict[str, Any]] = [{"task_id": "t000", "python": {"target": NOOP}}]
    tasks += [
        {"task_id": f"t{i:03d}", "upstream": [f"t{i - 1:03d}"], "python": {"target": NOOP}}
        for i in range(1, n)
    ]
    return {"dag_id": "chain", "tasks": tasks}


def fetch(cluster: Cluster, query: str, *args: object) -> list[dict[str, Any]]:
    return cluster.fetch(query, *args)


def measure_fan_out(
    cluster: Cluster, workdir: Path, n: int, runs: int, *, shell: bool = False
) -> dict[str, Any]:
    spec = fan_out_spec(n, shell=shell)
    register(cluster, spec, workdir)
    dag_id = spec["dag_id"]
    rates = []
    for i in range(runs):
        schedctl(cluster, "runs", "trigger", dag_id, "--run-id", f"f{i}", "--wait", "--wait-timeout", "600")
        (row,) = fetch(
            cluster,
            "SELECT extract(epoch FROM ended_at - created_at) AS seconds FROM dag_runs "
            "WHERE dag_id = $1 AND run_id = $2",
            dag_id,
            f"f{i}",
        )
        rates.append(n / float(row["seconds"]))
    return {
        "tasks": n,
        "runs": runs,
        "tasks_per_s_best": max(rates),
        "tasks_per_s_median": statistics.median(rates),
    }


def measure_single_task(cluster: Cluster, workdir: Path, runs: int) -> dict[str, Any]:
    """Trigger to success of a DAG of one no-op shell task, from the database's timestamps."""
    register(
        cluster, {"dag_id": "single", "tasks": [{"task_id": "t", "shell": {"command": "true"}}]}, workdir
    )
    seconds = []
    for i in range(runs):
        schedctl(cluster, "runs", "trigger", "single", "--run-id", f"s{i}", "--wait")
        (row,) = fetch(
            cluster,
            "SELECT extract(epoch FROM ended_at - created_at) AS seconds FROM dag_runs "
            "WHERE dag_id = 'single' AND run_id = $1",
            f"s{i}",
        )
        seconds.append(float(row["seconds"]) * 1000)
    return {"runs": runs, "trigger_to_success_ms_median": statistics.median(seconds), "max": max(seconds)}


def measure_chain(cluster: Cluster, workdir: Path, links: int, label: str) -> dict[str, Any]:
    register(cluster, chain_spec(links + 1), workdir)
    schedctl(cluster, "runs", "trigger", "chain", "--run-id", label, "--wait", "--wait-timeout", "600")
    rows = fetch(
        cluster,
        "SELECT ti.task_id, a.started_at, a.ended_at FROM task_instances ti "
        "JOIN dag_runs r ON r.id = ti.run_pk JOIN task_attempts a ON a.attempt_id = ti.attempt_id "
        "WHERE r.dag_id = 'chain' AND r.run_id = $1 ORDER BY ti.task_id",
        label,
    )
    gaps = [(b["started_at"] - a["ended_at"]).total_seconds() * 1000 for a, b in itertools.pairwise(rows)]
    return {
        "links": len(gaps),
        "gap_ms_median": statistics.median(gaps),
        "gap_ms_p99": percentile(gaps, 99),
        "gap_ms_max": max(gaps),
    }


async def add_idle_load(database_url: str, dags: int, finished: int) -> None:
    """Register ``dags`` idle DAGs and ``finished`` finished task instances, straight into the store."""
    conn = await asyncpg.connect(asyncpg_dsn(database_url))
    try:
        await conn.execute(
            "INSERT INTO dags (dag_id) SELECT 'idle_' || g FROM generate_series(1, $1) g", dags
        )
        await conn.execute(
            "INSERT INTO dag_versions (dag_id, version_hash, spec) "
            "SELECT dag_id, 'v1', '\\x'::bytea FROM dags WHERE dag_id LIKE 'idle\\_%'"
        )
        await conn.execute(
            "UPDATE dags SET latest_version_id = v.id FROM dag_versions v "
            "WHERE v.dag_id = dags.dag_id AND dags.dag_id LIKE 'idle\\_%'"
        )
        runs = max(1, finished // 100)
        await conn.execute(
            """
            WITH r AS (INSERT INTO dag_runs (dag_id, run_id, dag_version_id, run_type, state, logical_date,
                                             started_at, ended_at)
                       SELECT 'idle_1', 'old_' || g,
                              (SELECT latest_version_id FROM dags WHERE dag_id = 'idle_1'),
                              'manual', 'success', now() - g * interval '1 hour', now(), now()
                       FROM generate_series(1, $1) g RETURNING id)
            INSERT INTO task_instances (run_pk, dag_id, logical_date, task_id, state, try_number, started_at,
                                        ended_at)
            SELECT r.id, 'idle_1', now(), 't' || t, 'success', 1, now(), now()
            FROM r, generate_series(1, 100) t""",
            runs,
        )
        await conn.execute("ANALYZE")
    finally:
        await conn.close()


def measure_failover(cluster: Cluster, signal_name: str, workdir: Path) -> float:
    """Seconds from the signal to the next committed scheduling pass of a new term."""
    token, leader = cluster.wait_for_leader()
    register(cluster, chain_spec(200), workdir)
    label = f"failover-{signal_name}"
    schedctl(cluster, "runs", "trigger", "chain", "--run-id", label)
    time.sleep(0.5)  # let the chain get going, so a pass is due right after the fail-over
    sent = time.time()
    if signal_name == "kill":
        leader.kill()
    else:
        leader.terminate()
    new_token, _ = cluster.wait_for_leader(above=token, timeout=60)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        rows = fetch(
            cluster,
            "SELECT extract(epoch FROM min(committed_at)) AS t FROM scheduler_passes WHERE token = $1",
            new_token,
        )
        if rows and rows[0]["t"] is not None:
            cluster.add_scheduler()  # a standby for the next measurement
            return float(rows[0]["t"]) - sent
        time.sleep(0.01)
    raise RuntimeError("no scheduling pass after the fail-over")


def pss_kib(pid: int) -> int:
    """Proportional set size of a process and all its descendants."""
    total = 0
    for p in [pid, *descendants(pid)]:
        try:
            for line in Path(f"/proc/{p}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1])
        except OSError:
            pass
    return total


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


def cpu_seconds(pids: list[int]) -> float:
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for p in pids:
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / ticks
        except OSError:
            pass
    return total


def measure_footprint(cluster: Cluster, idle_seconds: float) -> dict[str, Any]:
    roots = [p.pid for p in cluster.processes if p.alive and p.pid is not None]
    everything = roots + [d for r in roots for d in descendants(r)]
    pss = sum(pss_kib(r) for r in roots)
    before = cpu_seconds(everything)
    time.sleep(idle_seconds)
    used = cpu_seconds(everything) - before
    return {"processes": len(everything), "pss_mb": pss / 1024, "idle_cpu_percent": 100 * used / idle_seconds}


def section(name: str, fn: Callable[[], dict[str, Any] | float], results: dict[str, Any]) -> None:
    print(f"-- {name} ...", flush=True)
    value = fn()
    results[name] = value
    print(f"   {value}", flush=True)


def measure_throughput(
    url: str, etcd: str, workdir: Path, args: argparse.Namespace, results: dict[str, Any]
) -> None:
    with Cluster(url, etcd, workdir / "fanout", workers=4, worker_capacity=8, service_env=FAST_LEASE) as c:
        section("fan_out", lambda: measure_fan_out(c, workdir, args.fan_out, runs=3), results)
        section(
            "fan_out_shell",
            lambda: measure_fan_out(c, workdir, args.fan_out, runs=1, shell=True),
            results,
        )
        section("single_task", lambda: measure_single_task(c, workdir, runs=10), results)
        section("chain", lambda: measure_chain(c, workdir, args.links, "plain"), results)
        section("chain_again", lambda: measure_chain(c, workdir, args.links, "again"), results)
        asyncio.run(add_idle_load(url, dags=1000, finished=10_000))
        section(
            "chain_with_1000_idle_dags_10000_finished_tis",
            lambda: measure_chain(c, workdir, args.links, "loaded"),
            results,
        )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--fan-out", type=int, default=1000)
    parser.add_argument("--links", type=int, default=100)
    parser.add_argument("--backfill-intervals", type=int, default=365)
    parser.add_argument(
        "--only", default="", help="comma-separated groups: throughput, failover, footprint, backfill"
    )
    parser.add_argument("--out", default="bench-results.json")
    args = parser.parse_args()
    groups = set(args.only.split(",")) if args.only else {"throughput", "failover", "footprint", "backfill"}
    results: dict[str, Any] = {"machine": {"cpus": os.cpu_count()}}
    workdir = Path(tempfile.mkdtemp(prefix="schedd-bench-"))
    with DevStack(durable=True) as stack:
        env = stack.env()
        url, etcd = env["SCHEDD_DATABASE_URL"], env["SCHEDD_ETCD_ENDPOINTS"]
        if "throughput" in groups:
            measure_throughput(url, etcd, workdir, args, results)
        if "failover" in groups:
            with Cluster(
                url, etcd, workdir / "failover", schedulers=2, workers=2, service_env=FAST_LEASE
            ) as c:
                section("failover_kill9_seconds", lambda: measure_failover(c, "kill", workdir), results)
                section("failover_sigterm_seconds", lambda: measure_failover(c, "term", workdir), results)
        if "footprint" in groups:
            with Cluster(
                url, etcd, workdir / "footprint", schedulers=1, workers=2, service_env=FAST_LEASE
            ) as c:
                register(c, chain_spec(3), workdir)
                schedctl(c, "runs", "trigger", "chain", "--run-id", "warm", "--wait")
                time.sleep(5.0)  # let start-up and the warm-up run settle before measuring "idle"
                section("footprint", lambda: measure_footprint(c, idle_seconds=10.0), results)
        if "backfill" in groups:
            with Cluster(
                url, etcd, workdir / "backfill", workers=4, worker_capacity=8, service_env=FAST_LEASE
            ) as c:
                section(
                    "backfill_parallel",
                    lambda: measure_backfill(c, workdir, args.backfill_intervals, max_active_runs=16),
                    results,
                )
    Path(args.out).write_text(json.dumps(results, indent=2, default=str))
    print(f"written to {args.out}")


if __name__ == "__main__":
    main()
