"""The benchmark's sensor workload: many reschedule-mode sensors waiting at once, and what other work
sees meanwhile. Figures come from the database's timestamps."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from schedd_devstack.services import Cluster
from tests.benchmarks.common import register, schedctl
from tests.benchmarks.workloads import measure_single_task

FILE_SENSOR = "schedd_sdk.builtin_sensors:file_exists"
#: Longest the workload waits for any one phase.
PHASE_SECONDS = 600.0


def sensors_spec(n: int, gate: Path, poke_interval: str) -> dict[str, Any]:
    """``n`` reschedule-mode file sensors, all waiting for ``gate`` to appear."""
    sensor = {"mode": "SENSOR_MODE_RESCHEDULE", "poke_interval": poke_interval, "timeout": "3600s"}
    return {
        "dag_id": "sensors",
        "tasks": [
            {
                "task_id": f"s{i:04d}",
                "python": {"target": FILE_SENSOR, "kwargs": {"path": {"literal": str(gate)}}},
                "sensor": sensor,
            }
            for i in range(n)
        ],
    }


def _wait(what: str, done: Any) -> float:
    started = time.monotonic()
    while not done():
        if time.monotonic() - started > PHASE_SECONDS:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.5)
    return time.monotonic() - started


def measure_waiting_sensors(cluster: Cluster, workdir: Path, n: int, poke_interval: str) -> dict[str, Any]:
    """Trigger ``n`` waiting sensors; once each has poked and been rescheduled, time one-task runs of
    another DAG (the work the sensors must not block), then open the gate and time the sensors'
    run to its end."""
    gate = workdir / "sensors-gate"
    gate.unlink(missing_ok=True)
    register(cluster, sensors_spec(n, gate, poke_interval), workdir)
    schedctl(cluster, "runs", "trigger", "sensors", "--run-id", "wait")

    def rescheduled() -> int:
        return int(
            cluster.fetchval(
                "SELECT count(DISTINCT ti.id) FROM task_instances ti "
                "JOIN task_attempts a ON a.ti_id = ti.id "
                "WHERE ti.dag_id = 'sensors' AND a.state = 'rescheduled'"
            )
        )

    all_poked = _wait("every sensor to poke once", lambda: rescheduled() >= n)
    holding = cluster.fetchval(
        "SELECT count(*) FROM task_instances WHERE dag_id = 'sensors' AND state IN ('queued', 'running')"
    )
    other = measure_single_task(cluster, workdir, runs=20, label="beside-sensors")
    gate.write_text("open")
    opened = time.monotonic()
    _wait(
        "the sensors' run to end",
        lambda: (
            cluster.fetchval("SELECT state FROM dag_runs WHERE dag_id = 'sensors' AND run_id = 'wait'")
            in ("success", "failed")
        ),
    )
    tries = cluster.fetch("SELECT DISTINCT try_number FROM task_instances WHERE dag_id = 'sensors'")
    pokes = cluster.fetchval(
        "SELECT count(*) FROM task_attempts a JOIN task_instances ti ON ti.id = a.ti_id "
        "WHERE ti.dag_id = 'sensors'"
    )
    return {
        "sensors": n,
        "poke_interval": poke_interval,
        "seconds_until_every_sensor_poked": all_poked,
        "sensor_slots_held_while_waiting": int(holding),
        "other_dag_trigger_to_success_ms_median": other["trigger_to_success_ms_median"],
        "other_dag_trigger_to_first_task_ms_median": other["trigger_to_first_task_ms_median"],
        "gate_open_to_run_end_seconds": time.monotonic() - opened,
        "pokes": int(pokes),
        "pokes_per_sensor": int(pokes) / n,
        "try_numbers": sorted(int(r["try_number"]) for r in tries),
    }
