"""A flood of task instances must not livelock the leader: 300,000 task instances triggered at once
are planned in bounded passes while another DAG's runs keep starting within seconds, and the
leader keeps its term throughout. Figures are printed; the bounds are generous liveness bounds."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
import yaml

from schedd.v1 import api_pb2, api_pb2_grpc
from schedd_devstack.services import Cluster
from tests.fixtures.services import schedctl as run_schedctl

pytestmark = [pytest.mark.chaos, pytest.mark.e2e]

RUNS = 30
TASKS_PER_RUN = 10_000
#: How late a probe run may start while the flood is planned: "within seconds".
PROBE_BOUND = 10.0


@pytest.fixture
def cluster(fresh_database_url: str, etcd_endpoints: str, tmp_path: Path) -> Iterator[Cluster]:
    cluster = Cluster(
        fresh_database_url,
        etcd_endpoints,
        tmp_path / "logs",
        workers=1,
        service_env={"SCHEDD_LEASE_TTL": "2", "SCHEDD_RENEW_DEADLINE": "1.4", "SCHEDD_RETRY_PERIOD": "0.3"},
    )
    cluster.start()
    yield cluster
    cluster.stop()
    cluster.release_election()


def schedctl(cluster: Cluster, *args: str) -> None:
    result = run_schedctl(cluster.api_address, *args)
    assert result.returncode == 0, result.stdout + result.stderr


def register(cluster: Cluster, directory: Path, spec: dict[str, object]) -> None:
    path = directory / "dag.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    schedctl(cluster, "dags", "register", str(path))


def test_three_hundred_thousand_task_instances_do_not_stall_other_runs(
    cluster: Cluster, tmp_path: Path
) -> None:
    token, leader = cluster.wait_for_leader()
    schedctl(cluster, "pools", "set", "bulk", "1000000")
    register(
        cluster,
        tmp_path,
        {
            "dag_id": "flood",
            "tasks": [
                {"task_id": f"t{i}", "queue": "nowhere", "pool": "bulk", "shell": {"command": "true"}}
                for i in range(TASKS_PER_RUN)
            ],
        },
    )
    register(
        cluster, tmp_path, {"dag_id": "probe", "tasks": [{"task_id": "p", "shell": {"command": "true"}}]}
    )
    with grpc.insecure_channel(cluster.api_address) as channel:
        runs = api_pb2_grpc.RunServiceStub(channel)
        began = time.monotonic()
        for i in range(RUNS):
            runs.CreateRun(api_pb2.CreateRunRequest(parent="dags/flood", run_id=f"flood-{i}"), timeout=30)
        probes: list[str] = []
        while True:
            created = int(cluster.fetchval("SELECT count(*) FROM task_instances WHERE dag_id = 'flood'"))
            if created == RUNS * TASKS_PER_RUN and len(probes) >= 5:
                break
            assert time.monotonic() - began < 300, f"only {created} task instances after 300 s"
            probe = f"probe-{len(probes)}"
            runs.CreateRun(api_pb2.CreateRunRequest(parent="dags/probe", run_id=probe), timeout=30)
            probes.append(probe)
            time.sleep(1.0)
        flood_seconds = time.monotonic() - began
    deadline = time.monotonic() + 60
    while cluster.fetchval("SELECT count(*) FROM dag_runs WHERE dag_id = 'probe' AND state <> 'success'"):
        assert time.monotonic() < deadline, "the probe runs did not all succeed"
        time.sleep(0.1)
    delays = [
        float(r["delay"])
        for r in cluster.fetch(
            "SELECT EXTRACT(EPOCH FROM ti.started_at - r.created_at) AS delay FROM dag_runs r "
            "JOIN task_instances ti ON ti.run_pk = r.id WHERE r.dag_id = 'probe' ORDER BY r.id"
        )
    ]
    print(
        f"\n{RUNS * TASKS_PER_RUN:,} task instances created in {flood_seconds:.1f}s; "
        f"{len(delays)} probe runs started {min(delays):.2f}-{max(delays):.2f}s after their trigger"
    )
    assert max(delays) < PROBE_BOUND, delays
    assert cluster.fence()[0] == token, "the leader lost its term during the flood"
    log = leader.log_tail(500_000)
    assert "fail-stop" not in log and "no keep-alive" not in log, log[-3000:]
