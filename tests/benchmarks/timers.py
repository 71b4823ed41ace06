"""The timer figure of ``make bench``: how late retries and reschedule-mode sensor pokes start after
their due time, for a manual run, a scheduled run and the runs of a backfill.

One DAG (scheduled daily, so it has a scheduled run too) holds ``tasks`` tasks that fail their first
try after a pause of their own (0 to 0.9 s, so their retries come due at different moments) with a
1 s retry delay, and ``tasks`` reschedule-mode sensors with a 1 s poke interval waiting for a gate.
A manual run and a backfill of ``intervals`` runs go on at once; the gate opens once every sensor
has poked ``pokes`` times.

Lateness is read from the database's attempts: for a retry, the start of try 2 minus the end of try 1
minus the retry delay; for a poke, its start minus the end of the previous poke minus the poke
interval (the worker sets the next poke from that end). It includes what stands between the end of
an attempt and the start of the next beyond the timer: the report, the pass, the claim.
"""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path
from typing import Any

from schedd_devstack.services import Cluster
from tests.benchmarks.common import percentile, register, schedctl

FILE_SENSOR = "schedd_sdk.builtin_sensors:file_exists"
DELAY = 1.0
#: Longest the workload waits for any one phase.
PHASE_SECONDS = 300.0

RETRY_LATENESS = """
SELECT r.run_type, EXTRACT(EPOCH FROM second.started_at - first.ended_at) - $2 AS late
FROM task_attempts first
JOIN task_attempts second ON second.ti_id = first.ti_id AND second.try_number = 2
JOIN task_instances ti ON ti.id = first.ti_id JOIN dag_runs r ON r.id = ti.run_pk
WHERE r.dag_id = $1 AND first.try_number = 1 AND ti.task_id LIKE 'retry%' AND second.started_at IS NOT NULL
"""

POKE_LATENESS = """
SELECT run_type, EXTRACT(EPOCH FROM started_at - previous_end) - $2 AS late FROM (
  SELECT r.run_type, a.started_at, lag(a.ended_at) OVER w AS previous_end, lag(a.state) OVER w AS previous
  FROM task_attempts a JOIN task_instances ti ON ti.id = a.ti_id JOIN dag_runs r ON r.id = ti.run_pk
  WHERE r.dag_id = $1 AND ti.task_id LIKE 'sense%'
  WINDOW w AS (PARTITION BY a.ti_id ORDER BY a.claimed_at)
) pokes WHERE previous = 'rescheduled' AND started_at IS NOT NULL
"""


def timers_spec(tasks: int, gate: Path) -> dict[str, Any]:
    sensor = {"mode": "SENSOR_MODE_RESCHEDULE", "poke_interval": f"{DELAY:g}s", "timeout": "3600s"}
    retries = [
        {
            "task_id": f"retry{i:03d}",
            "shell": {
                "command": f'[ "$SCHEDD_TRY_NUMBER" -ge 2 ] && exit 0; sleep {(i % 10) / 10:.1f}; exit 1'
            },
            "retries": 1,
            "retry_delay": f"{DELAY:g}s",
        }
        for i in range(tasks)
    ]
    sensors = [
        {
            "task_id": f"sense{i:03d}",
            "python": {"target": FILE_SENSOR, "kwargs": {"path": {"literal": str(gate)}}},
            "sensor": sensor,
        }
        for i in range(tasks)
    ]
    return {
        "dag_id": "timers",
        "schedule": "@daily",
        "start_date": "2025-01-01T00:00:00Z",
        "tasks": retries + sensors,
    }


def _wait(what: str, done: Any) -> None:
    started = time.monotonic()
    while not done():
        if time.monotonic() - started > PHASE_SECONDS:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.5)


def _figures(rows: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per run type: how many, and the median, p99 and max lateness (ms)."""
    by_type: dict[str, list[float]] = {}
    for r in rows:
        by_type.setdefault(r["run_type"], []).append(float(r["late"]) * 1000)
    return {
        run_type: {
            "count": len(late),
            "late_ms_median": statistics.median(late),
            "late_ms_p99": percentile(late, 99),
            "late_ms_max": max(late),
        }
        for run_type, late in sorted(by_type.items())
    }


def measure_timer_lateness(
    cluster: Cluster, workdir: Path, tasks: int, intervals: int, pokes: int
) -> dict[str, Any]:
    """Run the workload above; lateness figures by kind (retries, pokes) and run type."""
    gate = workdir / "timers-gate"
    gate.unlink(missing_ok=True)
    register(cluster, timers_spec(tasks, gate), workdir)
    schedctl(cluster, "runs", "trigger", "timers", "--run-id", "manual")
    end = f"2025-01-{intervals:02d}"
    out = schedctl(
        cluster,
        *("-o", "json", "backfill", "create", "timers", "--start", "2025-01-01", "--end", end),
        *("--max-active-runs", str(intervals)),
    )
    backfill = json.loads(out)["name"]

    def poked_enough() -> bool:
        fewest = cluster.fetchval(
            "SELECT min(n) FROM (SELECT count(*) FILTER (WHERE a.state = 'rescheduled') AS n "
            "FROM task_instances ti LEFT JOIN task_attempts a ON a.ti_id = ti.id "
            "WHERE ti.dag_id = 'timers' AND ti.task_id LIKE 'sense%' GROUP BY ti.id) counts"
        )
        return fewest is not None and int(fewest) >= pokes

    _wait(f"every sensor to poke {pokes} times", poked_enough)
    gate.write_text("open")
    _wait(
        "the runs to end",
        lambda: (
            not cluster.fetchval(
                "SELECT count(*) FROM dag_runs WHERE dag_id = 'timers' AND state IN ('queued', 'running')"
            )
        ),
    )
    _wait(
        "the backfill to end",
        lambda: (
            json.loads(schedctl(cluster, "-o", "json", "backfill", "get", backfill))["state"]
            in ("succeeded", "failed")
        ),
    )
    return {
        "tasks_per_run": tasks,
        "backfill_intervals": intervals,
        "retries": _figures(cluster.fetch(RETRY_LATENESS, "timers", DELAY)),
        "pokes": _figures(cluster.fetch(POKE_LATENESS, "timers", DELAY)),
    }
