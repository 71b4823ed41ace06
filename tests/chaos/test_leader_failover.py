"""Leadership under crashes, pauses and partitions, with real scheduler processes, etcd and PostgreSQL.

Fail-over times are printed (and measured properly by ``make bench``); the tests assert
safety (one leader, no stale write lands) and liveness with generous bounds, not speed.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from schedd_devstack.services import Cluster, ServiceProcess
from tests.chaos.invariants import FenceWatch, check_passes_in_token_order
from tests.fixtures.tcp_proxy import TcpProxy
from tests.polling import wait_until

pytestmark = [pytest.mark.chaos, pytest.mark.e2e]

TTL = 2
FAST_LEASE = {"SCHEDD_LEASE_TTL": str(TTL), "SCHEDD_RENEW_DEADLINE": "1.4"}
#: Liveness bound: generous on purpose, so a loaded machine does not fail the suite.
LIVENESS = TTL + 15.0

CHAIN = """
dag_id: chain
tasks:
  - {task_id: t1, shell: {command: "sleep 0.05"}}
  - {task_id: t2, upstream: [t1], shell: {command: "sleep 0.05"}}
  - {task_id: t3, upstream: [t2], shell: {command: "sleep 0.05"}}
"""


@pytest.fixture
def make_cluster(
    fresh_database_url: str, etcd_endpoints: str, tmp_path: Path
) -> Iterator[Callable[[int], Cluster]]:
    clusters: list[Cluster] = []

    def make(schedulers: int) -> Cluster:
        cluster = Cluster(
            fresh_database_url,
            etcd_endpoints,
            tmp_path / f"c{len(clusters)}",
            schedulers=schedulers,
            workers=1,
            service_env=FAST_LEASE,
        )
        clusters.append(cluster)
        cluster.start()
        return cluster

    yield make
    for cluster in clusters:
        cluster.stop()
        cluster.release_election()


def schedctl(cluster: Cluster, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    import sys

    return subprocess.run(
        [sys.executable, "-m", "schedctl.main", "--api", cluster.api_address, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def register_chain(cluster: Cluster, tmp_path: Path) -> None:
    path = tmp_path / "chain.yaml"
    path.write_text(CHAIN)
    result = schedctl(cluster, "dags", "register", str(path))
    assert result.returncode == 0, result.stderr


def run_succeeds(cluster: Cluster, run_id: str) -> None:
    result = schedctl(
        cluster, "runs", "trigger", "chain", "--run-id", run_id, "--wait", "--wait-timeout", "60"
    )
    assert result.returncode == 0, result.stdout + result.stderr


def leaders(cluster: Cluster) -> list[str]:
    return [i for i, p in cluster.schedulers.items() if p.alive and cluster.scheduler_is_leader(i)]


def identity_of(cluster: Cluster, proc: ServiceProcess) -> str:
    return next(i for i, p in cluster.schedulers.items() if p is proc)


def stale_passes(cluster: Cluster, old_token: int, new_term_began: object) -> int:
    return int(
        cluster.fetchval(
            "SELECT count(*) FROM scheduler_passes WHERE token <= $1 AND committed_at > $2",
            old_token,
            new_term_began,
        )
    )


@pytest.mark.parametrize("replicas", [2, 3])
def test_exactly_one_leads_and_kill_9_fails_over(
    make_cluster: Callable[[int], Cluster], tmp_path: Path, replicas: int
) -> None:
    cluster = make_cluster(replicas)
    token, leader = cluster.wait_for_leader()
    wait_until(
        "the replicas to agree on one leader",
        lambda: leaders(cluster) == [identity_of(cluster, leader)],
        10,
        interval=0.02,
    )
    register_chain(cluster, tmp_path)
    run_succeeds(cluster, "before")

    killed_at = time.monotonic()
    with FenceWatch(cluster):
        leader.kill()
        new_token, new_leader = cluster.wait_for_leader(above=token, timeout=LIVENESS)
    print(
        f"kill -9 with {replicas} replicas: next leader after "
        f"{time.monotonic() - killed_at:.2f}s (TTL {TTL}s)"
    )
    assert new_leader is not leader and new_token > token
    wait_until(
        "exactly one new leader",
        lambda: leaders(cluster) == [identity_of(cluster, new_leader)],
        10,
        interval=0.02,
    )
    run_succeeds(cluster, "after")
    check_passes_in_token_order(cluster)


def test_sigterm_hands_over_at_once(make_cluster: Callable[[int], Cluster], tmp_path: Path) -> None:
    cluster = make_cluster(2)
    token, leader = cluster.wait_for_leader()
    register_chain(cluster, tmp_path)
    stopped_at = time.monotonic()
    assert leader.terminate() == 0, leader.log_tail()
    _new_token, _new_leader = cluster.wait_for_leader(above=token, timeout=LIVENESS)
    print(f"SIGTERM hand-over: next leader after {time.monotonic() - stopped_at:.3f}s")
    assert "resigned" in leader.log_tail()
    run_succeeds(cluster, "after-handover")
    check_passes_in_token_order(cluster)


def test_a_paused_leader_writes_nothing_after_the_next_term_began(
    make_cluster: Callable[[int], Cluster], tmp_path: Path
) -> None:
    cluster = make_cluster(2)
    token, old = cluster.wait_for_leader()
    old_identity = identity_of(cluster, old)
    register_chain(cluster, tmp_path)
    for i in range(5):  # work in flight while the leader is paused
        assert schedctl(cluster, "runs", "trigger", "chain", "--run-id", f"busy-{i}").returncode == 0
    old.pause()
    try:
        _new_token, new = cluster.wait_for_leader(above=token, timeout=LIVENESS)
        new_term_began = cluster.fetchval("SELECT raised_at FROM scheduler_fence")
        run_succeeds(cluster, "during-pause")
    finally:
        old.resume()
    # The old leader finds out by itself and steps down, staying alive as a standby.
    wait_until(
        "the old leader to step down",
        lambda: cluster.scheduler_is_leader(old_identity) is False,
        LIVENESS,
        interval=0.02,
    )
    log = old.log_tail()
    assert "fail-stop" in log or "fenced out" in log, log
    assert old.alive
    assert leaders(cluster) == [identity_of(cluster, new)]
    run_succeeds(cluster, "after-resume")
    assert stale_passes(cluster, token, new_term_began) == 0
    check_passes_in_token_order(cluster)
    for i in range(5):
        result = schedctl(cluster, "-o", "json", "runs", "get", f"chain/busy-{i}")
        assert json.loads(result.stdout)["state"] in ("success", "running"), result.stdout


def test_a_leader_cut_off_from_etcd_stops_before_the_next_one_starts(
    make_cluster: Callable[[int], Cluster], tmp_path: Path, etcd_endpoints: str
) -> None:
    cluster = make_cluster(0)
    proxy = TcpProxy(etcd_endpoints).start()
    try:
        cut = cluster.add_scheduler(etcd_endpoints=proxy.endpoint)
        token, leader = cluster.wait_for_leader(timeout=LIVENESS)
        assert leader is cut
        cut_identity = identity_of(cluster, cut)
        cluster.add_scheduler()  # a standby with a direct line to etcd
        register_chain(cluster, tmp_path)
        run_succeeds(cluster, "before-partition")

        proxy.blackhole()
        partitioned_at = time.monotonic()
        wait_until(
            "the cut-off leader to stop",
            lambda: cluster.scheduler_is_leader(cut_identity) is False,
            LIVENESS,
            interval=0.02,
        )
        stopped_at = time.monotonic()
        wait_until("a new term", lambda: cluster.fence()[0] > token, LIVENESS, interval=0.02)
        new_began_at = time.monotonic()
        print(
            f"partition: old leader stopped after {stopped_at - partitioned_at:.2f}s, "
            f"new term after {new_began_at - partitioned_at:.2f}s (TTL {TTL}s)"
        )
        assert stopped_at < new_began_at, "the cut-off leader must stop before the new leader starts"
        assert stopped_at - partitioned_at < TTL + 1.0, "it must stop within the lease TTL"
        assert cut.alive
        new_term_began = cluster.fetchval("SELECT raised_at FROM scheduler_fence")
        run_succeeds(cluster, "after-partition")
        assert stale_passes(cluster, token, new_term_began) == 0
        check_passes_in_token_order(cluster)
    finally:
        proxy.restore()
        proxy.stop()
