"""An idle stack sleeps: a worker that holds no attempt heartbeats every idle interval, and work that
reaches it after its permit to start lapsed starts after one heartbeat round trip instead of being
handed back (``schedd_worker.heartbeats``, ``schedd_worker.held_assignments``)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest

from schedd_devstack.services import Cluster
from tests.fixtures.services import cluster_on_own_database, schedctl

pytestmark = pytest.mark.e2e

#: Granted by the registry; heartbeats every second while busy, an ack window of 3 s.
IDLE_INTERVAL = 6.0
ACK_WINDOW = 3.0
#: Bound on waiting for the stored heartbeat to age past the ack window.
WAIT_SECONDS = 30.0


@pytest.fixture(scope="module")
def idle_cluster(
    database_url: str, etcd_endpoints: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    with cluster_on_own_database(
        database_url,
        etcd_endpoints,
        tmp_path_factory.mktemp("idle"),
        workers=1,
        registry_env={"SCHEDD_IDLE_HEARTBEAT_INTERVAL": str(IDLE_INTERVAL)},
    ) as cluster:
        spec = {"dag_id": "one", "tasks": [{"task_id": "t", "shell": {"command": "true"}}]}
        path = tmp_path_factory.mktemp("dags") / "one.json"
        path.write_text(json.dumps(spec))
        assert schedctl(cluster.api_address, "dags", "register", str(path), "--unpause").returncode == 0
        yield cluster


def _run(cluster: Cluster, run_id: str) -> None:
    done = schedctl(
        cluster.api_address, "runs", "trigger", "one", "--run-id", run_id, "--wait", "--wait-timeout", "60"
    )
    assert done.returncode == 0, done.stdout + done.stderr


def _heartbeat(cluster: Cluster) -> tuple[object, float]:
    (row,) = cluster.fetch(
        "SELECT heartbeat_at, extract(epoch FROM now() - heartbeat_at) AS age FROM workers "
        "WHERE state = 'active'"
    )
    return row["heartbeat_at"], float(row["age"])


def test_an_idle_worker_heartbeats_every_idle_interval(idle_cluster: Cluster) -> None:
    _run(idle_cluster, "warm")  # past start-up; the worker holds nothing once its result is acknowledged
    seen = set()
    window_end = time.monotonic() + IDLE_INTERVAL + 4
    while time.monotonic() < window_end:
        seen.add(_heartbeat(idle_cluster)[0])
        time.sleep(0.1)
    # Ten seconds: the one stored as the run ended, perhaps one more sent while its result waited
    # for its ack, then idle ones six seconds apart (one a second would store about ten).
    assert 2 <= len(seen) <= 4, sorted(seen)  # type: ignore[type-var]


def test_work_reaching_a_worker_whose_permit_lapsed_starts_without_being_handed_back(
    idle_cluster: Cluster,
) -> None:
    # Busy just before, so the registry must have learnt from its heartbeats that the worker went
    # idle: taken for silent instead, it would be passed over and the run would wait forever.
    _run(idle_cluster, "busy-before")
    deadline = time.monotonic() + WAIT_SECONDS
    # Stored after it was sent: once it is older than the ack window, so is the worker's last ack.
    while _heartbeat(idle_cluster)[1] <= ACK_WINDOW + 0.5:
        assert time.monotonic() < deadline, "the idle worker's heartbeat never aged past its ack window"
        time.sleep(0.1)
    _run(idle_cluster, "after-lapse")
    attempts = idle_cluster.fetch(
        "SELECT a.state, a.error FROM task_attempts a JOIN task_instances ti ON ti.id = a.ti_id "
        "JOIN dag_runs r ON r.id = ti.run_pk WHERE r.run_id = 'after-lapse'"
    )
    assert [a["state"] for a in attempts] == ["success"], attempts  # one attempt: none handed back
