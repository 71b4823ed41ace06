"""The benchmark's workloads on a running cluster: fan-outs (throughput), chains and single tasks
(latency), and the load that the growth figures add (idle DAGs, finished and queued task instances).
Every figure comes from the database's own timestamps, not from the client's clock."""

from __future__ import annotations

import itertools
import statistics
from pathlib import Path
from typing import Any

import asyncpg  # type: ignore[import-untyped, unused-ignore]

from schedd.v1 import resources_pb2 as pb
from schedd_core.database_url import asyncpg_dsn
from schedd_devstack.services import Cluster
from schedd_store import channels
from tests.benchmarks.common import NOOP, percentile, register, schedctl
from tests.benchmarks.process_stats import cpu_seconds, descendants, service_pids


def fan_out_spec(n: int, *, shell: bool = False) -> dict[str, Any]:
    action: dict[str, Any] = {"shell": {"command": "true"}} if shell else {"python": {"target": NOOP}}
    return {
        "dag_id": "fanout_shell" if shell else "fanout",
        "tasks": [{"task_id": f"t{i:04d}", **action} for i in range(n)],
    }


def chain_spec(n: int, target: str = NOOP, first: str = "") -> dict[str, Any]:
    """A chain of ``n`` tasks running ``target``, the first running ``first`` when given."""
    tasks: list[dict[str, Any]] = [{"task_id": "t000", "python": {"target": first or target}}]
    tasks += [
        {"task_id": f"t{i:03d}", "upstream": [f"t{i - 1:03d}"], "python": {"target": target}}
        for i in range(1, n)
    ]
    return {"dag_id": "chain", "tasks": tasks}


def measure_fan_out(
    cluster: Cluster,
    workdir: Path,
    n: int,
    runs: int,
    *,
    label: str,
    shell: bool = False,
    others: dict[str, int] | None = None,
) -> dict[str, Any]:
    """Tasks per second from the run's creation to its end, for ``runs`` runs of an ``n``-task fan-out
    (run ids start with ``label``), and the CPU each part of the stack spent per task (median over the
    runs, milliseconds: the scheduler, the registry, the workers together with their task processes,
    and ``others`` by name, e.g. PostgreSQL with its backends). CPU per task is the steadier figure
    on a busy machine: a change that saves a tenth of a millisecond of one service shows there
    first."""
    spec = fan_out_spec(n, shell=shell)
    register(cluster, spec, workdir)
    dag_id = spec["dag_id"]
    rates = []
    cpu: dict[str, list[float]] = {}
    for i in range(runs):
        run_id = f"{label}-{i}-{len(cluster.workers)}"
        trees = _cpu_trees(cluster, others or {})
        before = {name: cpu_seconds(pids) for name, pids in trees.items()}
        schedctl(cluster, "runs", "trigger", dag_id, "--run-id", run_id, "--wait", "--wait-timeout", "600")
        for name, pids in trees.items():
            cpu.setdefault(name, []).append(1000 * (cpu_seconds(pids) - before[name]) / n)
        seconds = cluster.fetchval(
            "SELECT extract(epoch FROM ended_at - created_at) FROM dag_runs "
            "WHERE dag_id = $1 AND run_id = $2",
            dag_id,
            run_id,
        )
        rates.append(n / float(seconds))
    return {
        "tasks": n,
        "runs": runs,
        "tasks_per_s_median": statistics.median(rates),
        "tasks_per_s_best": max(rates),
        "cpu_ms_per_task": {name: statistics.median(values) for name, values in cpu.items()},
    }


def _cpu_trees(cluster: Cluster, others: dict[str, int]) -> dict[str, list[int]]:
    """The processes whose CPU a fan-out counts, by part: the schedulers, the registry, the workers
    (with their task processes) and ``others``, each with its descendants; the api and the web UI
    take no part in a run."""
    trees: dict[str, list[int]] = {}
    for name, pid in {**service_pids(cluster), **others}.items():
        part = name
        if name.startswith("scheduler-"):
            part = "scheduler"
        elif name in cluster.workers:
            part = "workers"
        if part not in ("api", "web"):
            trees.setdefault(part, []).extend([pid, *descendants(pid)])
    return trees


