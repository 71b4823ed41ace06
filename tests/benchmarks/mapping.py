"""The benchmark's mapping workload: one mapped task expanding into ``n`` no-op Python instances, and a
reduce over their results. Figures come from the database's timestamps."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from schedd_devstack.services import Cluster
from tests.benchmarks.common import register, schedctl

NOOP = "tests.benchmarks.noop"


def mapped_spec(n: int) -> dict[str, Any]:
    """``elements`` returns ``range(n)``; ``work`` is mapped over it; ``reduce`` counts the results."""
    return {
        "dag_id": "mapped",
        "tasks": [
            {
                "task_id": "elements",
                "python": {"target": f"{NOOP}:elements", "kwargs": {"count": {"literal": n}}},
            },
            {
                "task_id": "work",
                "upstream": ["elements"],
                "python": {"target": f"{NOOP}:noop_element"},
                "mapping": {"expand": [{"name": "x", "values": {"result": {"task_id": "elements"}}}]},
            },
            {
                "task_id": "reduce",
                "upstream": ["work"],
                "python": {
                    "target": f"{NOOP}:count_results",
                    "kwargs": {"values": {"result": {"task_id": "work"}}},
                },
            },
        ],
    }


_PHASES = """
SELECT extract(epoch FROM min(m.queued_at) - e.ended_at) AS expand_s,
       extract(epoch FROM max(m.queued_at) - min(m.queued_at)) AS queue_spread_s,
       extract(epoch FROM max(m.ended_at) - e.ended_at) AS run_s,
       extract(epoch FROM red.ended_at - e.ended_at) AS to_reduce_end_s,
       count(*) AS instances, red.result AS reduced
FROM dag_runs r
JOIN task_instances e ON e.run_pk = r.id AND e.task_id = 'elements'
JOIN task_instances m ON m.run_pk = r.id AND m.task_id = 'work' AND m.map_index >= 0
JOIN task_instances red ON red.run_pk = r.id AND red.task_id = 'reduce'
WHERE r.dag_id = 'mapped' AND r.run_id = $1
GROUP BY e.ended_at, red.ended_at, red.result
"""


def measure_mapped_task(cluster: Cluster, workdir: Path, n: int, runs: int) -> dict[str, Any]:
    """For ``runs`` runs: from the end of the task returning the list to the first instance queued (the
    expansion: placeholder removed, ``n`` instances created and queued in one pass), to the last
    instance's end, and to the reduce's end; task instances per second created and run."""
    register(cluster, mapped_spec(n), workdir)
    rows = []
    for i in range(runs):
        run_id = f"mapped-{i}"
        schedctl(cluster, "runs", "trigger", "mapped", "--run-id", run_id, "--wait", "--wait-timeout", "600")
        (row,) = cluster.fetch(_PHASES, run_id)
        if int(row["instances"]) != n or int(row["reduced"]) != n:
            raise RuntimeError(f"run {run_id}: {row['instances']} instances, reduce saw {row['reduced']}")
        rows.append(row)
    rates = [n / float(r["run_s"]) for r in rows]
    return {
        "elements": n,
        "runs": runs,
        "expand_ms_median": statistics.median(float(r["expand_s"]) * 1000 for r in rows),
        "queue_spread_ms_median": statistics.median(float(r["queue_spread_s"]) * 1000 for r in rows),
        "instances_per_s_median": statistics.median(rates),
        "instances_per_s_best": max(rates),
        "list_end_to_reduce_end_s_median": statistics.median(float(r["to_reduce_end_s"]) for r in rows),
    }
