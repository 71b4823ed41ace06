"""A batch of results is applied by one statement in a transaction of its own
(``statements.APPLY_RESULTS``, ``schedd_store.dispatch.apply_results``): everything a result entails is
written and announced by that statement, and a successor it handed off is never left claimed but
unsent when what follows the commit fails (``schedd_registry.results``)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Mapping
from datetime import UTC, datetime

import pytest

from schedd.v1 import assets_pb2 as apb, resources_pb2 as pb, worker_pb2
from schedd_api import dags as dag_api
from schedd_core.claims import ClaimedAttempt, ClaimedWork
from schedd_exec.assignments import AssignmentBuilder
from schedd_registry.dispatcher import Dispatcher
from schedd_registry.results import ResultReports
from schedd_registry.sessions import WorkerSession
from schedd_rpc import convert
from schedd_store import channels, dispatch
from schedd_store.claims import AssignmentClaims
from schedd_store.database import Connection, Engine
from schedd_store.named_sql import Statement
from schedd_store.notify import Listener

from .helpers import finish_all_running, leading_loop, registered_run, spec

pytestmark = pytest.mark.integration


async def _planned(engine: Engine, dag: pb.DagSpec) -> None:
    """A run of ``dag`` planned by a leader, worker ``w`` connected."""
    await dispatch.register_worker(
        engine, worker_id="w", hostname="h", queues=["default"], capacity=4, code_version="",
        registry="r", incarnation="i", running=[], fence_window=10.0, silence_limit=10.0,
    )  # fmt: skip
    run = await registered_run(engine, dag)
    await (await leading_loop(engine)).evaluate([run.pk])


async def _notified(url: str, channel: str, act: Awaitable[object]) -> list[str]:
    """The payloads on ``channel`` while ``act`` (a coroutine) ran, waited for up to 10 s."""
    heard: list[str] = []
    got = asyncio.Event()

    def on(payload: str) -> None:
        heard.append(payload)
        got.set()

    listener = Listener(url, {channel: on})
    await listener.start()
    try:
        await act
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(got.wait(), timeout=10)
    finally:
        await listener.stop()
    return heard


async def test_a_result_with_callbacks_wakes_the_relay_by_its_own_statement(
    engine: Engine, migrated_url: str
) -> None:
    dag = spec("cb", {"a": []})
    dag.tasks[0].on_success.append(pb.Callback(webhook_url="http://127.0.0.1:9/hook"))
    await _planned(engine, dag)
    heard = await _notified(migrated_url, channels.OUTBOX, finish_all_running(engine))
    assert heard, "the callback queued by the result statement must wake the relay"
    async with engine.connect() as conn:
        topics = (await conn.execute(Statement("SELECT topic FROM outbox"))).scalars()
    assert list(topics) == ["task_callback"]


async def test_an_outlet_event_wakes_the_leader_for_the_dag_it_queues(
    engine: Engine, migrated_url: str
) -> None:
    await dag_api.register(
        engine,
        pb.DagSpec(
            dag_id="reader",
            tasks=[pb.TaskSpec(task_id="read", shell=pb.ShellCommand(command="true"))],
            asset_schedule=apb.AssetCondition(asset=apb.AssetRef(uri="s3://data/orders")),
        ),
    )
    writer = spec("writer", {"write": []})
    writer.tasks[0].outlets.append(apb.AssetRef(uri="s3://data/orders"))
    run = await registered_run(engine, writer)
    await (await leading_loop(engine)).evaluate([run.pk])
    heard = await _notified(migrated_url, channels.ASSETS, finish_all_running(engine))
    assert heard == ["reader"]


class _UnreadableClaims(AssignmentClaims):
    """Reading what a handed-off successor's assignment is built from fails: the database went away
    right after the result's statement committed."""

    async def hand_off(
        self, conn: Connection, claimed: Mapping[int, ClaimedAttempt]
    ) -> dict[int, ClaimedWork]:
        raise ConnectionResetError("the connection was reset")


async def test_a_successor_claimed_but_not_sent_ends_its_workers_stream(engine: Engine) -> None:
    await _planned(engine, spec("handoffs", {"a": [], "b": ["a"]}))
    (a,) = await dispatch.claim(engine, worker_id="w", queues=["default"], limit=10)
    dispatcher = Dispatcher(engine, AssignmentBuilder(_UnreadableClaims(engine)), claim_batch=10)
    session = WorkerSession(worker_id="w", queues=("default",), capacity=4, credits=1)
    session.hands_off.add(a.attempt_id)
    dispatcher.attach(session)
    reports = ResultReports(engine, dispatcher)
    batches = asyncio.create_task(reports.batcher.run())
    result = worker_pb2.TaskResult(
        attempt=worker_pb2.AttemptRef(
            task_instance_id=a.ti_id, attempt_id=a.attempt_id, try_number=a.try_number
        ),
        outcome=worker_pb2.TASK_OUTCOME_SUCCEEDED,
        end_time=convert.ts(datetime.now(UTC)),
    )
    try:
        await asyncio.wait_for(reports.report(result, session), timeout=30)
    finally:
        batches.cancel()
    assert session.end_reason, "the stream of a worker owed a successor it was not sent must end"
    async with engine.connect() as conn:
        b = (
            await conn.execute(
                Statement("SELECT state, worker_id, lost_reported FROM task_instances WHERE task_id = 'b'")
            )
        ).one()
    assert (b.state, b.worker_id, b.lost_reported) == ("running", "w", False), "b was claimed for w"
    # w connects again without b: b is counted lost, for the leader to run it again
    await dispatch.register_worker(
        engine, worker_id="w", hostname="h", queues=["default"], capacity=4, code_version="",
        registry="r", incarnation="i", running=[], fence_window=10.0, silence_limit=10.0,
    )  # fmt: skip
    async with engine.connect() as conn:
        lost = (
            await conn.execute(Statement("SELECT lost_reported FROM task_instances WHERE task_id = 'b'"))
        ).scalar_one()
    assert lost
