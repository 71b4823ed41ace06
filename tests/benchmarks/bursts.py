"""Isolation under bursts: a small DAG's chain, quiet and while others' work lands at once.

- ``runs_burst``: 1,000 runs of a 5-task DAG created at once through the api; the tasks/s they run
  at (from the first creation to the last run's end), and the chain's link latency measured
  meanwhile: of all its links, and of those that began while the burst's tasks ran
  (``chain_during``), and how long another client's one ``CreateRun`` takes, sent once the burst's
  first run is created (``other_callers_run_created_ms``). The chain is triggered first and the
  burst once its run exists, and the chain's first task takes 2 s, so its links run while the
  burst's tasks do: triggered with the burst, the chain's run waited behind the burst's 1,000
  creations at the api (4.5 s in a trace, before the api's turns by caller) and no link overlapped
  the burst in about half the runs;
- ``runs_burst_own_pool``: the same with the burst's tasks in a pool of their own of 8 slots
  (``BULK_POOL``), as a deployment keeps bulk work from taking every core (docs/scheduling.md,
  "Latency-sensitive DAGs beside bulk work");
- ``backlog_burst``: 100 runs of a 1,000-task DAG in a queue no worker serves (100k task instances
  the leader plans and queues), and the chain measured right after they were created, while the
  leader takes them in.

Every chain figure is also given as a ratio to the chain measured quiet, on the same cluster just
before (the target: within 2x). The DAGs of the bursts are deleted with their runs afterwards, so
what follows measures an empty store again.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import grpc

from schedd.v1 import api_pb2, api_pb2_grpc
from schedd_devstack.services import Cluster
from tests.benchmarks.common import DOZE, NOOP, register
from tests.benchmarks.workloads import measure_chain

RPC_SECONDS = 120.0


def _chain_5(dag_id: str, pool: str = "") -> dict[str, Any]:
    tasks: list[dict[str, Any]] = [{"task_id": "t0", "python": {"target": NOOP}}]
    tasks += [
        {"task_id": f"t{i}", "upstream": [f"t{i - 1}"], "python": {"target": NOOP}} for i in range(1, 5)
    ]
    for task in tasks if pool else []:
        task["pool"] = pool
    return {"dag_id": dag_id, "max_active_runs": 1000, "tasks": tasks}


def _one_task(dag_id: str) -> dict[str, Any]:
    return {"dag_id": dag_id, "tasks": [{"task_id": "t", "python": {"target": NOOP}}]}


#: The backlog's own pool: queued task instances hold pool slots, so a backlog in the default pool
#: would hold back everything else by design (as the growth group's backlog has its own).
BACKLOG_POOL = "burst_backlog"


def _backlog(dag_id: str) -> dict[str, Any]:
    tasks = [
        {"task_id": f"t{i:04d}", "shell": {"command": "true"}, "queue": "nobody", "pool": BACKLOG_POOL}
        for i in range(1000)
    ]
    return {"dag_id": dag_id, "max_active_runs": 100, "tasks": tasks}


def _set_pool(cluster: Cluster, pool: str, slots: int) -> None:
    with grpc.insecure_channel(cluster.api_address) as channel:
        pools = api_pb2_grpc.PoolServiceStub(channel)
        pools.SetPool(api_pb2.SetPoolRequest(pool=pool, slots=slots), timeout=RPC_SECONDS)


def _create_runs(cluster: Cluster, dag_id: str, count: int, beside: Callable[[], None] | None = None) -> None:
    """``count`` runs of ``dag_id`` created at once (every request in flight before the first
    answer); ``beside()`` is called once the first is answered, while the rest are being created."""
    with grpc.insecure_channel(cluster.api_address) as channel:
        runs = api_pb2_grpc.RunServiceStub(channel)
        calls: list[Future[Any]] = [
            runs.CreateRun.future(
                api_pb2.CreateRunRequest(parent=f"dags/{dag_id}", run_id=f"burst-{i:05d}"),
                timeout=RPC_SECONDS,
            )
            for i in range(count)
        ]
        if beside is not None:
            answered = threading.Event()
            for call in calls:
                call.add_done_callback(lambda _: answered.set())
            if not answered.wait(RPC_SECONDS):
                raise TimeoutError(f"{dag_id}: none of {count} runs created in {RPC_SECONDS:g} s")
            beside()
        for call in calls:
            call.result()


def _one_run_created_ms(cluster: Cluster, dag_id: str, run_id: str) -> float:
    """Milliseconds to have one run of ``dag_id`` created, from another client's connection (gRPC
    shares one connection between a process's channels to one address unless told not to)."""
    with grpc.insecure_channel(
        cluster.api_address, options=[("grpc.use_local_subchannel_pool", 1)]
    ) as channel:
        runs = api_pb2_grpc.RunServiceStub(channel)
        grpc.channel_ready_future(channel).result(timeout=RPC_SECONDS)
        began = time.perf_counter()
        runs.CreateRun(api_pb2.CreateRunRequest(parent=f"dags/{dag_id}", run_id=run_id), timeout=RPC_SECONDS)
        return (time.perf_counter() - began) * 1000


def _delete(cluster: Cluster, dag_id: str) -> None:
    with grpc.insecure_channel(cluster.api_address) as channel:
        dags = api_pb2_grpc.DagServiceStub(channel)
        dags.DeleteDag(api_pb2.DeleteDagRequest(name=f"dags/{dag_id}", cancel_runs=True), timeout=RPC_SECONDS)


