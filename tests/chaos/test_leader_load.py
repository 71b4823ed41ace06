"""A flood of task instances must not livelock the leader: while 300,000 task instances triggered at
once are planned, another DAG's runs, triggered once a second, all start and succeed, and the
leader keeps its term throughout. How late those runs start is measured by ``make bench`` (group
``flood``, ``tests/benchmarks/flood.py``) and printed here, not asserted."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from schedd_devstack.services import Cluster
from tests.benchmarks.flood import measure_flood

pytestmark = [pytest.mark.chaos, pytest.mark.e2e]

RUNS = 30
TASKS_PER_RUN = 10_000


@pytest.fixture
def cluster(fresh_database_url: str, etcd_endpoints: str, tmp_path: Path) -> Iterator[Cluster]:
    cluster = Cluster(
        fresh_database_url,
        etcd_endpoints,
        tmp_path / "logs",
        workers=1,
        service_env={"SCHEDD_LEASE_TTL": "2", "SCHEDD_RENEW_DEADLINE": "1.4"},
    )
    cluster.start()
    yield cluster
    cluster.stop()
    cluster.release_election()


def test_three_hundred_thousand_task_instances_do_not_stall_other_runs(
    cluster: Cluster, tmp_path: Path
) -> None:
    token, leader = cluster.wait_for_leader()
    figures = measure_flood(cluster, tmp_path, RUNS, TASKS_PER_RUN)  # every probe run succeeded
    print(
        f"\n{figures['task_instances']:,} task instances created in {figures['created_seconds']:.1f}s; "
        f"{figures['probe_runs']} probe runs started at most {figures['probe_start_delay_s_max']:.2f}s "
        "after their trigger"
    )
    assert figures["probe_runs"] >= 5
    assert cluster.fence()[0] == token, "the leader lost its term during the flood"
    log = leader.log_tail(500_000)
    assert "fail-stop" not in log and "no keep-alive" not in log, log[-3000:]
