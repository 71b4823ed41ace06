"""Time-based wake-ups of the leader through the real services: retries and sensor pokes start within a
few seconds of their due time, whatever else is waiting and whatever the run type.

Each bound (``LATE``) separates a working timer from one that falls back to its 30 s idle look; it is
generous, and no assertion is about speed. Times come from the database (``task_attempts``).
"""

from __future__ import annotations

import itertools
import json
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.fixtures.services import RunningCluster
from tests.polling import wait_until

pytestmark = pytest.mark.e2e

#: Seconds a retry or a poke may start after its due time here (the broken timer: about 30 s).
LATE = 6.0
RETRY_DELAY = 1.0
POKE_INTERVAL = 2.0
FILE_SENSOR = "schedd_sdk.builtin_sensors:file_exists"

ATTEMPTS = """
SELECT r.run_id, r.run_type, a.try_number, a.state, a.started_at, a.ended_at
FROM task_attempts a JOIN task_instances ti ON ti.id = a.ti_id JOIN dag_runs r ON r.id = ti.run_pk
WHERE r.dag_id = $1 ORDER BY r.run_id, a.claimed_at
"""


def schedctl(cluster: RunningCluster, *args: str) -> str:
    result = cluster.schedctl(*args)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def register(cluster: RunningCluster, directory: Path, spec: dict[str, Any]) -> None:
    path = directory / f"{spec['dag_id']}.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    schedctl(cluster, "dags", "register", str(path))


def attempts(cluster: RunningCluster, dag_id: str) -> dict[str, list[dict[str, Any]]]:
    """The attempts of the DAG's runs, by run id, in the order they were claimed."""
    found: dict[str, list[dict[str, Any]]] = {}
    for row in cluster.fetch(ATTEMPTS, dag_id):
        found.setdefault(row["run_id"], []).append(row)
    return found


def failing_once(gate: Path, variable: str, second: str, third: str) -> str:
    """A command whose first try waits for the file ``gate`` (bounded: it gives up after about a
    minute), then fails: 0.4 s later in the run whose ``variable`` matches the shell pattern
    ``second`` and 0.8 s later in the one matching ``third``, so the runs' retries come due at
    different moments. Its second try succeeds."""
    return (
        f'[ "$SCHEDD_TRY_NUMBER" -ge 2 ] && exit 0; i=0; while [ ! -e {gate} ]; do i=$((i+1)); '
        "[ $i -gt 1200 ] && exit 2; sleep 0.05; done; "
        f'case "${variable}" in {second}) sleep 0.4;; {third}) sleep 0.8;; esac; exit 1'
    )


def open_when_running(cluster: RunningCluster, dag_id: str, run_type: str, gate: Path, runs: int) -> None:
    """Open ``gate`` once the first try of the DAG's ``runs`` runs of ``run_type`` is running."""
    wait_until(
        f"{runs} {run_type} runs of {dag_id} to be running",
        lambda: (
            cluster.fetchval(
                "SELECT count(*) FROM task_instances ti JOIN dag_runs r ON r.id = ti.run_pk "
                "WHERE r.dag_id = $1 AND r.run_type = $2 AND ti.state = 'running'",
                dag_id,
                run_type,
            )
            == runs
        ),
        60.0,
        interval=0.1,
    )
    gate.write_text("open\n")


def retry_gaps(cluster: RunningCluster, dag_id: str, run_type: str, runs: int) -> dict[str, float]:
    """Per run of ``run_type``: seconds from the end of try 1 to the start of try 2."""
    done = attempts(cluster, dag_id)
    gaps: dict[str, float] = {}
    for run_id, rows in done.items():
        if rows[0]["run_type"] != run_type:
            continue
        first = next(a for a in rows if a["try_number"] == 1)
        second = next(a for a in rows if a["try_number"] == 2)
        gaps[run_id] = (second["started_at"] - first["ended_at"]).total_seconds()
    assert len(gaps) == runs, done
    return gaps


def test_a_backfill_runs_retries_start_within_a_few_seconds_of_their_retry_delay(
    module_cluster: RunningCluster, tmp_path: Path
) -> None:
    """Three backfill runs at once, failing 0.4 s apart: each one's try 2 starts soon after its 1 s
    retry delay, though another run's retry is due (and not yet started) when the timer looks. (The
    DAG's own scheduled run of its latest interval fails and retries beside them.)"""
    gate = tmp_path / "gate"
    spec = {
        "dag_id": "late_backfill_retry",
        "schedule": "@daily",
        "start_date": "2025-01-01T00:00:00Z",
        "tasks": [
            {
                "task_id": "flaky",
                "shell": {"command": failing_once(gate, "SCHEDD_LOGICAL_DATE", "*-01-02T*", "*-01-03T*")},
                "retries": 1,
                "retry_delay": f"{RETRY_DELAY:g}s",
            }
        ],
    }
    register(module_cluster, tmp_path, spec)
    created = json.loads(
        schedctl(
            module_cluster,
            *("-o", "json", "backfill", "create", "late_backfill_retry"),
            *("--start", "2025-01-01", "--end", "2025-01-03", "--max-active-runs", "3"),
        )
    )
    assert created["progress"]["total"] == 3
    open_when_running(module_cluster, "late_backfill_retry", "backfill", gate, 3)

    def ended() -> bool:
        out = json.loads(schedctl(module_cluster, "-o", "json", "backfill", "get", created["name"]))
        return bool(out["state"] in ("succeeded", "failed", "cancelled"))

    wait_until("the backfill to end", ended, 120.0, interval=0.1)
    gaps = retry_gaps(module_cluster, "late_backfill_retry", "backfill", 3)
    assert all(RETRY_DELAY <= gap < RETRY_DELAY + LATE for gap in gaps.values()), gaps