def measure_single_task(cluster: Cluster, workdir: Path, runs: int, *, label: str) -> dict[str, Any]:
    """A one-task DAG: from the run's creation to its task's start, and to the run's end (run ids start
    with ``label``)."""
    register(cluster, {"dag_id": "single", "tasks": [{"task_id": "t", "python": {"target": NOOP}}]}, workdir)
    first, done = [], []
    for i in range(runs):
        schedctl(cluster, "runs", "trigger", "single", "--run-id", f"{label}-{i}", "--wait")
        (row,) = cluster.fetch(
            "SELECT extract(epoch FROM a.started_at - r.created_at) AS first, "
            "extract(epoch FROM r.ended_at - r.created_at) AS done FROM dag_runs r "
            "JOIN task_instances ti ON ti.run_pk = r.id JOIN task_attempts a ON a.attempt_id = ti.attempt_id "
            "WHERE r.dag_id = 'single' AND r.run_id = $1",
            f"{label}-{i}",
        )
        first.append(float(row["first"]) * 1000)
        done.append(float(row["done"]) * 1000)
    return {
        "runs": runs,
        "trigger_to_first_task_ms_median": statistics.median(first),
        "trigger_to_success_ms_median": statistics.median(done),
    }


def measure_chain(cluster: Cluster, workdir: Path, links: int, label: str, first: str = "") -> dict[str, Any]:
    """End of one no-op task to the start of the next, over ``links`` links (the first task runs
    ``first`` when given); also the time each task instance spent queued before a registry claimed it."""
    register(cluster, chain_spec(links + 1, first=first), workdir)
    schedctl(cluster, "runs", "trigger", "chain", "--run-id", label, "--wait", "--wait-timeout", "600")
    rows = cluster.fetch(
        "SELECT ti.task_id, a.started_at, a.ended_at, ti.claimed_at, "
        "extract(epoch FROM ti.claimed_at - ti.queued_at) AS waited FROM task_instances ti "
        "JOIN dag_runs r ON r.id = ti.run_pk JOIN task_attempts a ON a.attempt_id = ti.attempt_id "
        "WHERE r.dag_id = 'chain' AND r.run_id = $1 ORDER BY ti.task_id",
        label,
    )
    gaps = [(b["started_at"] - a["ended_at"]).total_seconds() * 1000 for a, b in itertools.pairwise(rows)]
    claims = [float(r["waited"]) * 1000 for r in rows if r["waited"] is not None]
    # The two halves of a link: the end of one task to the start of the transaction that claimed
    # the next (claimed_at is that transaction's start), and from there to the next task's start.
    to_claim = [(b["claimed_at"] - a["ended_at"]).total_seconds() * 1000 for a, b in itertools.pairwise(rows)]
    to_start = [(b["started_at"] - b["claimed_at"]).total_seconds() * 1000 for b in rows[1:]]
    return {
        "links": len(gaps),
        "gap_ms_median": statistics.median(gaps),
        "gap_ms_p90": percentile(gaps, 90),
        "gap_ms_p99": percentile(gaps, 99),
        "gap_ms_max": max(gaps),
        "queued_to_claimed_ms_median": statistics.median(claims),
        "ended_to_claimed_ms_median": statistics.median(to_claim),
        "claimed_to_started_ms_median": statistics.median(to_start),
        "gaps_ms": gaps,
        # when each link's first task ended (epoch seconds): which links a burst overlapped
        "link_ends": [a["ended_at"].timestamp() for a in rows[:-1]],
    }


