"""The backfill figure of ``make bench``: a 365-interval backfill of a 3-task no-op DAG with the parallel
strategy, and how late the runs of a DAG scheduled every second start while it goes on (and before)."""

from __future__ import annotations

import json
import statistics
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from schedd_devstack.services import Cluster
from tests.benchmarks.common import NOOP, percentile, register, schedctl


def measure_backfill(cluster: Cluster, workdir: Path, intervals: int, max_active_runs: int) -> dict[str, Any]:
    """Seconds from creating the backfill to its last run's end, and the lateness of scheduled runs
    meanwhile: from the end of their data interval to the run's creation and to its task's start."""
    noop = {"python": {"target": NOOP}}
    register(
        cluster,
        {
            "dag_id": "history",
            "schedule": "@daily",
            "start_date": "2024-01-01T00:00:00Z",
            "tasks": [
                {"task_id": "extract", **noop},
                {"task_id": "transform", "upstream": ["extract"], **noop},
                {"task_id": "load", "upstream": ["transform"], **noop},
            ],
        },
        workdir,
    )
    start = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=1)
    register(
        cluster,
        {
            "dag_id": "live",
            "schedule_interval": "1s",
            "start_date": start.isoformat().replace("+00:00", "Z"),
            "tasks": [{"task_id": "tick", **noop}],
        },
        workdir,
    )
    time.sleep(6)  # scheduled runs before the backfill, for comparison
    end = (datetime(2024, 1, 1) + timedelta(days=intervals - 1)).date().isoformat()
    created = json.loads(
        schedctl(
            cluster,
            "-o",
            "json",
            "backfill",
            "create",
            "history",
            "--start",
            "2024-01-01",
            "--end",
            end,
            "--max-active-runs",
            str(max_active_runs),
        )
    )
    name = created["name"]
    deadline = time.monotonic() + 900
    while True:
        state = json.loads(schedctl(cluster, "-o", "json", "backfill", "get", name))["state"]
        if state != "running":
            break
        if time.monotonic() > deadline:
            raise RuntimeError(f"{name} did not end within 900 s")
        time.sleep(0.5)
    backfill_id = int(name.split("/")[1])
    (span,) = cluster.fetch(
        "SELECT b.created_at AS began, max(r.ended_at) AS ended FROM backfills b "
        "JOIN dag_runs r ON r.backfill_id = b.id WHERE b.id = $1 GROUP BY b.created_at",
        backfill_id,
    )
    during = _lateness(cluster, span["began"], span["ended"])
    before = _lateness(cluster, span["began"] - timedelta(seconds=5), span["began"])
    schedctl(cluster, "dags", "pause", "live")
    seconds = (span["ended"] - span["began"]).total_seconds()
    return {
        "intervals": intervals,
        "tasks": intervals * 3,
        "max_active_runs": max_active_runs,
        "state": state,
        "seconds": seconds,
        "runs_per_s": intervals / seconds,
        "scheduled_runs_during": during,
        "scheduled_runs_before": before,
    }


def _lateness(cluster: Cluster, after: datetime, until: datetime) -> dict[str, Any]:
    """For the runs of 'live' whose intervals ended in ``[after, until]``: milliseconds from the end of
    the interval to the run's creation and to its task's start."""
    rows = cluster.fetch(
        "SELECT extract(epoch FROM r.created_at - r.data_interval_end) AS made, "
        "extract(epoch FROM min(ti.started_at) - r.data_interval_end) AS started "
        "FROM dag_runs r JOIN task_instances ti ON ti.run_pk = r.id "
        "WHERE r.dag_id = 'live' AND r.data_interval_end BETWEEN $1 AND $2 GROUP BY r.id",
        after,
        until,
    )
    if not rows:
        return {"runs": 0}
    made = [float(r["made"]) * 1000 for r in rows]
    started = [float(r["started"]) * 1000 for r in rows]
    return {
        "runs": len(rows),
        "made_ms_median": statistics.median(made),
        "made_ms_max": max(made),
        "task_started_ms_median": statistics.median(started),
        "task_started_ms_p99": percentile(started, 99),
        "task_started_ms_max": max(started),
    }
