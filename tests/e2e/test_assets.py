"""Assets end to end on a live stack with a real broker: a task's outlet triggers the DAG scheduled
on it, outside events through schedctl and the api, nested conditions, an asset-or-time schedule,
lineage, bad input refused naming the field (nothing recorded), and the leader's watchers turning a
Redis stream entry and a row of a PostgreSQL table into one event each."""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import grpc
import pytest
import redis
import yaml

from schedd.v1 import assets_pb2 as apb, assets_pb2_grpc
from schedd_core.database_url import asyncpg_dsn
from schedd_devstack.pg_databases import create_database, drop_database, with_database
from schedd_devstack.services import Cluster
from tests.fixtures.services import cluster_on_own_database, schedctl
from tests.polling import wait_until

pytestmark = pytest.mark.e2e

REDIS_URL = "redis://127.0.0.1:6379/0"
STREAM = f"schedd-test-{secrets.token_hex(6)}"
EXIT_REJECTED = 2


def watched_database(server_url: str, name: str) -> str:
    create_database(server_url, name)
    url = with_database(server_url, name)

    async def create() -> None:
        conn = await asyncpg.connect(asyncpg_dsn(url))
        try:
            await conn.execute("CREATE TABLE changes (id bigserial PRIMARY KEY, what text NOT NULL)")
        finally:
            await conn.close()

    asyncio.run(create())
    return url