def _chain_beside(
    cluster: Cluster, workdir: Path, links: int, label: str, burst: Callable[[], None], first: str = ""
) -> dict[str, Any]:
    """The chain (its first task running ``first`` when given) measured in a thread while
    ``burst()`` runs in this one."""
    measured: dict[str, Any] = {}
    failed: list[BaseException] = []

    def chain() -> None:
        try:
            measured.update(measure_chain(cluster, workdir, links, label, first=first))
        except BaseException as exc:  # handed to the caller's thread below
            failed.append(exc)

    thread = threading.Thread(target=chain)
    thread.start()
    burst()
    thread.join(timeout=900)
    if failed:
        raise RuntimeError(f"the chain measured beside the burst ({label}) failed") from failed[0]
    if thread.is_alive():
        raise TimeoutError(f"the chain measured beside the burst ({label}) did not end in 900 s")
    return measured


def _wait_run_created(cluster: Cluster, dag_id: str, run_id: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    query = "SELECT count(*) FROM dag_runs WHERE dag_id = $1 AND run_id = $2"
    while cluster.fetchval(query, dag_id, run_id) < 1:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{dag_id}: run {run_id} not created in {timeout:g} s")
        time.sleep(0.01)


def _wait_ended(cluster: Cluster, dag_id: str, count: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    query = "SELECT count(*) FROM dag_runs WHERE dag_id = $1 AND state IN ('success', 'failed')"
    while cluster.fetchval(query, dag_id) < count:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{dag_id}: {count} runs not ended in {timeout:g} s")
        time.sleep(0.1)


#: The pool the second 1,000-run burst's tasks run in, so that it leaves the machine headroom.
BULK_POOL, BULK_SLOTS = "burst_bulk", 8


def measure_bursts(cluster: Cluster, workdir: Path, links: int, runs: int = 1000) -> dict[str, Any]:
    quiet = measure_chain(cluster, workdir, links, "quiet")
    register(cluster, _one_task("bystander"), workdir)
    runs_burst = _runs_burst(cluster, workdir, links, runs, quiet, "during-runs")
    _set_pool(cluster, BULK_POOL, BULK_SLOTS)
    pooled = _runs_burst(cluster, workdir, links, runs, quiet, "during-pooled-runs", pool=BULK_POOL)
    _delete(cluster, "bystander")

    _set_pool(cluster, BACKLOG_POOL, 100_000)
    register(cluster, _backlog("backlog100k"), workdir)
    during_backlog = _chain_beside(
        cluster, workdir, links, "during-backlog", lambda: _create_runs(cluster, "backlog100k", 100)
    )
    _delete(cluster, "backlog100k")
    return {
        "quiet": _figures(quiet),
        "runs_burst": runs_burst,
        "runs_burst_own_pool": {"pool_slots": BULK_SLOTS, **pooled},
        "backlog_burst": {
            "task_instances": 100 * 1000,
            "chain": _figures(during_backlog),
            "chain_median_x_quiet": during_backlog["gap_ms_median"] / quiet["gap_ms_median"],
        },
    }


def _runs_burst(
    cluster: Cluster,
    workdir: Path,
    links: int,
    runs: int,
    quiet: dict[str, Any],
    label: str,
    pool: str = "",
) -> dict[str, Any]:
    """``runs`` runs of a 5-task DAG (its tasks in ``pool`` when given) created at once beside the
    chain (run ``label``), and another client's one run created during them."""
    dag_id = f"burst5_{pool}" if pool else "burst5"
    register(cluster, _chain_5(dag_id, pool), workdir)
    started = time.monotonic()
    bystander: list[float] = []

    def burst() -> None:
        _wait_run_created(cluster, "chain", label, timeout=RPC_SECONDS)
        _create_runs(
            cluster, dag_id, runs, lambda: bystander.append(_one_run_created_ms(cluster, "bystander", label))
        )

    burst_began = time.time()
    during = _chain_beside(cluster, workdir, links, label, burst, first=DOZE)
    _wait_ended(cluster, dag_id, runs, timeout=900)
    tasks_per_s = 5 * runs / (time.monotonic() - started)
    burst_ended = cluster.fetchval(
        "SELECT extract(epoch FROM max(ended_at))::float8 FROM task_instances WHERE dag_id = $1", dag_id
    )
    overlapped = [
        gap
        for gap, end in zip(during["gaps_ms"], during["link_ends"], strict=True)
        if burst_began <= end <= burst_ended
    ]
    _delete(cluster, dag_id)
    return {
        "runs": runs,
        "tasks_per_s": tasks_per_s,
        "chain": _figures(during),
        "chain_median_x_quiet": during["gap_ms_median"] / quiet["gap_ms_median"],
        "other_callers_run_created_ms": bystander[0],
        **_overlapping(overlapped, quiet),
    }


def _figures(chain: dict[str, Any]) -> dict[str, float]:
    gaps = chain["gaps_ms"]
    return {"gap_ms_median": statistics.median(gaps), "gap_ms_p99": chain["gap_ms_p99"]}


def _overlapping(gaps: list[float], quiet: dict[str, Any]) -> dict[str, Any]:
    """The figures of the chain's links that began while the burst's tasks ran (none: no figures)."""
    if not gaps:
        return {"chain_during": {"links": 0}}
    median = statistics.median(gaps)
    return {
        "chain_during": {"links": len(gaps), "gap_ms_median": median, "gap_ms_max": max(gaps)},
        "chain_during_median_x_quiet": median / quiet["gap_ms_median"],
    }
