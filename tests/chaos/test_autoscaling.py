"""Workers scaled on the registries' queue-demand metric while a 2,000-task fan-out runs.

The autoscaler (``schedd_devstack.autoscale``) applies the rule ``deploy/k8s`` gives KEDA: it scrapes
``schedd_queue_demand`` from every registry's ``/metrics``, wants ``ceil(demand / slots)`` workers
between one and four, adds them at once and removes them by SIGTERM, the drain a Kubernetes
scale-down does. Its scale-down window (8 s) is longer than the registries' refresh of the gauge
(every 5 s) plus the autoscaler's scrape interval, so a worker is drained only after two refreshes
in a row showed the lower demand: once a no-op fan-out's queue has run dry, not while tasks are
still being handed out (an assignment that crosses a drain is handed back and runs again, which
this test would count as a second attempt).

The tasks are shell no-ops (``true``, as the shell fan-out of ``tests/benchmarks``) on workers of one
slot, so a worker's pace is set by each task's round trip (claim, assignment, fork and exec, report)
rather than by the CPU the services share, and added workers raise the throughput. The comparison
with the one-worker run is of throughput from the added workers' first task to the run's end (over a
thousand tasks here), not of the whole run's time: the whole run includes the autoscaler's reaction
(up to one 5 s refresh of the gauge, then a worker's start-up), which varies by several seconds
from run to run, so the end-to-end gain (1.4x to 2x measured here) depends on when the gauge
happened to refresh; the throughput once the workers run (2.1x to 2.6x) does not.

The demand the leader lets into the queue is bounded by the default pool's slots (128): the rest of
the fan-out waits ``scheduled``, so the metric reads about 127 while the backlog is far larger; that
still asks for the maximum of four workers.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from schedd_devstack.autoscale import Autoscaler, ScaleRule
from schedd_devstack.services import Cluster
from tests.fixtures.services import schedctl

pytestmark = [pytest.mark.chaos, pytest.mark.e2e]

REPO_ROOT = Path(__file__).resolve().parents[2]
FAN_OUT = 2000
SLOTS = 1
MAX_WORKERS = 4
SCALE_DOWN_WINDOW = 8.0
#: generous bound for the scaled run, the scale-down after it and the one-worker run each
LIVENESS = 150.0

ATTEMPTS = """
SELECT ti.task_id, ti.state AS ti_state, ti.try_number AS ti_try, a.try_number, a.state, a.worker_id,
       a.started_at, a.ended_at
