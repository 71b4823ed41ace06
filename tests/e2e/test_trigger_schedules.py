"""Trigger timetables through the real services and schedctl: a DeltaTriggerTimetable of 2 seconds
makes its runs at its ticks (logical date = the tick, an empty data interval, never before the
tick, no catch-up of the ticks before it was registered), as ``dags next-runs`` announces them; a
@continuous DAG makes its next run as soon as the previous one ended, never two at once, each
covering from where the previous one ended."""

from __future__ import annotations

import itertools
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.fixtures.services import RunningCluster, schedctl as run_schedctl
from tests.polling import wait_until

pytestmark = [pytest.mark.e2e]

SETTLE = 60.0


def schedctl(api: str, *args: str) -> str:
    result = run_schedctl(api, *args)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def register(api: str, directory: Path, spec: dict[str, Any]) -> None:
    path = directory / f"{spec['dag_id']}.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    schedctl(api, "dags", "register", str(path))


def iso(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def successes(cluster: RunningCluster, dag_id: str) -> int:
    return int(
        cluster.fetchval("SELECT count(*) FROM dag_runs WHERE dag_id = $1 AND state = 'success'", dag_id)
    )


def test_a_delta_trigger_runs_at_its_ticks_with_the_tick_as_logical_date(
    cluster: RunningCluster, tmp_path: Path
) -> None:
    api = cluster.api_address
    start = (datetime.now(UTC) - timedelta(seconds=10)).replace(microsecond=0)
    register(
        api,
        tmp_path,
        {
            "dag_id": "every_two_seconds",
            "trigger": {"every": "2s"},
            "start_date": iso(start),
            "tasks": [{"task_id": "show", "shell": {"command": "echo $SCHEDD_LOGICAL_DATE"}}],
        },
    )
    registered = datetime.now(UTC)
    upcoming = json.loads(schedctl(api, "-o", "json", "dags", "next-runs", "every_two_seconds", "-n", "3"))
    assert len(upcoming) == 3
    assert all(u["logical_date"] == u["run_after"] == u["start"] == u["end"] for u in upcoming), upcoming
    wait_until(
        "three runs at ticks", lambda: successes(cluster, "every_two_seconds") >= 3, SETTLE, interval=0.1
    )
    schedctl(api, "dags", "pause", "every_two_seconds")
    runs = cluster.fetch(
        "SELECT run_id, logical_date, data_interval_start, data_interval_end, created_at FROM dag_runs "
        "WHERE dag_id = 'every_two_seconds' ORDER BY logical_date"
    )
    for run in runs:
        tick = run["logical_date"]
        assert (tick - start).total_seconds() % 2 == 0, run  # start_date + k * 2 s
        assert run["data_interval_start"] == run["data_interval_end"] == tick
        assert run["created_at"] >= tick, run  # made at its tick, never before
        assert run["run_id"] == f"scheduled__{tick:%Y-%m-%dT%H.%M.%S}Z"
    assert runs[0]["logical_date"] > registered - timedelta(seconds=2)  # catch-up off: no earlier tick
    first_id = runs[0]["run_id"]
    logs = schedctl(api, "tasks", "logs", f"every_two_seconds/{first_id}", "show")
    assert logs.strip().endswith(" " + runs[0]["logical_date"].isoformat())  # SCHEDD_LOGICAL_DATE: the tick


def test_a_continuous_dag_runs_again_as_soon_as_its_run_ends_never_two_at_once(
    cluster: RunningCluster, tmp_path: Path
) -> None:
    api = cluster.api_address
    register(
        api,
        tmp_path,
        {
            "dag_id": "continuous",
            "schedule": "@continuous",
            "start_date": iso(datetime.now(UTC) - timedelta(hours=1)),
            "max_active_runs": 1,
            "tasks": [{"task_id": "work", "shell": {"command": "sleep 0.3"}}],
        },
    )
    wait_until("four continuous runs", lambda: successes(cluster, "continuous") >= 4, SETTLE, interval=0.1)
    schedctl(api, "dags", "pause", "continuous")
    runs = cluster.fetch(
        "SELECT logical_date, data_interval_start, data_interval_end, created_at, ended_at FROM dag_runs "
        "WHERE dag_id = 'continuous' AND state = 'success' ORDER BY logical_date"
    )
    for previous, following in itertools.pairwise(runs):
        assert following["created_at"] >= previous["ended_at"], (previous, following)  # never two at once
        assert following["data_interval_start"] == previous["data_interval_end"]  # chained spans
        assert following["logical_date"] == following["data_interval_start"]
        # Made when the previous one ended, not on a timer's idle look.
        assert following["created_at"] - previous["ended_at"] < timedelta(seconds=5), (previous, following)
