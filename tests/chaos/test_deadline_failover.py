"""A missed deadline fires once across a leader failover: the leader is killed at the point that
matters, after its look found the miss and before the fenced transaction that records it
(``deadlines.detected``), or just after that transaction committed and before anything else
(``deadlines.recorded``). The next leader records the miss (first case) or finds it recorded
(second case): one ``deadline_misses`` row, one outbox event, one webhook delivery."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from schedd_devstack.faults import arm
from schedd_devstack.services import Cluster
from tests.e2e.receivers import post_server
from tests.fixtures.services import schedctl as run_schedctl
from tests.polling import wait_until

pytestmark = [pytest.mark.chaos, pytest.mark.e2e]

TTL = 2
FAST_LEASE = {"SCHEDD_LEASE_TTL": str(TTL), "SCHEDD_RENEW_DEADLINE": "1.4"}
LIVENESS = TTL + 30.0
#: How long to keep watching for a second delivery after the first one.
QUIET = 3.0


@pytest.fixture
def make_cluster(
    fresh_database_url: str, etcd_endpoints: str, tmp_path: Path
) -> Iterator[Callable[..., Cluster]]:
    clusters: list[Cluster] = []

    def make(**kwargs: Any) -> Cluster:
        cluster = Cluster(
            fresh_database_url, etcd_endpoints, tmp_path / "logs", service_env=FAST_LEASE, **kwargs
        )
        clusters.append(cluster)
        cluster.start()
        return cluster

    yield make
    for cluster in clusters:
        cluster.stop()
        cluster.release_election()


@pytest.mark.parametrize("point", ["deadlines.detected", "deadlines.recorded"])
def test_a_missed_deadline_fires_once_when_the_leader_dies_around_recording_it(
    make_cluster: Callable[..., Cluster], tmp_path: Path, point: str
) -> None:
    faults = tmp_path / "faults"
    cluster = make_cluster(schedulers=2, workers=1, scheduler_env={"SCHEDD_FAULTS": str(faults)})
    token, _ = cluster.wait_for_leader()
    with post_server() as hooks:
        spec = {
            "dag_id": "late",
            "deadline": {
                "reference": "DEADLINE_REFERENCE_QUEUED_AT",
                "interval": "2s",
                "callbacks": [{"webhook_url": hooks.url("/missed")}],
            },
            "tasks": [{"task_id": "slow", "upstream": [], "shell": {"command": "sleep 120"}}],
        }
        path = tmp_path / "late.yaml"
        path.write_text(yaml.safe_dump(spec, sort_keys=False))
        hit = arm(faults, point, "kill")  # fires only once a look finds a miss
        for args in (("dags", "register", str(path)), ("runs", "trigger", "late", "--run-id", "r1")):
            result = run_schedctl(cluster.api_address, *args)
            assert result.returncode == 0, result.stderr
        wait_until(f"the leader to reach {point}", hit.exists, LIVENESS, interval=0.02)
        killed = int(hit.read_text())
        for proc in cluster.schedulers.values():
            if proc.pid == killed:
                proc.kill()  # reaps it: the cluster knows it is gone on purpose
        new_token, leader = cluster.wait_for_leader(above=token, timeout=LIVENESS)
        assert leader.pid != killed
        wait_until("the webhook of the miss", lambda: hooks.at("/missed"), LIVENESS)
        time.sleep(QUIET)  # a second record or delivery would come within this
        posts = hooks.at("/missed")
        misses = cluster.fetch("SELECT run_pk, fence_token FROM deadline_misses")
        events = cluster.fetch("SELECT id FROM outbox WHERE payload->>'event' = 'deadline_missed'")
        run_id = run_schedctl(cluster.api_address, "runs", "cancel", "late/r1")
        assert run_id.returncode == 0, run_id.stderr
    assert len(misses) == 1 and len(events) == 1
    assert len(posts) == 1 and posts[0].body["event_id"] == events[0]["id"]
    expected_term = new_token if point == "deadlines.detected" else token
    assert misses[0]["fence_token"] == expected_term
    print(
        f"\n{point}: leader {killed} killed; the miss was recorded once, by term {misses[0]['fence_token']}"
    )
