"""Asset scheduling under leader faults injected at the exact point that matters: the leader killed
or frozen after making an asset-triggered run and before committing it, and a watcher's leader
killed after committing a Redis stream entry's event and before acknowledging the entry. Each event
is consumed once per DAG, and each stream entry becomes one event."""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
import yaml

from schedd_devstack.faults import arm
from schedd_devstack.services import Cluster, ServiceProcess
from tests.fixtures.services import schedctl as run_schedctl
from tests.polling import wait_until

pytestmark = [pytest.mark.chaos, pytest.mark.e2e]

TTL = 2
FAST_LEASE = {"SCHEDD_LEASE_TTL": str(TTL), "SCHEDD_RENEW_DEADLINE": "1.4"}
LIVENESS = TTL + 15.0
REDIS_URL = "redis://127.0.0.1:6379/0"
ASSET = "s3://lake/facts"
STREAM_ASSET = "redis://local/facts"


@pytest.fixture
def stream() -> Iterator[str]:
    name = f"schedd-chaos-{secrets.token_hex(6)}"
    yield name
    redis.Redis.from_url(REDIS_URL).delete(name)


@pytest.fixture
def cluster(fresh_database_url: str, etcd_endpoints: str, tmp_path: Path, stream: str) -> Iterator[Cluster]:
    watchers = [
        {"name": "facts", "kind": "redis_stream", "url": REDIS_URL, "stream": stream, "asset": STREAM_ASSET}
    ]
    cluster = Cluster(
        fresh_database_url,
        etcd_endpoints,
        tmp_path / "logs",
        schedulers=2,
        workers=1,
        service_env=FAST_LEASE,
        scheduler_env={
            "SCHEDD_FAULTS": str(tmp_path / "faults"),
            "SCHEDD_ASSET_WATCHERS": json.dumps(watchers),
        },
    )
    cluster.start()
    yield cluster
    cluster.stop()
    cluster.release_election()


def schedctl(cluster: Cluster, *args: str) -> str:
    result = run_schedctl(cluster.api_address, *args)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def register_consumer(cluster: Cluster, directory: Path, dag_id: str, uri: str) -> None:
    spec: dict[str, Any] = {
        "dag_id": dag_id,
        "asset_schedule": {"asset": {"uri": uri}},
        "tasks": [{"task_id": "t", "shell": {"command": "true"}}],
    }
    path = directory / f"{dag_id}.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    schedctl(cluster, "dags", "register", str(path))


def consumptions(cluster: Cluster, dag_id: str) -> list[tuple[int, int]]:
    """(event id, run pk) of every consumption by the DAG."""
    rows = cluster.fetch(
        "SELECT event_id, run_pk FROM asset_event_consumptions WHERE dag_id = $1 ORDER BY event_id", dag_id
    )
    return [(r["event_id"], r["run_pk"]) for r in rows]


def asset_run_count(cluster: Cluster, dag_id: str) -> int:
    return int(
        cluster.fetchval(
            "SELECT count(*) FROM dag_runs WHERE dag_id = $1 AND run_type = 'asset_triggered'", dag_id
        )
    )


def emit(cluster: Cluster, uri: str) -> int:
    return int(json.loads(schedctl(cluster, "-o", "json", "assets", "emit", uri))["id"])


def the_process(cluster: Cluster, hit: Path) -> ServiceProcess:
    pid = int(hit.read_text())
    return next(p for p in cluster.schedulers.values() if p.pid == pid)


def test_a_leader_killed_between_recording_events_and_making_the_run_makes_it_once(
    cluster: Cluster, tmp_path: Path
) -> None:
    token, _ = cluster.wait_for_leader()
    register_consumer(cluster, tmp_path, "facts_report", ASSET)
    hit = arm(tmp_path / "faults", "assets.runs_made", "kill")
    event = emit(cluster, ASSET)
    wait_until("the leader to make the run and die before committing", hit.exists, LIVENESS, interval=0.02)
    killed = the_process(cluster, hit)
    wait_until("the killed leader to be gone", lambda: not killed.alive, 10, interval=0.02)
    killed.kill()  # reaped: the cluster counts it as stopped, not as a process that died on its own
    cluster.wait_for_leader(above=token, timeout=LIVENESS)
    made = wait_until(
        "the next leader to make the run", lambda: consumptions(cluster, "facts_report"), LIVENESS
    )
    assert [e for e, _ in made] == [event]
    assert asset_run_count(cluster, "facts_report") == 1
    assert cluster.fetchval("SELECT count(*) FROM asset_dag_queue") == 0


def test_a_leader_frozen_before_committing_its_asset_run_commits_nothing_when_thawed(
    cluster: Cluster, tmp_path: Path
) -> None:
    token, _ = cluster.wait_for_leader()
    register_consumer(cluster, tmp_path, "facts_frozen", ASSET)
    hit = arm(tmp_path / "faults", "assets.runs_made", "stop")
    first = emit(cluster, ASSET)
    wait_until("the leader to make the run and stop", hit.exists, LIVENESS, interval=0.02)
    frozen = the_process(cluster, hit)
    try:
        cluster.wait_for_leader(above=token, timeout=LIVENESS)
        wait_until("the next leader to make the run", lambda: consumptions(cluster, "facts_frozen"), LIVENESS)
    finally:
        frozen.resume()  # its transaction was ended by PostgreSQL or fails at the fence: nothing lands
    second = emit(cluster, ASSET)  # made by the new leader, after the thawed one had its chance
    made = wait_until("the second run", lambda: len(consumptions(cluster, "facts_frozen")) == 2, LIVENESS)
    assert made
    events = [e for e, _ in consumptions(cluster, "facts_frozen")]
    assert events == [first, second]
    assert asset_run_count(cluster, "facts_frozen") == 2


def test_a_watcher_killed_between_commit_and_acknowledgement_records_the_entry_once(
    cluster: Cluster, tmp_path: Path, stream: str
) -> None:
    token, _ = cluster.wait_for_leader()
    register_consumer(cluster, tmp_path, "facts_stream", STREAM_ASSET)
    client = redis.Redis.from_url(REDIS_URL)
    wait_until("the watcher's consumer group", lambda: client.exists(stream), LIVENESS)
    hit = arm(tmp_path / "faults", "watchers.committed", "kill")
    added = client.xadd(stream, {"fact": "1"})
    entry = added.decode() if isinstance(added, bytes) else added
    wait_until("the leader to commit the entry's event and die", hit.exists, LIVENESS, interval=0.02)
    killed = the_process(cluster, hit)
    wait_until("the killed leader to be gone", lambda: not killed.alive, 10, interval=0.02)
    killed.kill()  # reaped: the cluster counts it as stopped, not as a process that died on its own
    assert client.xpending(stream, "schedd")["pending"] == 1  # committed, never acknowledged
    cluster.wait_for_leader(above=token, timeout=LIVENESS)
    wait_until(
        "the next leader to acknowledge the entry",
        lambda: client.xpending(stream, "schedd")["pending"] == 0,
        LIVENESS,
    )
    keys = [r["idempotency_key"] for r in cluster.fetch("SELECT idempotency_key FROM asset_events")]
    assert keys == [f"redis:facts:{entry}"]
    wait_until("the run", lambda: consumptions(cluster, "facts_stream"), LIVENESS)
    assert asset_run_count(cluster, "facts_stream") == 1
