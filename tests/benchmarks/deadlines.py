"""The benchmark's deadline workload: how long from a run's deadline to its notification arriving.

``runs`` runs of a DAG with a deadline 1 s after each run is queued (its task waits in a queue no
worker serves, so every run misses); each miss is delivered by an unsigned webhook to a local HTTP
receiver. Figures: the delay from the deadline (``deadline_misses.deadline_at``, the database's clock)
to the miss being recorded (``missed_at``) and to the POST arriving (the receiver's clock, the same
machine's), median and max, in milliseconds."""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path
from typing import Any

from schedd_devstack.services import Cluster
from tests.benchmarks.common import percentile, register, schedctl
from tests.e2e.receivers import post_server

#: Longest the workload waits for every notification.
WAIT_SECONDS = 120.0


def deadline_spec(url: str) -> dict[str, Any]:
    return {
        "dag_id": "deadlines",
        "deadline": {
            "reference": "DEADLINE_REFERENCE_QUEUED_AT",
            "interval": "1s",
            "callbacks": [{"webhook_url": url}],
        },
        "tasks": [{"task_id": "held", "upstream": [], "queue": "nowhere", "shell": {"command": "true"}}],
    }


def measure_deadline_notifications(cluster: Cluster, workdir: Path, runs: int) -> dict[str, Any]:
    with post_server() as hooks:
        register(cluster, deadline_spec(hooks.url("/missed")), workdir)
        for i in range(runs):
            schedctl(cluster, "runs", "trigger", "deadlines", "--run-id", f"r{i:03d}")
            time.sleep(0.25)  # one at a time: each deadline is a wake-up of its own
        started = time.monotonic()
        while len(hooks.at("/missed")) < runs:
            if time.monotonic() - started > WAIT_SECONDS:
                raise RuntimeError(f"{len(hooks.at('/missed'))} of {runs} deadline notifications arrived")
            time.sleep(0.2)
        posts = {int(json.loads(p.raw)["event_id"]): p.at for p in hooks.at("/missed")}
    rows = cluster.fetch(
        "SELECT o.id, EXTRACT(EPOCH FROM m.deadline_at) AS deadline, "
        "EXTRACT(EPOCH FROM m.missed_at - m.deadline_at) * 1000 AS recorded_ms "
        "FROM deadline_misses m JOIN outbox o ON (o.payload->>'run_pk')::bigint = m.run_pk "
        "WHERE o.payload->>'event' = 'deadline_missed'"
    )
    delivered = [(posts[int(r["id"])] - float(r["deadline"])) * 1000 for r in rows if int(r["id"]) in posts]
    recorded = [float(r["recorded_ms"]) for r in rows]
    for i in range(runs):
        schedctl(cluster, "runs", "cancel", f"deadlines/r{i:03d}")
    return {
        "runs": runs,
        "misses_recorded": len(rows),
        "notifications": len(posts),
        "deadline_to_recorded_ms_median": statistics.median(recorded),
        "deadline_to_recorded_ms_max": max(recorded),
        "deadline_to_notification_ms_median": statistics.median(delivered),
        "deadline_to_notification_ms_p90": percentile(delivered, 90),
        "deadline_to_notification_ms_max": max(delivered),
    }
