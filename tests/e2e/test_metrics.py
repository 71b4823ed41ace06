"""Every service serves Prometheus ``/metrics`` over HTTP, and the key metrics move while a DAG runs:
task outcomes and durations, queue depth, running and demand, pool slots, api requests by method
and code, the scheduler's leader status and passes, worker slots and attempt outcomes."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import grpc
import pytest
from prometheus_client.parser import text_string_to_metric_families

from schedd.v1 import api_pb2, api_pb2_grpc
from tests.fixtures.services import RunningCluster
from tests.polling import wait_until

pytestmark = pytest.mark.e2e

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]
DEADLINE = 90.0
DAG = "metrics_dag"


def scrape(address: str) -> Samples:
    with urllib.request.urlopen(f"http://{address}/metrics", timeout=10) as response:
        text = response.read().decode()
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    """The sample ``name`` with exactly ``labels``; 0 when there is none."""
    return samples.get((name, frozenset(labels.items())), 0.0)


def total(samples: Samples, name: str, **labels: str) -> float:
    """The sum of every sample ``name`` whose labels include ``labels``."""
    wanted = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and wanted <= ls)


def test_every_service_serves_metrics_that_move_while_a_dag_runs(
    cluster: RunningCluster, tmp_path: Path
) -> None:
    c = cluster.cluster
    assert {"api", "registry", "scheduler-1", "worker-1", "worker-2"} <= set(c.metrics)
    workers = [c.metrics[name] for name in c.workers]
    api_before = scrape(c.metrics["api"])
    trigger = value(
        api_before, "schedd_api_requests_total", method="schedd.v1.RunService/CreateRun", code="OK"
    )

    for address in workers:
        slots = scrape(address)
        assert value(slots, "schedd_worker_slots", state="used") == 0
        assert value(slots, "schedd_worker_slots", state="free") == c.worker_capacity

    spec = {
        "dag_id": DAG,
        "tasks": [
            {"task_id": "ok", "shell": {"command": "echo ok"}},
            {"task_id": "bad", "shell": {"command": "exit 3"}},
            {"task_id": "slow", "shell": {"command": "sleep 12"}},
            # No worker serves this queue: it stays queued.
            {"task_id": "parked", "queue": "parked", "shell": {"command": "true"}},
        ],
    }
    path = tmp_path / f"{DAG}.json"
    path.write_text(json.dumps(spec))
    assert cluster.schedctl("dags", "register", str(path)).returncode == 0
    assert cluster.schedctl("runs", "trigger", DAG, "--run-id", "r1").returncode == 0
    with grpc.insecure_channel(cluster.api_address) as channel, pytest.raises(grpc.RpcError) as missing:
        api_pb2_grpc.RunServiceStub(channel).GetRun(
            api_pb2.GetRunRequest(name=f"dags/{DAG}/runs/nope"), timeout=30
        )
    assert missing.value.code() == grpc.StatusCode.NOT_FOUND

    registry = c.metrics["registry"]
    # While ``slow`` runs: it is counted as running, in demand, and in a worker's used slots.
    wait_until(
        "the slow task shows as running in the registry and as a used slot of a worker",
        lambda: (
            value(scrape(registry), "schedd_queue_running", queue="default") >= 1
            and sum(value(scrape(w), "schedd_worker_slots", state="used") for w in workers) >= 1
        ),
        DEADLINE,
        interval=0.2,
    )
    wait_until(
        "the default queue's demand counts the running task",
        lambda: value(scrape(registry), "schedd_queue_demand", queue="default") >= 1,
        DEADLINE,
        interval=0.2,
    )

    def outcomes_counted() -> bool:
        s = scrape(registry)
        return (
            value(s, "schedd_task_outcomes_total", dag=DAG, state="success") >= 2
            and value(s, "schedd_task_outcomes_total", dag=DAG, state="failed") >= 1
        )

    wait_until(
        "the registry counted two successes and a failure of the DAG",
        outcomes_counted,
        DEADLINE,
        interval=0.2,
    )
    s = scrape(registry)
    assert value(s, "schedd_task_duration_seconds_count", dag=DAG) == 3
    assert value(s, "schedd_task_duration_seconds_sum", dag=DAG) >= 12
    assert value(s, "schedd_task_queued_to_running_seconds_count") >= 3
    assert value(s, "schedd_registry_assignments_total") >= 3
    assert value(s, "schedd_registry_workers") == 2
    wait_until(
        "the parked task is queued and in demand; nothing runs any more",
        lambda: (
            value(scrape(registry), "schedd_queue_depth", queue="parked") == 1
            and value(scrape(registry), "schedd_queue_demand", queue="parked") == 1
            and value(scrape(registry), "schedd_queue_running", queue="default") == 0
        ),
        DEADLINE,
        interval=0.2,
    )
    wait_until(
        "the default pool has one slot used (the parked task) and 127 free",
        lambda: (
            value(scrape(registry), "schedd_pool_slots", pool="default_pool", state="used") == 1
            and value(scrape(registry), "schedd_pool_slots", pool="default_pool", state="free") == 127
        ),
        DEADLINE,
        interval=0.2,
    )

    worker_samples = [scrape(w) for w in workers]
    assert sum(value(w, "schedd_worker_attempts_total", outcome="succeeded") for w in worker_samples) == 2
    assert sum(value(w, "schedd_worker_attempts_total", outcome="failed") for w in worker_samples) == 1
    for w in worker_samples:
        assert value(w, "schedd_worker_slots", state="free") == c.worker_capacity

    api_after = scrape(c.metrics["api"])
    method = "schedd.v1.RunService/CreateRun"
    assert value(api_after, "schedd_api_requests_total", method=method, code="OK") == trigger + 1
    assert (
        value(api_after, "schedd_api_requests_total", method="schedd.v1.RunService/GetRun", code="NOT_FOUND")
        >= 1
    )
    assert value(api_after, "schedd_api_request_seconds_count", method=method) >= 1

    leaders = [scrape(c.metrics[p.name]) for p in c.schedulers.values()]
    assert [value(s, "schedd_scheduler_is_leader") for s in leaders] == [1.0]
    (leader,) = leaders
    assert value(leader, "schedd_scheduler_elections_total") >= 1
    assert value(leader, "schedd_scheduler_passes_total") >= 1
    assert value(leader, "schedd_scheduler_tasks_queued_total") >= 4
    assert value(leader, "schedd_scheduler_pass_seconds_count") >= 1
    cluster.assert_healthy()
