"""Successor hand-offs on a live stack: each link of a chain is queued and claimed in its upstream
task's result transaction, for the worker that ran the upstream task, in dependency order."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from tests.e2e.test_metrics import scrape, value
from tests.fixtures.services import RunningCluster

pytestmark = pytest.mark.e2e

DAG = "handoff_chain"
LINKS = 5


def _register_chain(cluster: RunningCluster, tmp_path: Path, dag: str, links: int) -> None:
    """A chain of ``links`` shell tasks, registered unpaused."""
    tasks = [{"task_id": "t0", "shell": {"command": "true"}}]
    tasks += [
        {"task_id": f"t{i}", "upstream": [f"t{i - 1}"], "shell": {"command": "true"}} for i in range(1, links)
    ]
    path = tmp_path / f"{dag}.json"
    path.write_text(json.dumps({"dag_id": dag, "tasks": tasks}))
    assert cluster.schedctl("dags", "register", str(path), "--unpause").returncode == 0


def _run(cluster: RunningCluster, dag: str) -> None:
    done = cluster.schedctl("runs", "trigger", dag, "--run-id", "r1", "--wait", "--wait-timeout", "120")
    assert done.returncode == 0, done.stderr


def test_a_chain_runs_link_after_link_through_hand_offs(cluster: RunningCluster, tmp_path: Path) -> None:
    registry = cluster.cluster.metrics["registry"]
    before = value(scrape(registry), "schedd_registry_handoffs_total")
    _register_chain(cluster, tmp_path, DAG, LINKS)
    _run(cluster, DAG)
    rows = cluster.cluster.fetch(
        "SELECT ti.task_id, ti.queued_at, ti.claimed_at, ti.worker_id, a.started_at, a.ended_at "
        "FROM task_instances ti JOIN dag_runs r ON r.id = ti.run_pk "
        "JOIN task_attempts a ON a.attempt_id = ti.attempt_id "
        "WHERE r.dag_id = $1 ORDER BY ti.task_id",
        DAG,
    )
    assert [r["task_id"] for r in rows] == [f"t{i}" for i in range(LINKS)]
    for upstream, task in itertools.pairwise(rows):
        # Queued and claimed in one transaction (now() is the transaction's start), for the worker
        # that reported the upstream task's success, after that task ended.
        assert task["queued_at"] == task["claimed_at"], task["task_id"]
        assert task["worker_id"] == upstream["worker_id"], task["task_id"]
        assert task["started_at"] >= upstream["ended_at"], task["task_id"]
    assert value(scrape(registry), "schedd_registry_handoffs_total") - before == LINKS - 1


def test_a_chain_of_quiet_hand_offs_costs_the_leader_far_fewer_passes_than_links(
    cluster: RunningCluster, tmp_path: Path
) -> None:
    # Each link's success is told on schedd_runs_handed_off: the leader looks at the run every
    # HANDED_OFF_DELAY, not once per link (told on schedd_runs, it would pass about once per link).
    links, dag = 30, "quiet_chain"

    def passes() -> float:  # the leader's (a standby counts none)
        return sum(
            value(scrape(cluster.cluster.metrics[p.name]), "schedd_scheduler_passes_total")
            for p in cluster.cluster.schedulers.values()
        )

    _register_chain(cluster, tmp_path, dag, links)
    before = passes()
    _run(cluster, dag)
    during = passes() - before
    assert during < links / 2, f"{during} passes for a chain of {links} links"
