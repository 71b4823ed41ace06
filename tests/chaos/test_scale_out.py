"""A scaled-out deployment on one machine loses an etcd member and its leading scheduler mid-run.

Three etcd members (``schedd_devstack.etcd_cluster``), two schedulers, two registries and eight
workers (two slots each) run a two-layer DAG of marked tasks (``tests/chaos/invariants.py``). Once
tasks of the first layer run (seen by polling the database), the etcd member that leads raft is
killed and then the leading scheduler: the other scheduler must win the election on the two
members left and schedule the second layer. Checked from the attempts table and the tasks' own
marks: the run succeeds, every task instance has exactly one successful attempt, no two attempts of
one task instance overlap, no task started before its upstream task ended, and the leader's passes
committed in token order with the fence token never going down.
"""

from __future__ import annotations

import itertools
import shutil
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from schedd_devstack.etcd_cluster import LocalEtcdCluster
from schedd_devstack.services import Cluster
from schedd_devstack.stack import make_base_dir
from tests.chaos.invariants import FenceWatch, check_all, marked_dag, wait_settled
from tests.fixtures.services import schedctl
from tests.polling import wait_until

pytestmark = [pytest.mark.chaos, pytest.mark.e2e]

REPO_ROOT = Path(__file__).resolve().parents[2]
WIDTH = 24
TASK_SECONDS = 1.5
#: tasks running when the faults are injected
RUNNING_AT_FAULT = 6
#: generous bounds: a loaded 2-core machine runs 15 service processes and three etcd members here
LIVENESS = 90.0
STARTUP = 120.0

ATTEMPTS = """
SELECT ti.task_id, ti.state AS ti_state, a.attempt_id::text AS attempt_id, a.try_number, a.state,
       a.worker_id, a.claimed_at, a.started_at, a.ended_at
FROM task_attempts a
JOIN task_instances ti ON ti.id = a.ti_id
JOIN dag_runs r ON r.id = ti.run_pk
WHERE r.dag_id = $1 AND r.run_id = $2
ORDER BY ti.task_id, a.try_number, a.claimed_at
"""


def two_layers(width: int) -> dict[str, list[str]]:
    """``a00..`` with no upstream, each ``bNN`` downstream of ``aNN``."""
    edges: dict[str, list[str]] = {f"a{i:02d}": [] for i in range(width)}
    edges.update({f"b{i:02d}": [f"a{i:02d}"] for i in range(width)})
    return edges


@pytest.fixture
def etcd_cluster() -> Iterator[LocalEtcdCluster]:
    base_dir = make_base_dir("schedd-test-etcd3-")
    members = LocalEtcdCluster(3)
    try:
        members.start(base_dir, durable=False)
        yield members
    finally:
        members.stop()
    shutil.rmtree(base_dir, ignore_errors=True)


def running_and_marking(cluster: Cluster, marks: Path) -> set[str]:
    """Tasks whose instance is running and whose process has begun to mark."""
    rows = cluster.fetch(
        "SELECT task_id FROM task_instances WHERE dag_id = 'scaled_out' AND state = 'running'"
    )
    marking = {path.name.rpartition(".")[2] for path in marks.iterdir()}
    return {r["task_id"] for r in rows} & marking


def check_attempts(rows: list[dict[str, Any]], tasks: int) -> None:
    """Every task instance has exactly one successful attempt, and its attempts, ordered by claim,
    each ended before the next one started."""
    by_task: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        by_task[row["task_id"]].append(row)
    assert len(by_task) == tasks, f"{len(by_task)} task instances have attempts, expected {tasks}"
    for task_id, attempts in by_task.items():
        assert attempts[0]["ti_state"] == "success", (task_id, attempts)
        successes = [a for a in attempts if a["state"] == "success"]
        assert len(successes) == 1, f"{task_id}: {len(successes)} successful attempts: {attempts}"
        assert all(a["ended_at"] is not None for a in attempts), f"{task_id}: an attempt never ended"
        for earlier, later in itertools.pairwise(attempts):
            began = later["started_at"] or later["claimed_at"]
            assert earlier["ended_at"] <= began, f"{task_id}: attempts overlap: {earlier} and {later}"


def test_losing_an_etcd_member_and_the_leader_mid_run(
    fresh_database_url: str, etcd_cluster: LocalEtcdCluster, tmp_path: Path
) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    edges = two_layers(WIDTH)
    spec = marked_dag("scaled_out", edges, marks, TASK_SECONDS)
    (tmp_path / "dag.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    with Cluster(
        fresh_database_url,
        etcd_cluster.endpoints,
        tmp_path / "logs",
        schedulers=2,
        registries=2,
        workers=8,
        worker_capacity=2,
        worker_env={"SCHEDD_PYTHON_WORKERS": "1"},
        cwd=REPO_ROOT,
        startup_timeout=STARTUP,
    ) as cluster:
        registered = schedctl(cluster.api_address, "dags", "register", str(tmp_path / "dag.yaml"))
        assert registered.returncode == 0, registered.stdout + registered.stderr
        token, leader = cluster.wait_for_leader()
        standby = next(p for p in cluster.schedulers.values() if p is not leader)

        with FenceWatch(cluster) as fence:
            triggered = schedctl(cluster.api_address, "runs", "trigger", "scaled_out", "--run-id", "r1")
            assert triggered.returncode == 0, triggered.stdout + triggered.stderr
            wait_until(
                f"{RUNNING_AT_FAULT} tasks to run",
                lambda: len(running_and_marking(cluster, marks)) >= RUNNING_AT_FAULT,
                LIVENESS,
            )
            raft_leader = etcd_cluster.raft_leader()
            assert raft_leader is not None, "no etcd member leads"
            etcd_cluster.kill(raft_leader)
            leader.kill()
            faulted_at = time.monotonic()
            new_token, new_leader = cluster.wait_for_leader(above=token, timeout=LIVENESS)
            took_over = time.monotonic() - faulted_at
            assert new_leader is standby and new_token > token
            wait_settled(cluster, "scaled_out", ["r1"], LIVENESS)
        assert fence.samples and fence.samples[-1] == new_token, fence.samples[-3:]

        rows = cluster.fetch(ATTEMPTS, "scaled_out", "r1")
        check_attempts(rows, len(edges))
        check_all(cluster, marks, edges)
        assert cluster.dead() == [], [p.describe_failure("died") for p in cluster.dead()]
        assert sum(m.running for m in etcd_cluster.members) == 2
        # The second layer was scheduled by the new term.
        b_queued_by = cluster.fetch(
            "SELECT DISTINCT fence_token FROM task_instances "
            "WHERE dag_id = 'scaled_out' AND task_id LIKE 'b%'"
        )
        assert new_token in {r["fence_token"] for r in b_queued_by}, b_queued_by
        workers = {r["worker_id"] for r in rows}
        retried = sorted({r["task_id"] for r in rows if r["try_number"] > 1})
        print(
            f"\nkilled etcd member {raft_leader + 1} (the raft leader) and the leading scheduler with "
            f"{RUNNING_AT_FAULT}+ tasks running: next term after {took_over:.2f}s; {len(rows)} attempts "
            f"on {len(workers)} workers; retried: {retried or 'none'}; second layer stamped by terms "
            f"{sorted(r['fence_token'] for r in b_queued_by)}"
        )
    left = [p for p in cluster.processes if p.alive]
    assert not left, f"processes left running after the cluster stopped: {left}"