def backlog_spec() -> bytes:
    """The spec of the DAG the backlog belongs to: 100 tasks in a queue and pool no worker serves."""
    tasks = [
        pb.TaskSpec(
            task_id=f"t{i}", shell=pb.ShellCommand(command="true"), queue="nobody", pool="backlog_pool"
        )
        for i in range(1, 101)
    ]
    return pb.DagSpec(dag_id="idle_1", tasks=tasks).SerializeToString()


async def add_load(database_url: str, *, dags: int, finished: int, queued: int) -> None:
    """Straight into the store: ``dags`` other DAGs (registered, idle), ``finished`` finished task
    instances (in runs of 100), and ``queued`` task instances queued in a queue no worker serves and
    a pool of their own, so nothing claims them."""
    conn = await asyncpg.connect(asyncpg_dsn(database_url))
    try:
        have = await conn.fetchval("SELECT count(*) FROM dags WHERE dag_id LIKE 'idle\\_%'")
        if dags > have:
            await conn.execute(
                "INSERT INTO dags (dag_id) SELECT 'idle_' || g FROM generate_series($1 + 1, $2) g", have, dags
            )
            await conn.execute(
                "INSERT INTO dag_versions (dag_id, version_hash, spec) SELECT dag_id, 'v1', '\\x'::bytea "
                "FROM dags WHERE dag_id LIKE 'idle\\_%' AND latest_version_id IS NULL"
            )
            await conn.execute(
                "UPDATE dags SET latest_version_id = v.id FROM dag_versions v WHERE v.dag_id = dags.dag_id "
                "AND dags.latest_version_id IS NULL AND dags.dag_id LIKE 'idle\\_%'"
            )
        for state, count, prefix in (("success", finished, "old"), ("queued", queued, "backlog")):
            runs = count // 100
            if not runs:
                continue
            await conn.execute(
                """
                WITH r AS (
                  INSERT INTO dag_runs (dag_id, run_id, dag_version_id, run_type, state, logical_date,
                                        started_at, ended_at)
                  SELECT 'idle_1', $2 || '_' || g,
                         (SELECT latest_version_id FROM dags WHERE dag_id = 'idle_1'),
                         'manual', CASE WHEN $3 = 'success' THEN 'success' ELSE 'running' END,
                         now() - g * interval '1 second', now(), CASE WHEN $3 = 'success' THEN now() END
                  FROM generate_series(1, $1) g RETURNING id)
                INSERT INTO task_instances (run_pk, dag_id, logical_date, task_id, state, try_number,
                                            attempt_id, queue, pool, started_at, ended_at, queued_at)
                SELECT r.id, 'idle_1', now(), 't' || t, $3, 1, gen_random_uuid(),
                       CASE WHEN $3 = 'queued' THEN 'nobody' ELSE 'default' END,
                       CASE WHEN $3 = 'queued' THEN 'backlog_pool' ELSE 'default_pool' END,
                       now(), CASE WHEN $3 = 'success' THEN now() END, now()
                FROM r, generate_series(1, 100) t""",
                runs,
                f"{prefix}{await conn.fetchval('SELECT count(*) FROM dag_runs')}",
                state,
            )
        await conn.execute(
            "INSERT INTO pools (name, slots) VALUES ('backlog_pool', 1000000) ON CONFLICT DO NOTHING"
        )
        await conn.execute("SELECT occupancy_compact()")
        await conn.execute("ANALYZE")
        # The backlog's DAG has the tasks its task instances name, and the leader is told about its
        # runs, as it would have been had they been triggered: it reads them and keeps them in memory.
        await conn.execute(
            "UPDATE dag_versions SET spec = $1, task_count = 100 WHERE dag_id = 'idle_1'", backlog_spec()
        )
        backlog = [r["id"] for r in await conn.fetch("SELECT id FROM dag_runs WHERE run_id LIKE 'backlog%'")]
        for payload in channels.encode_ids(backlog):
            await conn.execute("SELECT pg_notify($1, $2)", channels.RUNS, payload)
    finally:
        await conn.close()