@pytest.fixture(scope="module")
def stack(
    database_url: str, etcd_endpoints: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    watched_name = f"w_{secrets.token_hex(6)}"
    watched = watched_database(database_url, watched_name)
    watchers = [
        {
            "name": "orders-stream",
            "kind": "redis_stream",
            "url": REDIS_URL,
            "stream": STREAM,
            "asset": "redis://local/orders",
        },
        {
            "name": "changes-table",
            "kind": "postgres_table",
            "dsn": asyncpg_dsn(watched),
            "table": "changes",
            "channel": "changes",
            "poll_seconds": 5,
            "asset": "postgres://local/changes",
        },
    ]
    try:
        with cluster_on_own_database(
            database_url,
            etcd_endpoints,
            tmp_path_factory.mktemp("assets"),
            scheduler_env={"SCHEDD_ASSET_WATCHERS": json.dumps(watchers)},
        ) as cluster:
            cluster.watched_url = watched  # type: ignore[attr-defined]
            yield cluster
    finally:
        drop_database(database_url, watched_name)
        redis.Redis.from_url(REDIS_URL).delete(STREAM)


def register(cluster: Cluster, tmp_path: Path, spec: dict[str, Any]) -> None:
    path = tmp_path / f"{spec['dag_id']}.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    result = schedctl(cluster.api_address, "dags", "register", str(path))
    assert result.returncode == 0, result.stdout + result.stderr


def consumer(dag_id: str, schedule: dict[str, Any]) -> dict[str, Any]:
    return {
        "dag_id": dag_id,
        "asset_schedule": schedule,
        "tasks": [{"task_id": "t", "shell": {"command": "true"}}],
    }


def asset_runs(cluster: Cluster, dag_id: str) -> list[dict[str, Any]]:
    return cluster.fetch(
        "SELECT r.run_id, r.state, array_agg(c.event_id ORDER BY c.event_id) AS events FROM dag_runs r "
        "LEFT JOIN asset_event_consumptions c ON c.run_pk = r.id WHERE r.dag_id = $1 "
        "AND r.run_type = 'asset_triggered' GROUP BY r.id ORDER BY r.id",
        dag_id,
    )


def emit(cluster: Cluster, uri: str, *args: str) -> dict[str, Any]:
    result = schedctl(cluster.api_address, "-o", "json", "assets", "emit", uri, *args)
    assert result.returncode == 0, result.stdout + result.stderr
    event: dict[str, Any] = json.loads(result.stdout)
    return event


def test_a_task_outlet_triggers_the_dag_scheduled_on_it(stack: Cluster, tmp_path: Path) -> None:
    register(stack, tmp_path, consumer("report", {"asset": {"uri": "s3://lake/daily"}}))
    producer = {
        "dag_id": "load",
        "tasks": [
            {
                "task_id": "write",
                "shell": {"command": "true"},
                "outlets": [{"uri": "S3://LAKE/daily", "name": "daily"}],
            }
        ],
    }
    register(stack, tmp_path, producer)
    triggered = schedctl(stack.api_address, "runs", "trigger", "load", "--wait")
    assert triggered.returncode == 0, triggered.stdout + triggered.stderr
    runs = wait_until(
        "the asset-triggered run to succeed",
        lambda: [r for r in asset_runs(stack, "report") if r["state"] == "success"],
        60,
    )
    event = stack.fetch(
        "SELECT e.id, e.source_dag_id FROM asset_events e JOIN assets a ON a.id = e.asset_id "
        "WHERE a.uri = 's3://lake/daily'"
    )
    assert [(e["source_dag_id"]) for e in event] == ["load"]
    assert runs[0]["events"] == [event[0]["id"]]
    listed = schedctl(stack.api_address, "-o", "json", "assets", "events", "s3://lake/daily")
    shown = json.loads(listed.stdout)
    assert shown[0]["consumed_by"] == [f"dags/report/runs/{runs[0]['run_id']}"]
    assert shown[0]["source_task_id"] == "write"


def test_outside_events_meet_nested_conditions_each_consumed_once(stack: Cluster, tmp_path: Path) -> None:
    schedule = {
        "all": {
            "conditions": [
                {"asset": {"uri": "file://x/a"}},
                {"any": {"conditions": [{"asset": {"uri": "file://x/b"}}, {"asset": {"uri": "file://x/c"}}]}},
            ]
        }
    }
    register(stack, tmp_path, consumer("nested", schedule))
    first = emit(stack, "file://x/a", "--extra", '{"rows": 3}')
    assert first["extra"] == {"rows": 3}
    wait_until(
        "the leader to look at the event",
        lambda: stack.fetchval("SELECT count(*) FROM asset_dag_queue WHERE dag_id = 'nested'") == 1,
        30,
    )
    assert asset_runs(stack, "nested") == []
    second = emit(stack, "file://x/c")
    runs = wait_until("one run", lambda: asset_runs(stack, "nested"), 30)
    assert runs[0]["events"] == [int(first["id"]), int(second["id"])]
    again = emit(stack, "file://x/c", "--request-id", "c-1")
    assert (
        emit(stack, "file://x/c", "--request-id", "c-1")["id"] == again["id"]
    )  # a retry records nothing new
    emit(stack, "file://x/a")
    wait_until("a second run", lambda: len(asset_runs(stack, "nested")) == 2, 30)
    consumed = stack.fetch(
        "SELECT event_id, count(*) AS n FROM asset_event_consumptions "
        "WHERE dag_id = 'nested' GROUP BY event_id"
    )
    assert consumed and all(r["n"] == 1 for r in consumed)


def test_an_asset_or_time_schedule_runs_on_either(stack: Cluster, tmp_path: Path) -> None:
    start = (datetime.now(UTC) - timedelta(seconds=5)).replace(microsecond=0)
    spec = consumer("either", {"asset": {"uri": "file://x/either"}})
    spec.update(
        {
            "trigger": {"every": "3600s"},
            "catchup": True,
            "start_date": start.isoformat().replace("+00:00", "Z"),
        }
    )
    register(stack, tmp_path, spec)
    emit(stack, "file://x/either")
    wait_until("the asset-triggered run", lambda: asset_runs(stack, "either"), 30)
    kinds = wait_until(
        "the scheduled run at the start tick",
        lambda: (
            {r["run_type"] for r in stack.fetch("SELECT run_type FROM dag_runs WHERE dag_id = 'either'")}
            >= {"scheduled", "asset_triggered"}
        ),
        30,
    )
    assert kinds


def test_lineage_lists_producers_consumers_and_readers(stack: Cluster, tmp_path: Path) -> None:
    register(stack, tmp_path, consumer("lineage_consumer", {"asset": {"uri": "gs://b/lineage"}}))
    register(
        stack,
        tmp_path,
        {
            "dag_id": "lineage_producer",
            "tasks": [
                {
                    "task_id": "make",
                    "shell": {"command": "true"},
                    "outlets": [{"uri": "gs://b/lineage"}],
                    "inlets": [{"uri": "gs://b/source"}],
                }
            ],
        },
    )
    result = schedctl(stack.api_address, "-o", "json", "assets", "list", "--prefix", "gs://b/")
    found = {a["uri"]: a for a in json.loads(result.stdout)}
    assert found["gs://b/lineage"]["producers"] == [{"dag_id": "lineage_producer", "task_id": "make"}]
    assert found["gs://b/lineage"]["scheduled_dags"] == ["lineage_consumer"]
    assert found["gs://b/source"]["readers"] == [{"dag_id": "lineage_producer", "task_id": "make"}]
    table = schedctl(stack.api_address, "assets", "list", "--prefix", "gs://b/")
    assert "lineage_producer.make" in table.stdout and "lineage_consumer" in table.stdout


BAD_EMITS = [
    ("no scheme", ["orders"], "uri: 'orders' is not a URI"),
    ("credentials", ["s3://user:secret@bucket/key"], "uri: must not hold user information"),
    ("a NUL byte", ["s3://bucket/a\x01b"], "uri: 's3://bucket/a\\x01b' contains whitespace or a control"),
    ("a fragment", ["s3://bucket/key#part"], "uri: 's3://bucket/key#part' has a fragment"),
    ("an oversized extra", ["s3://b/k", "--extra", json.dumps({"x": "y" * 70000})], "extra: is 70008 bytes"),
    ("extra not an object", ["s3://b/k", "--extra", "[1]"], "--extra must be a JSON object"),
    ("extra not JSON", ["s3://b/k", "--extra", "{"], "--extra is not valid JSON"),
]


@pytest.mark.parametrize(("case", "args", "message"), BAD_EMITS, ids=[c[0] for c in BAD_EMITS])
def test_a_bad_event_is_refused_naming_the_field_and_records_nothing(
    stack: Cluster, case: str, args: list[str], message: str
) -> None:
    before = stack.fetchval("SELECT count(*) FROM asset_events")
    result = schedctl(stack.api_address, "assets", "emit", *args)
    assert result.returncode == EXIT_REJECTED, (case, result.stdout, result.stderr)
    assert message in " ".join(result.stderr.split()), result.stderr
    assert stack.fetchval("SELECT count(*) FROM asset_events") == before


def test_a_dag_with_a_bad_asset_uri_is_refused_naming_the_field(stack: Cluster, tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "dag_id": "bad_assets",
                "tasks": [{"task_id": "t", "shell": {"command": "true"}, "outlets": [{"uri": "no-scheme"}]}],
            }
        )
    )
    result = schedctl(stack.api_address, "dags", "register", str(path))
    assert result.returncode == EXIT_REJECTED
    assert "spec.tasks[0].outlets[0].uri" in result.stderr
    path.write_text(yaml.safe_dump(consumer("bad_assets", {"all": {"conditions": []}})))
    result = schedctl(stack.api_address, "dags", "register", str(path))
    assert result.returncode == EXIT_REJECTED
    assert "spec.asset_schedule.all: needs at least one condition" in result.stderr
    assert stack.fetchval("SELECT count(*) FROM dags WHERE dag_id = 'bad_assets'") == 0


