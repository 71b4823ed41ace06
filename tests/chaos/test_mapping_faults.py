"""A leader stopped or killed at the exact point of an expansion: after it measured a mapped task's
list, before it wrote the instances. The expansion is part of the pass's fenced transaction, so
nothing of it lands; the next leader expands the task once, and every instance runs once.

The DAG is ``numbers`` (returns ``range(n)``) -> ``square`` mapped over it -> ``total`` (the reduce).
Waits poll with bounds; no assertion is about speed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from schedd_devstack.faults import arm
from tests.chaos.invariants import FenceWatch, check_passes_in_token_order, wait_settled
from tests.chaos.test_leader_faults import (
    LIVENESS,
    MakeCluster,
    make_cluster as make_cluster,  # the fixture
    process_state,
    register,
    schedctl,
)
from tests.e2e.test_mapping import fan_out_spec
from tests.polling import wait_until

pytestmark = [pytest.mark.chaos, pytest.mark.e2e]

ELEMENTS = 40


@pytest.mark.parametrize("action", ["kill", "stop"])
def test_a_leader_lost_mid_expansion_leaves_nothing_and_the_next_expands_once(
    make_cluster: MakeCluster, tmp_path: Path, action: str
) -> None:
    faults = tmp_path / "faults"
    cluster = make_cluster(schedulers=2, workers=2, scheduler_env={"SCHEDD_FAULTS": str(faults)})
    token, _ = cluster.wait_for_leader()
    register(cluster, tmp_path, fan_out_spec("mapped"))
    with FenceWatch(cluster):
        hit = arm(faults, "scheduling.expanding", action)
        schedctl(
            cluster, "runs", "trigger", "mapped", "--run-id", "r1", "--conf", json.dumps({"n": ELEMENTS})
        )
        wait_until("the leader to measure the mapped task", hit.exists, LIVENESS, interval=0.02)
        pid = int(hit.read_text())
        lost = next(p for p in cluster.schedulers.values() if p.pid == pid)
        if action == "stop":
            wait_until("the leader to stop itself", lambda: process_state(pid) == "T", 5, interval=0.02)
        else:
            wait_until("the leader to die", lambda: not lost.alive, 5, interval=0.02)
            lost.kill()  # reap it: this death is the test's
        try:
            new_token, new_leader = cluster.wait_for_leader(above=token, timeout=LIVENESS)
            assert new_leader is not lost
            wait_settled(cluster, "mapped", ["r1"], LIVENESS)
        finally:
            if action == "stop":
                lost.resume()
        if action == "stop":
            lost_id = next(i for i, p in cluster.schedulers.items() if p is lost)
            wait_until(
                "the thawed leader to step down",
                lambda: cluster.scheduler_is_leader(lost_id) is False,
                LIVENESS,
                interval=0.02,
            )
            assert lost.alive, lost.describe_failure("the thawed leader died")
    rows = cluster.fetch(
        "SELECT ti.map_index, ti.state, ti.try_number, "
        "(SELECT count(*) FROM task_attempts a WHERE a.ti_id = ti.id) AS attempts "
        "FROM task_instances ti JOIN dag_runs r ON r.id = ti.run_pk "
        "WHERE r.dag_id = 'mapped' AND r.run_id = 'r1' AND ti.task_id = 'square' ORDER BY ti.map_index"
    )
    assert [r["map_index"] for r in rows] == list(range(ELEMENTS)), "expanded once, no placeholder left"
    assert {(r["state"], r["try_number"], r["attempts"]) for r in rows} == {("success", 1, 1)}
    reduced = cluster.fetchval(
        "SELECT ti.result FROM task_instances ti JOIN dag_runs r ON r.id = ti.run_pk "
        "WHERE r.dag_id = 'mapped' AND r.run_id = 'r1' AND ti.task_id = 'total'"
    )
    assert json.loads(reduced)["count"] == ELEMENTS
    assert new_token > token
    check_passes_in_token_order(cluster)
