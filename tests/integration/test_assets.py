"""Assets through the real store and the leader's asset trigger: outlet events recorded with the
task's success (and never without it), conditions on assets, each event consumed once per DAG,
fenced, and idempotent outside events."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from schedd.v1 import assets_pb2 as apb, resources_pb2 as pb
from schedd_api import dags as dag_api
from schedd_core.errors import FencedOut
from schedd_devstack.faults import arm
from schedd_faults import FaultPoints
from schedd_faults.points import InjectedFault
from schedd_scheduler.asset_triggers import AssetTrigger
from schedd_store import asset_triggers, assets, deletion
from schedd_store.database import Engine
from schedd_store.fence import Fence, raise_fence
from schedd_store.named_sql import Statement
from schedd_store.versions import VersionCache
from tests.asset_conditions import all_of, any_of, one as ref
from tests.integration.helpers import finish_all_running, leading_loop, registered_run

pytestmark = pytest.mark.integration

ORDERS = "s3://data/orders"
USERS = "s3://data/users"


def producer(dag_id: str, *uris: str) -> pb.DagSpec:
    return pb.DagSpec(
        dag_id=dag_id,
        tasks=[
            pb.TaskSpec(
                task_id="write",
                shell=pb.ShellCommand(command="true"),
                outlets=[apb.AssetRef(uri=u) for u in uris],
            )
        ],
    )


async def consumer(engine: Engine, dag_id: str, condition: apb.AssetCondition) -> None:
    spec = pb.DagSpec(
        dag_id=dag_id,
        tasks=[pb.TaskSpec(task_id="read", shell=pb.ShellCommand(command="true"))],
        asset_schedule=condition,
    )
    await dag_api.register(engine, spec)


async def trigger(engine: Engine, token: int = 1, faults: FaultPoints | None = None) -> AssetTrigger:
    await raise_fence(engine, token, f"test-{token}")
    return AssetTrigger(Fence(engine, token), VersionCache(), faults=faults)


async def emit(engine: Engine, uri: str, key: str | None = None) -> None:
    await assets.create_event(engine, assets.NewEvent(uri, {"n": 1}, key))


async def asset_runs(engine: Engine, dag_id: str) -> list[list[int]]:
    """The event ids each asset-triggered run of the DAG consumed, by run."""
    async with engine.connect() as conn:
        rows = (
            await conn.execute(
                Statement(
                    "SELECT r.id, array_agg(c.event_id ORDER BY c.event_id) AS events FROM dag_runs r "
                    "LEFT JOIN asset_event_consumptions c ON c.run_pk = r.id WHERE r.dag_id = :d "
                    "AND r.run_type = 'asset_triggered' GROUP BY r.id ORDER BY r.id"
                ),
                {"d": dag_id},
            )
        ).all()
    return [list(r.events) for r in rows]


async def test_a_task_success_records_its_outlet_events_in_the_result_transaction(
    engine: Engine,
) -> None:
    await consumer(engine, "reader", ref(ORDERS))
    await dag_api.register(engine, producer("writer", "S3://DATA/orders", USERS))  # stored normalised
    run = await registered_run(engine, producer("writer", ORDERS, USERS))
    loop = await leading_loop(engine)
    await loop.evaluate([run.pk])
    await finish_all_running(engine, result_json=json.dumps({"asset_extra": {"rows": 42}}))
    events = await assets.list_events(engine, uri=ORDERS, run_pk=None, before=2**62, limit=10)
    assert [(e.source, e.source_dag_id, e.source_task_id, e.extra) for e in events] == [
        ("task", "writer", "write", {"rows": 42})
    ]
    assert len(await assets.list_events(engine, uri=USERS, run_pk=None, before=2**62, limit=10)) == 1
    made = await trigger(engine, token=2)
    await made.step()
    assert await asset_runs(engine, "reader") == [[events[0].id]]


async def test_a_failed_task_records_no_event(engine: Engine) -> None:
    run = await registered_run(engine, producer("writer", ORDERS))
    loop = await leading_loop(engine)
    await loop.evaluate([run.pk])
    await finish_all_running(engine, succeed=False)
    assert await assets.list_events(engine, uri="", run_pk=None, before=2**62, limit=10) == []


async def test_all_of_waits_for_every_asset_and_consumes_every_queued_event(engine: Engine) -> None:
    await consumer(engine, "both", all_of(ref(ORDERS), ref(USERS)))
    await consumer(engine, "either", any_of(ref(ORDERS), all_of(ref(USERS), ref("s3://data/x"))))
    made = await trigger(engine)
    await emit(engine, ORDERS)
    await emit(engine, ORDERS)
    await made.step()
    assert await asset_runs(engine, "both") == []
    assert await asset_runs(engine, "either") == [[1, 2]]
    await emit(engine, USERS)
    await made.step()
    assert await asset_runs(engine, "both") == [[1, 2, 3]]
    assert await asset_runs(engine, "either") == [[1, 2]]  # users alone does not meet all(users, x)
    await made.step()
    assert await asset_runs(engine, "both") == [[1, 2, 3]]


async def test_a_deposed_leader_consumes_nothing(engine: Engine) -> None:
    await consumer(engine, "reader", ref(ORDERS))
    old = await trigger(engine, token=1)
    new = await trigger(engine, token=2)
    await emit(engine, ORDERS)
    with pytest.raises(FencedOut):
        await old.step()
    assert await asset_runs(engine, "reader") == []
    await new.step()
    assert await asset_runs(engine, "reader") == [[1]]


async def test_a_step_that_fails_before_commit_leaves_its_events_for_the_next(
    engine: Engine, tmp_path: Path
) -> None:
    await consumer(engine, "reader", ref(ORDERS))
    await emit(engine, ORDERS)
    arm(tmp_path, "assets.runs_made", "fail")
    failing = await trigger(engine, token=1, faults=FaultPoints(tmp_path))
    with pytest.raises(InjectedFault):
        await failing.step()
    assert await asset_runs(engine, "reader") == []
    await (await trigger(engine, token=2)).step()
    assert await asset_runs(engine, "reader") == [[1]]


async def test_a_second_consumption_of_an_event_by_a_dag_is_refused_by_name(engine: Engine) -> None:
    await consumer(engine, "reader", ref(ORDERS))
    await emit(engine, ORDERS)
    made = await trigger(engine)
    await made.step()
    fence = Fence(engine, 1)
    again = asset_triggers.AssetRun("reader", 1, (1,))
    with pytest.raises(asset_triggers.EventConsumed):
        async with fence.transaction() as conn:
            pks = await asset_triggers.make_runs(conn, [again], now=datetime.now(UTC))
            await asset_triggers.consume(conn, [again], pks)
    assert await asset_runs(engine, "reader") == [[1]]


async def test_an_event_with_a_recorded_key_records_nothing_new(engine: Engine) -> None:
    await consumer(engine, "reader", ref(ORDERS))
    await emit(engine, ORDERS, key="api:once")
    await emit(engine, ORDERS, key="api:once")
    assert len(await assets.list_events(engine, uri=ORDERS, run_pk=None, before=2**62, limit=10)) == 1
    made = await trigger(engine)
    await made.step()
    assert await asset_runs(engine, "reader") == [[1]]


async def test_lineage_names_producers_consumers_and_readers(engine: Engine) -> None:
    spec = producer("writer", ORDERS)
    spec.tasks[0].inlets.append(apb.AssetRef(uri=USERS))
    await dag_api.register(engine, spec)
    await consumer(engine, "reader", any_of(ref(ORDERS), ref(USERS)))
    found = {a.uri: a for a in await assets.list_assets(engine, prefix="s3://", after="", limit=10)}
    assert found[ORDERS].producers == [("writer", "write")]
    assert found[ORDERS].scheduled_dags == ["reader"]
    assert found[USERS].readers == [("writer", "write")]
    assert found[USERS].scheduled_dags == ["reader"]


async def test_deleting_dags_keeps_the_events_they_produced_and_drops_what_they_consumed(
    engine: Engine,
) -> None:
    await consumer(engine, "reader", ref(ORDERS))
    await dag_api.register(engine, producer("writer", ORDERS))
    run = await registered_run(engine, producer("writer", ORDERS))
    loop = await leading_loop(engine)
    await loop.evaluate([run.pk])
    await finish_all_running(engine)
    await (await trigger(engine, token=2)).step()
    async with engine.begin() as conn:
        await conn.execute(Statement("UPDATE dag_runs SET state = 'success'"))
    await deletion.delete_dag(engine, "reader")
    await deletion.delete_dag(engine, "writer")
    (event,) = await assets.list_events(engine, uri=ORDERS, run_pk=None, before=2**62, limit=10)
    assert (event.source_dag_id, event.source_run_id, event.consumed_by) == ("writer", "", [])
