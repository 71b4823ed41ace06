"""Fail-over and footprint figures of a running cluster.

- fail-over: from a kill -9 or SIGTERM of the leader, or from a leader frozen (by a fault point)
  while it holds the fence lock, to the next committed scheduling pass of a new term;
- footprint: the proportional set size (PSS) of each service with its task processes, and the CPU
  each uses while the cluster is idle.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from schedd_devstack.faults import arm
from schedd_devstack.services import Cluster, ServiceProcess
from tests.benchmarks.common import NAP, register, schedctl
from tests.benchmarks.process_stats import cpu_seconds, descendants, pss_kib, service_pids
from tests.benchmarks.workloads import chain_spec


def _first_pass_after(cluster: Cluster, token: int, since: float) -> float:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        committed = cluster.fetchval(
            "SELECT extract(epoch FROM min(committed_at)) FROM scheduler_passes WHERE token = $1", token
        )
        if committed is not None:
            return float(committed) - since
        time.sleep(0.01)
    raise RuntimeError("no scheduling pass after the fail-over")


def measure_failover(cluster: Cluster, how: str, workdir: Path, faults: Path) -> float:
    """Seconds from the fault (``kill``, ``term`` or ``frozen``) to the new term's first committed pass;
    afterwards a fresh standby is started for the next measurement, and the chain's run has ended
    (a cluster started later on the same database would run the rest of it)."""
    token, leader = cluster.wait_for_leader()
    # Still running after the fault (200 links of 20 ms): a pass that changes nothing is not
    # recorded, and 200 no-op links, handed from task to task by the registry, could end within 0.5 s.
    register(cluster, chain_spec(200, NAP), workdir)
    run_id = f"failover-{how}-{token}"
    schedctl(cluster, "runs", "trigger", "chain", "--run-id", run_id)
    time.sleep(0.5)  # let the chain get going, so a pass is due right after the fail-over
    frozen: ServiceProcess | None = None
    if how == "frozen":
        hit = arm(faults, "fence.locked", "stop")
        deadline = time.monotonic() + 30
        while not hit.exists():
            if time.monotonic() > deadline:
                raise RuntimeError("the leader never reached the fence lock")
            time.sleep(0.005)
        sent = time.time()
        frozen = leader
    else:
        sent = time.time()
        leader.kill() if how == "kill" else leader.terminate()
    try:
        new_token, _ = cluster.wait_for_leader(above=token, timeout=60)
        seconds = _first_pass_after(cluster, new_token, sent)
    finally:
        if frozen is not None:
            frozen.resume()
    if frozen is not None:
        frozen.terminate()
    cluster.add_scheduler()
    _wait_until_run_ended(cluster, "chain", run_id)
    return seconds


def _wait_until_run_ended(cluster: Cluster, dag_id: str, run_id: str) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        ended = cluster.fetchval(
            "SELECT ended_at IS NOT NULL FROM dag_runs WHERE dag_id = $1 AND run_id = $2", dag_id, run_id
        )
        if ended:
            return
        time.sleep(0.05)
    raise RuntimeError(f"run {dag_id}/{run_id} did not end within 120 s")


def measure_footprint(cluster: Cluster, idle_seconds: float, others: dict[str, int]) -> dict[str, Any]:
    """PSS and idle CPU of each service (with its children) and of ``others`` (name -> pid: PostgreSQL,
    etcd), and the services' totals."""
    services = service_pids(cluster)
    trees = {name: [pid, *descendants(pid)] for name, pid in {**services, **others}.items()}
    before = {name: cpu_seconds(pids) for name, pids in trees.items()}
    time.sleep(idle_seconds)
    each = {
        name: {
            "pss_mb": pss_kib(pids) / 1024,
            "idle_cpu_percent": 100 * (cpu_seconds(pids) - before[name]) / idle_seconds,
        }
        for name, pids in trees.items()
    }
    return {
        "services_pss_mb": sum(each[n]["pss_mb"] for n in services),
        "services_idle_cpu_percent": sum(each[n]["idle_cpu_percent"] for n in services),
        "each": each,
    }