def test_manual_runs_retries_start_within_a_few_seconds_of_their_retry_delay(
    module_cluster: RunningCluster, tmp_path: Path
) -> None:
    """The same with three manual runs: what made a retry late was another retry due first, whatever
    the run type."""
    gate = tmp_path / "gate"
    spec = {
        "dag_id": "late_manual_retry",
        "tasks": [
            {
                "task_id": "flaky",
                "shell": {"command": failing_once(gate, "SCHEDD_RUN_ID", "m02", "m03")},
                "retries": 1,
                "retry_delay": f"{RETRY_DELAY:g}s",
            }
        ],
    }
    register(module_cluster, tmp_path, spec)
    for run_id in ("m01", "m02", "m03"):
        schedctl(module_cluster, "runs", "trigger", "late_manual_retry", "--run-id", run_id)
    open_when_running(module_cluster, "late_manual_retry", "manual", gate, 3)

    def ended() -> bool:
        states = module_cluster.fetch(
            "SELECT state FROM dag_runs WHERE dag_id = 'late_manual_retry' AND state IN ('success', 'failed')"
        )
        return len(states) == 3

    wait_until("the three runs to end", ended, 120.0, interval=0.1)
    gaps = retry_gaps(module_cluster, "late_manual_retry", "manual", 3)
    assert all(RETRY_DELAY <= gap < RETRY_DELAY + LATE for gap in gaps.values()), gaps


def test_a_reschedule_sensor_pokes_again_within_a_few_seconds_of_its_poke_interval(
    module_cluster: RunningCluster, tmp_path: Path
) -> None:
    """A reschedule-mode sensor with ``poke_interval`` 2 s, alone on idle workers: each poke starts
    soon after the previous one's interval ran out (the broken timer: every 24 to 30 s)."""
    gate = tmp_path / "gate"
    spec = {
        "dag_id": "late_poke",
        "tasks": [
            {
                "task_id": "wait",
                "python": {"target": FILE_SENSOR, "kwargs": {"path": {"literal": str(gate)}}},
                "sensor": {
                    "mode": "SENSOR_MODE_RESCHEDULE",
                    "poke_interval": f"{POKE_INTERVAL:g}s",
                    "timeout": "300s",
                },
            }
        ],
    }
    register(module_cluster, tmp_path, spec)
    schedctl(module_cluster, "runs", "trigger", "late_poke", "--run-id", "p1")
    pokes = 4

    def rescheduled() -> list[dict[str, Any]]:
        rows = attempts(module_cluster, "late_poke").get("p1", [])
        return [a for a in rows if a["state"] == "rescheduled"]

    def next_poke_late(done: list[dict[str, Any]]) -> bool:
        """The latest poke ended (rescheduled) longer ago than the bound, and none started since."""
        rows = attempts(module_cluster, "late_poke").get("p1", [])
        return bool(
            done
            and rows[-1]["state"] == "rescheduled"
            and datetime.now(UTC) - rows[-1]["ended_at"] > timedelta(seconds=POKE_INTERVAL + LATE)
        )

    deadline = time.monotonic() + pokes * (POKE_INTERVAL + LATE) + 30.0
    try:
        done = rescheduled()
        while len(done) < pokes and not next_poke_late(done) and time.monotonic() < deadline:
            time.sleep(0.2)
            done = rescheduled()
    finally:
        gate.write_text("open\n")
    gaps = [
        (later["started_at"] - earlier["ended_at"]).total_seconds()
        for earlier, later in itertools.pairwise(done)
    ]
    assert len(done) >= pokes, (
        f"poke {len(done) + 1} did not start within {POKE_INTERVAL + LATE:g}s of the end of the one before; "
        f"the gaps before it: {gaps}"
    )
    assert all(gap < POKE_INTERVAL + LATE for gap in gaps), gaps
    assert all(gap >= POKE_INTERVAL - 0.05 for gap in gaps), f"a poke came before its interval: {gaps}"
    wait_until(
        "the sensor's run to succeed",
        lambda: (
            module_cluster.fetchval("SELECT state FROM dag_runs WHERE dag_id = 'late_poke' AND run_id = 'p1'")
            == "success"
        ),
        60.0,
        interval=0.1,
    )
