"""The benchmark's flood workload: ``runs`` runs of a DAG of ``tasks`` tasks (in a queue no worker
serves) triggered at once, while a one-task probe DAG is triggered once a second until the flood's
task instances are all created. Figures: how long creating them took and how late each probe run's
task started after its trigger. ``tests/chaos/test_leader_load.py`` runs it and asserts what must
hold (the probes succeed, the leader keeps its term); how fast is measured here."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import grpc

from schedd.v1 import api_pb2, api_pb2_grpc
from schedd_devstack.services import Cluster
from tests.benchmarks.common import register, schedctl
from tests.polling import wait_until

#: Longest the flood's task instances may take to be created, and the probes to succeed after.
FLOOD_SECONDS = 300.0
PROBES_SECONDS = 60.0
#: How often a probe run is triggered while the flood is planned (one a second).
PROBE_EVERY = 1.0


def _created(cluster: Cluster) -> int:
    return int(cluster.fetchval("SELECT count(*) FROM task_instances WHERE dag_id = 'flood'"))


def measure_flood(cluster: Cluster, workdir: Path, runs: int, tasks: int, probes: int = 5) -> dict[str, Any]:
    """Trigger the flood and the probes; figures once every probe run succeeded."""
    schedctl(cluster, "pools", "set", "bulk", "1000000")
    flood = [
        {"task_id": f"t{i}", "queue": "nowhere", "pool": "bulk", "shell": {"command": "true"}}
        for i in range(tasks)
    ]
    register(cluster, {"dag_id": "flood", "tasks": flood}, workdir)
    register(cluster, {"dag_id": "probe", "tasks": [{"task_id": "p", "shell": {"command": "true"}}]}, workdir)
    triggered: list[str] = []
    with grpc.insecure_channel(cluster.api_address) as channel:
        stub = api_pb2_grpc.RunServiceStub(channel)
        began = time.monotonic()
        for i in range(runs):
            stub.CreateRun(api_pb2.CreateRunRequest(parent="dags/flood", run_id=f"flood-{i}"), timeout=30)
        while _created(cluster) < runs * tasks or len(triggered) < probes:
            assert time.monotonic() - began < FLOOD_SECONDS, (
                f"only {_created(cluster)} task instances created"
            )
            probe = f"probe-{len(triggered)}"
            stub.CreateRun(api_pb2.CreateRunRequest(parent="dags/probe", run_id=probe), timeout=30)
            triggered.append(probe)
            time.sleep(PROBE_EVERY)  # the pace of the probes, not a wait for anything
        flood_seconds = time.monotonic() - began
    unfinished = "SELECT count(*) FROM dag_runs WHERE dag_id = 'probe' AND state <> 'success'"
    wait_until("every probe run to succeed", lambda: cluster.fetchval(unfinished) == 0, PROBES_SECONDS)
    delays = [
        float(r["delay"])
        for r in cluster.fetch(
            "SELECT EXTRACT(EPOCH FROM ti.started_at - r.created_at) AS delay FROM dag_runs r "
            "JOIN task_instances ti ON ti.run_pk = r.id WHERE r.dag_id = 'probe' ORDER BY r.id"
        )
    ]
    return {
        "task_instances": runs * tasks,
        "created_seconds": flood_seconds,
        "probe_runs": len(triggered),
        "probe_start_delay_s_max": max(delays),
        "probe_start_delay_s": delays,
    }