FROM task_instances ti
JOIN dag_runs r ON r.id = ti.run_pk
LEFT JOIN task_attempts a ON a.ti_id = ti.id
WHERE r.dag_id = $1 AND r.run_id = $2
"""


def fan_out_spec(dag_id: str, n: int) -> dict[str, Any]:
    """One root and ``n`` no-op tasks downstream of it."""
    tasks: list[dict[str, Any]] = [{"task_id": "root", "shell": {"command": "true"}}]
    tasks += [{"task_id": f"t{i:04d}", "upstream": ["root"], "shell": {"command": "true"}} for i in range(n)]
    return {"dag_id": dag_id, "tasks": tasks}


def run_row(cluster: Cluster, dag_id: str, run_id: str) -> dict[str, Any] | None:
    rows = cluster.fetch(
        "SELECT state, extract(epoch FROM ended_at - created_at) AS seconds FROM dag_runs "
        "WHERE dag_id = $1 AND run_id = $2",
        dag_id,
        run_id,
    )
    return rows[0] if rows else None


def finished(cluster: Cluster, dag_id: str, run_id: str) -> bool:
    row = run_row(cluster, dag_id, run_id)
    return row is not None and row["state"] in ("success", "failed")


def peak_concurrency(rows: list[dict[str, Any]]) -> int:
    """The most attempts that ran at one moment, from their start and end times."""
    events = sorted([(r["started_at"], 1) for r in rows] + [(r["ended_at"], -1) for r in rows])
    running = peak = 0
    for _, delta in events:
        running += delta
        peak = max(peak, running)
    return peak


def tasks_per_second(rows: list[dict[str, Any]], since: datetime) -> tuple[int, float]:
    """Attempts that started at ``since`` or later, and how many of them ended per second from
    ``since`` to the last end."""
    later = [r for r in rows if r["started_at"] >= since]
    seconds = (max(r["ended_at"] for r in later) - since).total_seconds()
    return len(later), len(later) / seconds


def check_each_task_succeeded_once(rows: list[dict[str, Any]], n: int) -> None:
    """One row per task instance and attempt: every task instance has exactly one attempt, try 1,
    and it succeeded (none lost, none handed back by a draining worker, none run twice)."""
    per_task = Counter(r["task_id"] for r in rows)
    assert len(per_task) == n + 1, f"{len(per_task)} task instances, expected {n + 1}"
    repeated = {t: c for t, c in per_task.items() if c != 1}
    assert not repeated, f"task instances with more than one attempt: {dict(list(repeated.items())[:5])}"
    wrong = [
        r for r in rows if (r["ti_state"], r["ti_try"], r["state"], r["try_number"]) != ("success", 1) * 2
    ]
    assert not wrong, f"{len(wrong)} task instances did not succeed on their first and only try: {wrong[:3]}"


def test_workers_scale_up_with_demand_and_drain_back_to_one(
    fresh_database_url: str, etcd_endpoints: str, tmp_path: Path
) -> None:
    """While the fan-out runs, the autoscaler grows the fleet from one worker and drains it back to
    one once the queue is empty; every task instance succeeds on its one attempt, the added workers
    run tasks alongside the first, and the drained workers exit with status 0. Then the same DAG
    runs on the one worker left: it never runs more attempts at once than that worker's slot (the
    scaled run did, which only the added workers make possible), and its throughput is lower than
    the scaled run's once the added workers had joined (see the module docstring).
    """
    spec = fan_out_spec("autoscaled", FAN_OUT)
    (tmp_path / "dag.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    with Cluster(
        fresh_database_url,
        etcd_endpoints,
        tmp_path / "logs",
        workers=1,
        worker_capacity=SLOTS,
        cwd=REPO_ROOT,
    ) as cluster:
        registered = schedctl(cluster.api_address, "dags", "register", str(tmp_path / "dag.yaml"))
        assert registered.returncode == 0, registered.stdout + registered.stderr
        (first_worker,) = cluster.workers
        rule = ScaleRule(SLOTS, min_workers=1, max_workers=MAX_WORKERS, scale_down_window=SCALE_DOWN_WINDOW)
        autoscaler = Autoscaler(cluster, rule)

        triggered = schedctl(cluster.api_address, "runs", "trigger", "autoscaled", "--run-id", "scaled")
        assert triggered.returncode == 0, triggered.stdout + triggered.stderr
        changes = autoscaler.run_until(
            lambda: (
                finished(cluster, "autoscaled", "scaled")
                and len(autoscaler.active) == 1
                and not autoscaler.draining
            ),
            timeout=LIVENESS * 2,
        )
        scaled = run_row(cluster, "autoscaled", "scaled")
        assert scaled is not None and scaled["state"] == "success", scaled

        # Scaled up as the metric said, then drained down to the first worker.
        assert autoscaler.started, f"no worker was added: {changes}"
        assert len(autoscaler.started) <= MAX_WORKERS - 1, changes
        assert autoscaler.active == [first_worker], autoscaler.active
        assert sorted(autoscaler.exited) == sorted(autoscaler.started), autoscaler.exited
        unclean = {w: s for w, s in autoscaler.exited.items() if s != 0}
        assert not unclean, "\n\n".join(
            cluster.workers[w].describe_failure(f"drained worker exited with {s}") for w, s in unclean.items()
        )
        not_drained = [
            w for w in autoscaler.exited if "draining:" not in cluster.workers[w].log_tail(100_000)
        ]
        assert not not_drained, f"workers that exited without draining: {not_drained}"
        assert cluster.dead() == [], [p.describe_failure("died") for p in cluster.dead()]

        rows = cluster.fetch(ATTEMPTS, "autoscaled", "scaled")
        check_each_task_succeeded_once(rows, FAN_OUT)
        per_worker = Counter(str(r["worker_id"]) for r in rows)
        added_ran = {w: per_worker[w] for w in autoscaler.started if per_worker[w]}
        assert added_ran, f"no added worker ran a task: {dict(per_worker)}"
        added_began = min(r["started_at"] for r in rows if r["worker_id"] in autoscaler.started)
        scaled_tasks, scaled_rate = tasks_per_second(rows, added_began)
        peak = peak_concurrency(rows)
        assert peak > SLOTS, f"at most {peak} attempts ran at once: no more than one worker's {SLOTS} slots"

        # The same DAG on the one worker left.
        baseline = schedctl(
            cluster.api_address,
            "runs",
            "trigger",
            "autoscaled",
            "--run-id",
            "one-worker",
            "--wait",
            "--wait-timeout",
            str(int(LIVENESS)),
            timeout=LIVENESS + 30,
        )
        assert baseline.returncode == 0, baseline.stdout + baseline.stderr
        one = run_row(cluster, "autoscaled", "one-worker")
        assert one is not None and one["state"] == "success", one
        one_rows = cluster.fetch(ATTEMPTS, "autoscaled", "one-worker")
        check_each_task_succeeded_once(one_rows, FAN_OUT)
        assert {r["worker_id"] for r in one_rows} == {first_worker}
        one_peak = peak_concurrency(one_rows)
        assert one_peak <= SLOTS < peak, (one_peak, peak)
        _, one_rate = tasks_per_second(one_rows, min(r["started_at"] for r in one_rows))
        assert scaled_rate > one_rate, (
            f"{scaled_rate:.0f} tasks/s with added workers, {one_rate:.0f} with one"
        )

        steps = "; ".join(f"demand {c.demand:g}: {c.current} -> {c.target}" for c in changes)
        print(
            f"\n{FAN_OUT}-task fan-out: autoscaled {float(scaled['seconds']):.2f}s "
            f"(peak {peak} attempts at once; per worker {dict(sorted(per_worker.items()))}), "
            f"one worker {float(one['seconds']):.2f}s (peak {one_peak}); scaling: {steps}; from the added "
            f"workers' first task on, {scaled_tasks} tasks at {scaled_rate:.0f}/s against {one_rate:.0f}/s "
            f"on one worker ({scaled_rate / one_rate:.2f}x)"
        )
    left = [p for p in cluster.processes if p.alive]
    assert not left, f"processes left running after the cluster stopped: {left}"
