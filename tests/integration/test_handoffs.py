"""Successor hand-offs against the real store: the leader writes them in its fenced pass, the
result transaction uses them, and every assumption the leader made is checked again at that moment
(``schedd_store.handoffs``, ``statements.HAND_OFF``)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Sequence
from datetime import UTC, datetime
from typing import TypeVar

import pytest

from schedd.v1 import resources_pb2 as pb
from schedd_core.claims import ClaimedAttempt, ClaimedWork
from schedd_exec.assignments import assignment_of
from schedd_scheduler.loop import SchedulingLoop
from schedd_store import channels, control, dispatch, runs
from schedd_store.claims import AssignmentClaims
from schedd_store.database import Connection, Engine
from schedd_store.dispatch import AttemptResult, ReportStatus
from schedd_store.fence import raise_fence
from schedd_store.named_sql import Statement
from schedd_store.notify import Listener
from schedd_store.records import RunRecord

from .helpers import leading_loop, registered_run, spec

pytestmark = pytest.mark.integration

T = TypeVar("T")

CHAIN = {"a": [], "b": ["a"], "c": ["b"]}


async def _worker(engine: Engine, worker_id: str = "w", queues: Sequence[str] = ("default",)) -> None:
    await dispatch.register_worker(
        engine,
        worker_id=worker_id,
        hostname="h",
        queues=list(queues),
        capacity=4,
        code_version="",
        registry="r",
        incarnation="i",
        running=[],
        fence_window=10.0,
        silence_limit=10.0,
    )


async def _succeed(
    engine: Engine, claimed: ClaimedAttempt, *, hand_off: bool = True, succeeded: bool = True
) -> dict[int, ClaimedWork]:
    """Report ``claimed`` ended (asking for its hand-off) as its worker's registry does; returns what
    the same transaction handed off, by source."""
    handed: dict[int, ClaimedWork] = {}
    claims = AssignmentClaims(engine)

    async def take(conn: Connection, claimed: dict[int, ClaimedAttempt], *, committed: bool) -> None:
        handed.update(await claims.hand_off(conn, claimed))

    result = AttemptResult(
        worker_id=claimed.worker_id,
        ti_id=claimed.ti_id,
        attempt_id=claimed.attempt_id,
        try_number=claimed.try_number,
        succeeded=succeeded,
        exit_code=0 if succeeded else 1,
        error="",
        ended_at=datetime.now(UTC),
        hand_off=hand_off,
    )
    (status,) = await dispatch.apply_results(engine, [result], hand_off=take)
    assert status is ReportStatus.APPLIED
    return handed


async def _started(
    engine: Engine, edges: dict[str, list[str]]
) -> tuple[RunRecord, SchedulingLoop, ClaimedAttempt]:
    """A run of ``edges`` planned by a leader (token 1), its first task claimed by worker ``w``."""
    await _worker(engine)
    run = await registered_run(engine, spec("handoffs", edges))
    loop = await leading_loop(engine)
    await loop.evaluate([run.pk])
    (claimed,) = await dispatch.claim(engine, worker_id="w", queues=["default"], limit=10)
    return run, loop, claimed


async def _states(engine: Engine) -> dict[str, str]:
    run = await runs.get_run(engine, "handoffs", "r1")
    return {t.task_id: t.state for t in run.task_instances}


async def _ti_id(engine: Engine, task_id: str) -> int:
    async with engine.connect() as conn:
        found = await conn.execute(
            Statement("SELECT id FROM task_instances WHERE task_id = :t"), {"t": task_id}
        )
        return int(found.scalar_one())


async def _sql(engine: Engine, statement: str, **params: object) -> None:
    async with engine.begin() as conn:
        await conn.execute(Statement(statement), params)


async def test_a_chain_runs_through_hand_offs_without_the_leader(engine: Engine) -> None:
    run, loop, a = await _started(engine, CHAIN)
    handed = await _succeed(engine, a)
    (b,) = handed.values()
    assert b.attempt.task_id == "b" and b.attempt.worker_id == "w" and b.attempt.hands_off
    assert await _states(engine) == {"a": "success", "b": "running", "c": "none"}
    (c,) = (await _succeed(engine, b.attempt)).values()
    assert c.attempt.task_id == "c" and not c.attempt.hands_off
    assert await _succeed(engine, c.attempt) == {}
    # The leader, told of each change, finds nothing left to queue and finishes the run.
    assert await loop.evaluate([run.pk]) == 0
    assert (await runs.get_run(engine, "handoffs", "r1")).state == "success"


async def test_the_handed_off_assignment_carries_its_upstream_result(engine: Engine) -> None:
    _, _, a = await _started(engine, CHAIN)
    claims = AssignmentClaims(engine)
    handed: dict[int, ClaimedWork] = {}

    async def take(conn: Connection, claimed: dict[int, ClaimedAttempt], *, committed: bool) -> None:
        handed.update(await claims.hand_off(conn, claimed))

    result = AttemptResult(
        worker_id="w", ti_id=a.ti_id, attempt_id=a.attempt_id, try_number=a.try_number, succeeded=True,
        exit_code=0, error="", ended_at=datetime.now(UTC), result_json='{"rows": 3}', hand_off=True,
    )  # fmt: skip
    await dispatch.apply_results(engine, [result], hand_off=take)
    (b,) = handed.values()
    assert b.upstream == {"a": {"rows": 3}}
    # b hands off to c in turn: its worker is told, and sends b's result without holding it back
    assert assignment_of(b).hands_off


async def test_a_leader_that_sees_the_hand_off_queues_nothing_twice(engine: Engine) -> None:
    run, loop, a = await _started(engine, CHAIN)
    await _succeed(engine, a)
    assert await loop.evaluate([run.pk]) == 0
    assert await _states(engine) == {"a": "success", "b": "running", "c": "none"}
    async with engine.connect() as conn:
        attempts = (await conn.execute(Statement("SELECT count(*) FROM task_attempts"))).scalar()
    assert attempts == 2


@pytest.mark.parametrize(
    "change",
    [
        "a newer term raised the fence",
        "the run was changed by hand",
        "the run was cancelled",
        "the DAG was paused",
        "the worker drains",
        "the worker does not serve the queue",
        "a more important task instance waits in the pool",
        "an equally important, older task instance waits in the pool",
        "the pool shrank to nothing",
        "a more important task waits in the queue",
        "the successor was marked by hand",
    ],
)
async def test_a_hand_off_whose_assumptions_moved_does_nothing(
    engine: Engine, migrated_url: str, change: str
) -> None:
    run, _, a = await _started(engine, CHAIN)
    b_id = await _ti_id(engine, "b")
    if change == "a newer term raised the fence":
        await raise_fence(engine, 2, "test-2")
    elif change == "the run was changed by hand":
        await _sql(engine, "UPDATE dag_runs SET control_version = 7 WHERE id = :pk", pk=run.pk)
    elif change == "the run was cancelled":
        await _sql(engine, "UPDATE dag_runs SET state = 'failed' WHERE id = :pk", pk=run.pk)
    elif change == "the DAG was paused":
        await _sql(engine, "UPDATE dags SET paused = true WHERE dag_id = 'handoffs'")
    elif change == "the worker drains":
        await dispatch.mark_worker_draining(engine, "w")
    elif change == "the worker does not serve the queue":
        await _sql(engine, "UPDATE task_instances SET queue = 'gpu' WHERE id = :id", id=b_id)
    elif change == "a more important task instance waits in the pool":
        await _waiting_in_pool(engine, priority_weight=100, logical_date="now()")
    elif change == "an equally important, older task instance waits in the pool":  # b's weight: 2
        await _waiting_in_pool(engine, priority_weight=2, logical_date="now() - interval '1 day'")
    elif change == "the pool shrank to nothing":
        await _sql(engine, "UPDATE pools SET slots = 0 WHERE name = 'default_pool'")
    elif change == "a more important task waits in the queue":
        other = await registered_run(engine, spec("other", {"x": []}), run_id="o1")
        await _sql(
            engine,
            "INSERT INTO task_instances (run_pk, dag_id, task_id, state, pool, queue, logical_date, "
            "priority_weight) SELECT :pk, 'other', 'x', 'queued', 'default_pool', 'default', now(), 100",
            pk=other.pk,
        )
    elif change == "the successor was marked by hand":
        await _sql(engine, "UPDATE task_instances SET state = 'skipped' WHERE id = :id", id=b_id)
    handed, told = await _told(engine, migrated_url, _succeed(engine, a))
    assert handed == {}
    states = await _states(engine)
    assert states["a"] == "success" and states["b"] in ("none", "skipped")
    # Nothing was handed off: the leader is told at once, to queue b the usual way.
    assert told == {channels.RUNS: [f"{run.pk}/{a.ti_id}"], channels.RUNS_HANDED_OFF: []}


async def _waiting_in_pool(engine: Engine, *, priority_weight: int, logical_date: str) -> None:
    """A task instance of another DAG waiting for a slot of the default pool."""
    other = await registered_run(engine, spec("other", {"x": []}), run_id="o1")
    await _sql(
        engine,
        "INSERT INTO task_instances (run_pk, dag_id, task_id, state, pool, queue, logical_date, "
        f"priority_weight) SELECT :pk, 'other', 'x', 'scheduled', 'default_pool', 'default', {logical_date}, "
        ":weight",
        pk=other.pk,
        weight=priority_weight,
    )


async def test_a_less_important_task_waiting_in_the_pool_does_not_hold_the_hand_off_back(
    engine: Engine,
) -> None:
    """The leader's admission would give the source's slot to the successor first (its weight is 2,
    the waiting one's 1), so the hand-off takes it: a burst of other runs waiting for the pool does
    not send a more important chain through the leader."""
    _, _, a = await _started(engine, CHAIN)
    await _waiting_in_pool(engine, priority_weight=1, logical_date="now() - interval '1 day'")
    (b,) = (await _succeed(engine, a)).values()
    assert b.attempt.task_id == "b"
    assert (await _states(engine))["b"] == "running"


async def test_a_paused_dags_task_instance_waiting_in_the_pool_does_not_hold_the_hand_off_back(
    engine: Engine,
) -> None:
    """Pausing a DAG takes its task instances out of the pool's wait (back to none; the leader plans
    them again when it is unpaused), so a paused DAG that had one waiting does not send every chain
    of the pool through the leader for as long as it stays paused."""
    _, _, a = await _started(engine, CHAIN)
    await _waiting_in_pool(engine, priority_weight=100, logical_date="now()")
    await control.set_paused(engine, "other", True)
    (b,) = (await _succeed(engine, a)).values()
    assert b.attempt.task_id == "b"
    assert (await _states(engine))["b"] == "running"


async def test_a_full_pool_hands_the_slot_its_source_frees_to_the_successor(engine: Engine) -> None:
    _, _, a = await _started(engine, CHAIN)
    await _sql(engine, "UPDATE pools SET slots = 1 WHERE name = 'default_pool'")  # a holds the one slot
    (b,) = (await _succeed(engine, a)).values()
    assert b.attempt.task_id == "b"
    assert await _states(engine) == {"a": "success", "b": "running", "c": "none"}


async def test_a_failure_hands_nothing_off(engine: Engine) -> None:
    _, _, a = await _started(engine, CHAIN)
    assert await _succeed(engine, a, succeeded=False) == {}
    assert (await _states(engine))["b"] == "none"


async def test_a_result_that_did_not_keep_a_slot_hands_nothing_off(engine: Engine) -> None:
    _, _, a = await _started(engine, CHAIN)
    assert await _succeed(engine, a, hand_off=False) == {}
    assert (await _states(engine))["b"] == "none"


async def test_a_join_is_handed_off_only_by_its_last_upstream(engine: Engine) -> None:
    run, loop, a = await _started(engine, {"a": [], "b": ["a"], "c": ["a"], "d": ["b", "c"]})
    (first,) = (await _succeed(engine, a)).values()  # a hands off to one of b, c; the leader queues the other
    assert await loop.evaluate([run.pk]) == 1
    (second,) = await dispatch.claim(engine, worker_id="w", queues=["default"], limit=10)
    assert {first.attempt.task_id, second.task_id} == {"b", "c"}
    # The first to end cannot hand d off (the other has not succeeded); once the leader knows, the
    # last one can.
    assert await _succeed(engine, first.attempt) == {}
    await loop.evaluate([run.pk])
    (d,) = (await _succeed(engine, second)).values()
    assert d.attempt.task_id == "d"


async def test_only_all_success_successors_in_the_same_pool_are_handed_off(engine: Engine) -> None:
    dag = pb.DagSpec(
        dag_id="handoffs",
        tasks=[
            pb.TaskSpec(task_id="a", shell=pb.ShellCommand(command="true")),
            pb.TaskSpec(
                task_id="b", upstream=["a"], shell=pb.ShellCommand(command="true"),
                trigger_rule=pb.TRIGGER_RULE_ALL_DONE,
            ),
            pb.TaskSpec(task_id="c", upstream=["a"], shell=pb.ShellCommand(command="true"), pool="other"),
        ],
    )  # fmt: skip
    await _worker(engine)
    await _sql(engine, "INSERT INTO pools (name, slots) VALUES ('other', 4)")
    run = await registered_run(engine, dag)
    loop = await leading_loop(engine)
    await loop.evaluate([run.pk])
    (a,) = await dispatch.claim(engine, worker_id="w", queues=["default"], limit=10)
    assert await _succeed(engine, a) == {}


async def _told(
    engine: Engine, url: str, act: Coroutine[object, object, T]
) -> tuple[T, dict[str, list[str]]]:
    """What ``act`` returns, and the items on ``schedd_runs`` and ``schedd_runs_handed_off`` while it
    ran; all of them: a later sentinel notification arrives after every earlier one."""
    told: dict[str, list[str]] = {channels.RUNS: [], channels.RUNS_HANDED_OFF: []}
    sentinel = asyncio.Event()

    def on(channel: str) -> Callable[[str], None]:
        def handler(payload: str) -> None:
            if payload == "0":
                sentinel.set()
            else:
                told[channel].extend(payload.split(","))

        return handler

    listener = Listener(url, {c: on(c) for c in told})
    await listener.start()
    try:
        done = await act
        await _sql(engine, "SELECT pg_notify(:c, '0')", c=channels.RUNS)
        await asyncio.wait_for(sentinel.wait(), timeout=10)
    finally:
        await listener.stop()
    return done, told


async def test_a_used_hand_off_to_the_only_successor_tells_the_leader_it_may_wait(
    engine: Engine, migrated_url: str
) -> None:
    run, _, a = await _started(engine, CHAIN)
    _, told = await _told(engine, migrated_url, _succeed(engine, a))
    b = await _ti_id(engine, "b")
    assert told == {channels.RUNS: [], channels.RUNS_HANDED_OFF: [f"{run.pk}/{a.ti_id}", f"{run.pk}/{b}"]}


async def test_a_success_that_also_readies_another_task_tells_the_leader_at_once(
    engine: Engine, migrated_url: str
) -> None:
    # a -> b and a -> c: a's success makes c ready too, so the leader must plan at once.
    run, _, a = await _started(engine, {"a": [], "b": ["a"], "c": ["a"]})
    _, told = await _told(engine, migrated_url, _succeed(engine, a))
    assert told[channels.RUNS_HANDED_OFF] == []
    assert f"{run.pk}/{a.ti_id}" in told[channels.RUNS] and len(told[channels.RUNS]) == 2