def test_a_redis_stream_entry_becomes_one_event_and_triggers_a_run(stack: Cluster, tmp_path: Path) -> None:
    register(stack, tmp_path, consumer("from_stream", {"asset": {"uri": "redis://local/orders"}}))
    client = redis.Redis.from_url(REDIS_URL)
    added = client.xadd(STREAM, {"order": "42"})
    entry = added.decode() if isinstance(added, bytes) else added
    runs = wait_until("the run the entry triggers", lambda: asset_runs(stack, "from_stream"), 30)
    events = stack.fetch(
        "SELECT id, extra, idempotency_key FROM asset_events WHERE source = 'watcher' "
        "AND source_watcher = 'orders-stream'"
    )
    assert [(json.loads(e["extra"]), e["idempotency_key"]) for e in events] == [
        ({"order": "42"}, f"redis:orders-stream:{entry}")
    ]
    assert runs[0]["events"] == [events[0]["id"]]
    wait_until("the entry to be acknowledged", lambda: client.xpending(STREAM, "schedd")["pending"] == 0, 10)


def test_a_row_of_a_watched_table_becomes_one_event(stack: Cluster, tmp_path: Path) -> None:
    register(stack, tmp_path, consumer("from_table", {"asset": {"uri": "postgres://local/changes"}}))

    async def insert() -> None:
        conn = await asyncpg.connect(asyncpg_dsn(stack.watched_url))  # type: ignore[attr-defined]
        try:
            async with conn.transaction():
                await conn.execute("INSERT INTO changes (what) VALUES ('price'), ('stock')")
                await conn.execute("NOTIFY changes")
        finally:
            await conn.close()

    asyncio.run(insert())
    runs = wait_until("the run the rows trigger", lambda: asset_runs(stack, "from_table"), 30)
    keys = [
        r["idempotency_key"]
        for r in stack.fetch(
            "SELECT idempotency_key FROM asset_events WHERE source_watcher = 'changes-table' ORDER BY id"
        )
    ]
    assert keys == ["pg:changes-table:1", "pg:changes-table:2"]
    assert sum(len(r["events"]) for r in runs) == 2


def test_bad_reads_and_request_ids_are_refused_with_the_right_code(stack: Cluster) -> None:
    before = stack.fetchval("SELECT count(*) FROM asset_events")
    with grpc.insecure_channel(stack.api_address) as channel:
        stub = assets_pb2_grpc.AssetServiceStub(channel)
        for call, request, code, field in [
            (
                stub.ListAssets,
                apb.ListAssetsRequest(uri_prefix="s3://\x00"),
                "INVALID_ARGUMENT",
                "uri_prefix",
            ),
            (stub.ListAssets, apb.ListAssetsRequest(page_token="\x00"), "INVALID_ARGUMENT", "page_token"),
            (
                stub.ListAssetEvents,
                apb.ListAssetEventsRequest(consumed_by="runs/x"),
                "INVALID_ARGUMENT",
                "consumed_by",
            ),
            (stub.ListAssetEvents, apb.ListAssetEventsRequest(uri="nope"), "INVALID_ARGUMENT", "uri"),
            (
                stub.ListAssetEvents,
                apb.ListAssetEventsRequest(consumed_by="dags/none/runs/r"),
                "NOT_FOUND",
                "",
            ),
            (
                stub.CreateAssetEvent,
                apb.CreateAssetEventRequest(uri="s3://b/k", request_id="x" * 129),
                "INVALID_ARGUMENT",
                "request_id",
            ),
        ]:
            with pytest.raises(grpc.RpcError) as caught:
                call(request, timeout=30)
            assert caught.value.code().name == code, (request, caught.value.details())
            assert (caught.value.details() or "").startswith(field), caught.value.details()
    assert stack.fetchval("SELECT count(*) FROM asset_events") == before
