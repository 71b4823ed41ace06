"""Schedules and backfills through the real services and schedctl: a 30-interval backfill with each
strategy (its ordering checked from the database), a 200-interval backfill sharing a pool with a
scheduled DAG (the share checked from the database), a leader frozen in the middle of a backfill
step, and a scheduled DAG whose runs come by themselves."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from schedd_devstack.faults import arm
from schedd_devstack.services import Cluster, ServiceProcess
from tests.fixtures.services import RunningCluster, schedctl as run_schedctl
from tests.polling import wait_until

pytestmark = [pytest.mark.e2e]

START = datetime(2025, 1, 1, tzinfo=UTC)
TTL = 2
FAST_LEASE = {"SCHEDD_LEASE_TTL": str(TTL), "SCHEDD_RENEW_DEADLINE": "1.4"}
SETTLE = 120.0


def schedctl(api: str, *args: str) -> str:
    result = run_schedctl(api, *args)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def register(api: str, directory: Path, spec: dict[str, Any]) -> None:
    path = directory / f"{spec['dag_id']}.yaml"
    path.write_text(yaml.safe_dump(json.loads(json.dumps(spec)), sort_keys=False))  # no shared nodes
    schedctl(api, "dags", "register", str(path))


def daily_dag(dag_id: str, command: str, *, pool: str = "") -> dict[str, Any]:
    """A daily DAG of three chained shell tasks."""
    task: dict[str, Any] = {"shell": {"command": command}}
    if pool:
        task["pool"] = pool
    return {
        "dag_id": dag_id,
        "schedule": "@daily",
        "start_date": "2025-01-01T00:00:00Z",
        "tasks": [
            {"task_id": "extract", **task},
            {"task_id": "transform", "upstream": ["extract"], **task},
            {"task_id": "load", "upstream": ["transform"], **task},
        ],
    }


def backfill(api: str, dag_id: str, days: int, *options: str) -> dict[str, Any]:
    out = schedctl(
        api,
        "-o",
        "json",
        "backfill",
        "create",
        dag_id,
        "--start",
        "2025-01-01",
        "--end",
        (START + timedelta(days=days - 1)).date().isoformat(),
        *options,
    )
    created: dict[str, Any] = json.loads(out)
    return created


def wait_backfill(api: str, name: str, timeout: float = SETTLE) -> dict[str, Any]:
    found: dict[str, Any] = {}

    def ended() -> bool:
        found.update(json.loads(schedctl(api, "-o", "json", "backfill", "get", name)))
        return found["state"] in (
            "succeeded",
            "failed",
            "cancelled",
        )

    wait_until(f"{name} to end", ended, timeout)
    return found


def run_spans(cluster: RunningCluster, dag_id: str) -> list[tuple[datetime, datetime, datetime]]:
    """(logical date, first task start, last task end) of each run of the DAG, by logical date."""
    rows = cluster.fetch(
        "SELECT r.logical_date, min(ti.started_at) AS began, max(ti.ended_at) AS ended FROM dag_runs r "
        "JOIN task_instances ti ON ti.run_pk = r.id WHERE r.dag_id = $1 AND r.run_type = 'backfill' "
        "GROUP BY r.id ORDER BY r.logical_date",
        dag_id,
    )
    return [(r["logical_date"], r["began"], r["ended"]) for r in rows]


def check_one_run_per_interval(cluster: RunningCluster | Cluster, dag_id: str, days: int) -> None:
    """Every day of the backfill has exactly one run, a backfill run, and it succeeded (the DAG's
    schedule makes its own run of the latest interval, which is not the backfill's)."""
    rows = cluster.fetch(
        "SELECT logical_date, count(*) AS n, bool_and(state = 'success') AS ok FROM dag_runs "
        "WHERE dag_id = $1 AND run_type = 'backfill' GROUP BY logical_date ORDER BY logical_date",
        dag_id,
    )
    assert [r["logical_date"] for r in rows] == [START + timedelta(days=n) for n in range(days)]
    assert all(r["n"] == 1 and r["ok"] for r in rows), rows


# --- strategies -------------------------------------------------------------------------------------------


def test_a_sequential_backfill_runs_one_interval_at_a_time_oldest_first(
    cluster: RunningCluster, tmp_path: Path
) -> None:
    register(cluster.api_address, tmp_path, daily_dag("seq", "sleep 0.02"))
    created = backfill(cluster.api_address, "seq", 30, "--strategy", "sequential")
    assert created["progress"]["total"] == 30
    final = wait_backfill(cluster.api_address, created["name"])
    assert final["state"] == "succeeded" and final["progress"]["succeeded"] == 30
    check_one_run_per_interval(cluster, "seq", 30)
    spans = run_spans(cluster, "seq")
    for earlier, later in itertools.pairwise(spans):
        assert earlier[2] <= later[1], f"run {later[0]} started before run {earlier[0]} ended"


def test_a_parallel_backfill_keeps_max_active_runs_going(cluster: RunningCluster, tmp_path: Path) -> None:
    register(cluster.api_address, tmp_path, daily_dag("par", "sleep 0.05"))
    created = backfill(cluster.api_address, "par", 30, "--strategy", "parallel", "--max-active-runs", "5")
    final = wait_backfill(cluster.api_address, created["name"])
    assert final["state"] == "succeeded"
    check_one_run_per_interval(cluster, "par", 30)
    spans = run_spans(cluster, "par")
    most = max(sum(1 for s in spans if s[1] <= at < s[2]) for _, at, _ in spans)
    assert 1 < most <= 5, f"{most} runs overlapped"


def test_a_chunked_backfill_starts_a_chunk_only_after_the_previous_one(
    cluster: RunningCluster, tmp_path: Path
) -> None:
    register(cluster.api_address, tmp_path, daily_dag("chunk", "sleep 0.02"))
    created = backfill(
        cluster.api_address, "chunk", 30, "--strategy", "chunked", "--chunk-size", "7", "--backward"
    )
    final = wait_backfill(cluster.api_address, created["name"])
    assert final["state"] == "succeeded"
    check_one_run_per_interval(cluster, "chunk", 30)
    rows = cluster.fetch(
        "SELECT i.chunk, min(ti.started_at) AS began, max(ti.ended_at) AS ended FROM backfill_intervals i "
        "JOIN task_instances ti ON ti.run_pk = i.run_pk WHERE i.backfill_id = $1 "
        "GROUP BY i.chunk ORDER BY i.chunk",
        int(created["name"].split("/")[1]),
    )
    assert len(rows) == 5  # 7 + 7 + 7 + 7 + 2 intervals, newest first
    for earlier, later in itertools.pairwise(rows):
        assert earlier["ended"] <= later["began"], (
            f"chunk {later['chunk']} started before chunk {earlier['chunk']} ended"
        )
    newest_chunk = cluster.fetch(
        "SELECT r.logical_date FROM backfill_intervals i JOIN dag_runs r ON r.id = i.run_pk "
        "WHERE i.backfill_id = $1 AND i.chunk = 0 ORDER BY r.logical_date",
        int(created["name"].split("/")[1]),
    )
    assert [r["logical_date"] for r in newest_chunk] == [START + timedelta(days=n) for n in range(23, 30)]


def test_a_failed_run_fails_a_sequential_backfill_and_reruns_on_request(
    cluster: RunningCluster, tmp_path: Path
) -> None:
    flag = tmp_path / "broken"
    flag.write_text("")
    command = f'if [ "$SCHEDD_LOGICAL_DATE" = "2025-01-03T00:00:00+00:00" ] && [ -e {flag} ]; then exit 3; fi'
    register(cluster.api_address, tmp_path, daily_dag("flaky", command))
    first = wait_backfill(
        cluster.api_address, backfill(cluster.api_address, "flaky", 5, "--strategy", "sequential")["name"]
    )
    assert first["state"] == "failed" and "2025-01-03" in first["error"]
    assert first["progress"] == {
        "total": 5,
        "pending": 2,
        "running": 0,
        "succeeded": 2,
        "failed": 1,
        "skipped": 0,
    }
    flag.unlink()
    again = backfill(
        cluster.api_address, "flaky", 5, "--strategy", "sequential", "--reprocess", "rerun_failed"
    )
    second = wait_backfill(cluster.api_address, again["name"])
    assert second["state"] == "succeeded"
    assert second["progress"] == {
        "total": 5,
        "pending": 0,
        "running": 0,
        "succeeded": 3,
        "failed": 0,
        "skipped": 2,
    }
    check_one_run_per_interval(cluster, "flaky", 5)


# --- fair sharing ---------------------------------------------------------------------------------------


def test_a_large_backfill_leaves_scheduled_runs_their_share_of_a_pool(
    cluster: RunningCluster, tmp_path: Path
) -> None:
    api = cluster.api_address
    schedctl(api, "pools", "set", "shared", "4", "--backfill-share", "0.5")
    register(api, tmp_path, daily_dag("history", "sleep 0.1", pool="shared"))
    now = datetime.now(UTC).replace(microsecond=0)
    register(
        api,
        tmp_path,
        {
            "dag_id": "live",
            "schedule_interval": "2s",
            "start_date": now.isoformat().replace("+00:00", "Z"),
            "tasks": [{"task_id": "tick", "pool": "shared", "shell": {"command": "sleep 0.05"}}],
        },
    )
    created = backfill(api, "history", 200, "--max-active-runs", "50")
    final = wait_backfill(api, created["name"], timeout=600)
    assert final["state"] == "succeeded"
    check_one_run_per_interval(cluster, "history", 200)
    history = cluster.fetch(
        "SELECT queued_at, claimed_at, ended_at FROM task_instances WHERE dag_id = 'history' "
        "ORDER BY queued_at"
    )
    last_admitted = history[-1]["queued_at"]
    live = cluster.fetch(
        "SELECT r.started_at AS run_started, ti.queued_at FROM dag_runs r JOIN task_instances ti "
        "ON ti.run_pk = r.id WHERE r.dag_id = 'live' AND r.started_at < $1 ORDER BY r.logical_date",
        last_admitted,
    )
    during = [r for r in live if r["run_started"] >= history[0]["queued_at"]]
    assert during, "no scheduled run started while the backfill ran"
    # Not starved: a scheduled task whose run started while backfill tasks still waited was queued no
    # later than the next backfill task was.
    assert all(r["queued_at"] is not None and r["queued_at"] <= last_admitted for r in during), during
    # Within the share: while a scheduled task waited (from its run's start until the pass that queued
    # it; that pass may lend backfills the slots left idle), no backfill task was admitted unless
    # backfills held fewer than their 2 slots (floor(0.5 * 4)). A pass reads the pool after its
    # transaction began (the admitted task's queued_at) and before it committed (before that task was
    # claimed), so a backfill task counts as held only if it still ran when the admitted one was
    # claimed: one that ended during the pass may have been seen free, rightly.
    for wait in during:
        for admitted in history:
            t = admitted["queued_at"]
            if not wait["run_started"] <= t < wait["queued_at"]:
                continue
            seen = admitted["claimed_at"]
            held = sum(
                1 for h in history if h["queued_at"] < t and (h["ended_at"] is None or h["ended_at"] > seen)
            )
            assert held < 2, f"a backfill task was admitted at {t} holding {held} slots while 'live' waited"
    print(f"\n{len(during)} scheduled runs during a 200-interval backfill of a 4-slot pool shared 50/50")


# --- fail-over ----------------------------------------------------------------------------------------------


@pytest.fixture
def two_schedulers(fresh_database_url: str, etcd_endpoints: str, tmp_path: Path) -> Iterator[Cluster]:
    cluster = Cluster(
        fresh_database_url,
        etcd_endpoints,
        tmp_path / "logs",
        schedulers=2,
        service_env=FAST_LEASE,
        scheduler_env={"SCHEDD_FAULTS": str(tmp_path / "faults")},
    )
    cluster.start()
    yield cluster
    cluster.stop()
    cluster.release_election()


def test_a_leader_frozen_mid_backfill_step_loses_and_doubles_no_run(
    two_schedulers: Cluster, tmp_path: Path
) -> None:
    cluster = two_schedulers
    token, _ = cluster.wait_for_leader()
    register(cluster.api_address, tmp_path, daily_dag("fo", "sleep 0.05"))
    hit = arm(tmp_path / "faults", "backfills.advanced", "stop")
    created = backfill(cluster.api_address, "fo", 30, "--max-active-runs", "4")
    wait_until("the leader to make the backfill's first runs", hit.exists, 30)
    pid = int(hit.read_text())
    frozen: ServiceProcess = next(p for p in cluster.schedulers.values() if p.pid == pid)
    try:
        cluster.wait_for_leader(above=token, timeout=TTL + 15)
    finally:
        frozen.resume()  # its step commits nothing: the fence moved on
    final = wait_backfill(cluster.api_address, created["name"])
    assert final["state"] == "succeeded"
    check_one_run_per_interval(cluster, "fo", 30)
    linked = cluster.fetchval(
        "SELECT count(DISTINCT run_pk) FROM backfill_intervals "
        "WHERE backfill_id = $1 AND status = 'succeeded'",
        int(created["name"].split("/")[1]),
    )
    assert linked == 30


# --- schedules ---------------------------------------------------------------------------------------------


def test_a_scheduled_dag_gets_its_runs_with_their_data_intervals(
    cluster: RunningCluster, tmp_path: Path
) -> None:
    api = cluster.api_address
    start = (datetime.now(UTC) - timedelta(seconds=3)).replace(microsecond=0)
    register(
        api,
        tmp_path,
        {
            "dag_id": "every_second",
            "schedule_interval": "1s",
            "start_date": start.isoformat().replace("+00:00", "Z"),
            "catchup": True,
            "params": {"limit": 10, "region": "eu"},
            "tasks": [
                {
                    "task_id": "show",
                    "shell": {"command": "echo $SCHEDD_RUN_TYPE $SCHEDD_DATA_INTERVAL_START $SCHEDD_PARAMS"},
                }
            ],
        },
    )
    wait_until(
        "three scheduled runs",
        lambda: (
            cluster.fetchval(
                "SELECT count(*) FROM dag_runs WHERE dag_id = 'every_second' AND state = 'success'"
            )
            >= 3
        ),
        60,
    )
    schedctl(api, "dags", "pause", "every_second")
    first = cluster.fetch(
        "SELECT run_id, logical_date, data_interval_start, data_interval_end FROM dag_runs "
        "WHERE dag_id = 'every_second' ORDER BY logical_date LIMIT 1"
    )[0]
    assert first["logical_date"] == start == first["data_interval_start"]
    assert first["data_interval_end"] == start + timedelta(seconds=1)
    shown = json.loads(schedctl(api, "-o", "json", "runs", "get", f"every_second/{first['run_id']}"))
    assert shown["run_type"] == "scheduled"
    assert shown["data_interval"]["start"].startswith(start.strftime("%Y-%m-%dT%H:%M:%S"))
    logs = schedctl(api, "tasks", "logs", f"every_second/{first['run_id']}", "show", "--no-timestamps")
    assert logs.split(" ", 2)[:2] == ["scheduled", start.isoformat()]
    assert json.loads(logs.split(" ", 2)[2]) == {"limit": 10, "region": "eu"}  # 10, not 10.0
    upcoming = json.loads(schedctl(api, "-o", "json", "dags", "next-runs", "every_second", "-n", "3"))
    assert len(upcoming) == 3


def test_a_leader_frozen_while_making_scheduled_runs_leaves_one_run_per_interval(
    two_schedulers: Cluster, tmp_path: Path
) -> None:
    cluster = two_schedulers
    token, _ = cluster.wait_for_leader()
    hit = arm(tmp_path / "faults", "schedules.created", "stop")
    start = (datetime.now(UTC) - timedelta(seconds=20)).replace(microsecond=0)
    register(
        cluster.api_address,
        tmp_path,
        {
            "dag_id": "ticks",
            "schedule_interval": "1s",
            "start_date": start.isoformat().replace("+00:00", "Z"),
            "catchup": True,
            "tasks": [{"task_id": "t", "shell": {"command": "true"}}],
        },
    )
    wait_until("the leader to make the first scheduled runs", hit.exists, 30)
    pid = int(hit.read_text())
    frozen: ServiceProcess = next(p for p in cluster.schedulers.values() if p.pid == pid)
    try:
        cluster.wait_for_leader(above=token, timeout=TTL + 15)
        wait_until(
            "runs", lambda: cluster.fetchval("SELECT count(*) FROM dag_runs WHERE dag_id = 'ticks'") >= 25, 60
        )
    finally:
        frozen.resume()  # the runs it made in its frozen step never commit
    schedctl(cluster.api_address, "dags", "pause", "ticks")
    rows = cluster.fetch("SELECT logical_date FROM dag_runs WHERE dag_id = 'ticks' ORDER BY logical_date")
    dates = [r["logical_date"] for r in rows]
    assert dates == [start + timedelta(seconds=n) for n in range(len(dates))], "a gap or a duplicate"
