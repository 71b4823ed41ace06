"""Admission against the real store: pools, priorities, FIFO and concurrency limits across runs and passes.

The leader's pass (``SchedulingLoop.evaluate``) runs on a migrated database; attempts are claimed and
finished through the registry's store calls, exactly as a worker's results would be. After every step
the invariants are read back from ``task_instances``: a pool never holds more than its slots in
queued and running task instances, and the limits hold across runs.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from schedd.v1 import resources_pb2 as pb
from schedd_scheduler.loop import SchedulingLoop
from schedd_store import control, dags, dispatch, explaining, runs
from schedd_store.database import Engine
from schedd_store.dispatch import AttemptResult
from schedd_store.named_sql import Statement
from schedd_store.records import RunRecord

from .helpers import leading_loop as _leading_loop

pytestmark = pytest.mark.integration

BASE = datetime(2026, 6, 1, tzinfo=UTC)


def _task(task_id: str, *upstream: str, **options: Any) -> pb.TaskSpec:
    return pb.TaskSpec(
        task_id=task_id, upstream=list(upstream), shell=pb.ShellCommand(command="true"), **options
    )


async def _dag(engine: Engine, dag_id: str, *tasks: pb.TaskSpec, **options: Any) -> None:
    await dags.register_dag(engine, pb.DagSpec(dag_id=dag_id, tasks=list(tasks), **options))


async def _run(engine: Engine, dag_id: str, run_id: str, *, minutes: int = 0) -> RunRecord:
    return await runs.create_run(
        engine,
        dag_id=dag_id,
        run_id=run_id,
        run_type="manual",
        logical_date=BASE + timedelta(minutes=minutes),
        conf={},
    )


async def _pool(engine: Engine, name: str, slots: int) -> None:
    async with engine.begin() as conn:
        await conn.execute(
            Statement("INSERT INTO pools (name, slots) VALUES (:n, :s)"), {"n": name, "s": slots}
        )


async def _rows(engine: Engine) -> list[dict[str, Any]]:
    async with engine.connect() as conn:
        result = await conn.execute(
            Statement(
                "SELECT ti.id, r.run_id, ti.dag_id, ti.task_id, ti.state, ti.pool, ti.pool_slots, "
                "ti.priority_weight FROM task_instances ti JOIN dag_runs r ON r.id = ti.run_pk ORDER BY ti.id"
            )
        )
        return [dict(r._mapping) for r in result]


async def _states(engine: Engine) -> dict[tuple[str, str, str], str]:
    return {(r["dag_id"], r["run_id"], r["task_id"]): r["state"] for r in await _rows(engine)}


async def _occupying(engine: Engine, *, pool: str | None = None, dag_id: str | None = None) -> list[Any]:
    return [
        (r["dag_id"], r["run_id"], r["task_id"])
        for r in await _rows(engine)
        if r["state"] in ("queued", "running")
        and (pool is None or r["pool"] == pool)
        and (dag_id is None or r["dag_id"] == dag_id)
    ]


async def _pool_usage(engine: Engine) -> dict[str, tuple[int, int]]:
    """pool -> (slots held by queued and running task instances, pool size)."""
    async with engine.connect() as conn:
        result = await conn.execute(
            Statement(
                "SELECT p.name, p.slots, COALESCE(sum(ti.pool_slots) FILTER (WHERE ti.state IN "
                "('queued', 'running')), 0) AS used FROM pools p LEFT JOIN task_instances ti "
                "ON ti.pool = p.name GROUP BY p.name, p.slots"
            )
        )
        return {r.name: (int(r.used), int(r.slots)) for r in result}


async def _assert_pools_hold(engine: Engine) -> None:
    for name, (used, slots) in (await _pool_usage(engine)).items():
        assert used <= slots, f"pool {name} holds {used} slots of {slots}"


async def _finish(engine: Engine, which: Iterable[tuple[str, str, str]] | None = None) -> list[Any]:
    """Claim every queued task instance (as a worker would) and report success for those in ``which``
    (all of them when None). Returns the (dag, run, task) finished."""
    await dispatch.claim(engine, worker_id="w", queues=["default"], limit=1000)
    wanted = None if which is None else set(which)
    async with engine.connect() as conn:
        result = await conn.execute(
            Statement(
                "SELECT ti.id, ti.attempt_id, ti.try_number, ti.dag_id, r.run_id, ti.task_id "
                "FROM task_instances ti JOIN dag_runs r ON r.id = ti.run_pk WHERE ti.state = 'running'"
            )
        )
        running = [r for r in result if wanted is None or (r.dag_id, r.run_id, r.task_id) in wanted]
    now = datetime.now(UTC)
    statuses = await dispatch.apply_results(
        engine,
        [
            AttemptResult(
                worker_id="w",
                ti_id=r.id,
                attempt_id=str(r.attempt_id),
                try_number=r.try_number,
                succeeded=True,
                exit_code=0,
                error="",
                ended_at=now,
            )
            for r in running
        ],
    )
    assert all(s is dispatch.ReportStatus.APPLIED for s in statuses)
    return sorted((r.dag_id, r.run_id, r.task_id) for r in running)


@dataclass
class Leader:
    """The leader's scheduling loop (a term with its fence raised) and the engine it writes with."""

    engine: Engine
    loop: SchedulingLoop


async def leading_loop(engine: Engine) -> Leader:
    return Leader(engine, await _leading_loop(engine))


async def _pass(leader: Leader, *run_pks: int) -> int:
    """One leader pass over ``run_pks`` (what a NOTIFY for those runs causes); afterwards no pool may
    hold more than its slots. Returns the number of task instances queued."""
    queued = await leader.loop.evaluate(list(run_pks))
    await _assert_pools_hold(leader.engine)
    return queued


# --- pools ------------------------------------------------------------------------------------------


async def test_pool_capacity_holds_across_passes_until_the_run_finishes(engine: Engine) -> None:
    await _pool(engine, "two", 2)
    await _dag(engine, "wide", *(_task(f"t{i}", pool="two") for i in range(5)))
    run = await _run(engine, "wide", "r1")
    leader = await leading_loop(engine)

    assert await _pass(leader, run.pk) == 2
    states = await _states(engine)
    assert sorted(states.values()) == ["queued", "queued", "scheduled", "scheduled", "scheduled"]
    assert await _pass(leader, run.pk) == 0, "a second pass must not admit past the pool size"
    assert len(await _occupying(engine, pool="two")) == 2

    finished: list[Any] = []
    for _ in range(10):
        running = await _occupying(engine, pool="two")
        if not running:
            break
        # Claim both, finish one: exactly one slot frees, so exactly one more is admitted.
        await dispatch.claim(engine, worker_id="w", queues=["default"], limit=10)
        finished += await _finish(engine, [running[0]])
        await _pass(leader, run.pk)
        assert len(await _occupying(engine, pool="two")) <= 2
    else:
        pytest.fail("the run did not finish")
    assert len(finished) == 5
    assert (await runs.get_run(engine, "wide", "r1")).state == "success"


async def test_a_multi_slot_task_waits_at_the_head_of_its_pool(engine: Engine) -> None:
    await _pool(engine, "two", 2)
    absolute = pb.WEIGHT_RULE_ABSOLUTE
    await _dag(
        engine,
        "big",
        _task("first", pool="two", priority_weight=30, weight_rule=absolute),
        _task("big", pool="two", pool_slots=2, priority_weight=20, weight_rule=absolute),
        *(_task(f"small{i}", pool="two", priority_weight=10, weight_rule=absolute) for i in range(4)),
    )
    run = await _run(engine, "big", "r1")
    leader = await leading_loop(engine)
    await _pass(leader, run.pk)
    # 'first' takes one slot; 'big' needs two and blocks the pool, so no small task takes the other slot.
    assert await _occupying(engine) == [("big", "r1", "first")]
    await _finish(engine)
    await _pass(leader, run.pk)
    assert await _occupying(engine) == [("big", "r1", "big")]
    await _finish(engine)
    await _pass(leader, run.pk)
    assert sorted(t for _, _, t in await _occupying(engine)) == ["small0", "small1"]


async def test_a_task_bigger_than_its_pool_is_passed_over_and_explained(engine: Engine) -> None:
    await _pool(engine, "two", 2)
    await _dag(
        engine,
        "huge",
        _task("huge", pool="two", pool_slots=3, priority_weight=99),
        _task("small", pool="two"),
    )
    run = await _run(engine, "huge", "r1")
    leader = await leading_loop(engine)
    assert await _pass(leader, run.pk) == 1
    assert await _states(engine) == {("huge", "r1", "huge"): "scheduled", ("huge", "r1", "small"): "queued"}
    state, why = await explaining.explain_task(engine, "huge", "r1", "huge")
    assert state.value == "scheduled"
    assert "it needs 3 slots but pool 'two' has only 2" in why


async def test_waiting_task_of_another_run_is_admitted_when_a_finishing_run_has_more_work(
    engine: Engine,
) -> None:
    await _pool(engine, "one", 1)
    await _dag(engine, "pair", _task("t", pool="one"), _task("after", "t"))
    r1 = await _run(engine, "pair", "r1")
    r2 = await _run(engine, "pair", "r2", minutes=1)
    leader = await leading_loop(engine)
    await _pass(leader, r1.pk, r2.pk)
    assert await _occupying(engine) == [("pair", "r1", "t")]
    assert (await _states(engine))[("pair", "r2", "t")] == "scheduled"
    await _finish(engine)
    # Only r1 is notified (its task finished); its pass must also hand the freed slot to r2's task.
    await _pass(leader, r1.pk)
    assert sorted(await _occupying(engine)) == [("pair", "r1", "after"), ("pair", "r2", "t")]


async def test_waiting_task_of_another_run_is_admitted_when_the_finishing_run_is_done(
    engine: Engine,
) -> None:
    await _pool(engine, "one", 1)
    await _dag(engine, "single", _task("t", pool="one"))
    r1 = await _run(engine, "single", "r1")
    r2 = await _run(engine, "single", "r2", minutes=1)
    leader = await leading_loop(engine)
    await _pass(leader, r1.pk, r2.pk)
    assert await _occupying(engine) == [("single", "r1", "t")]
    await _finish(engine)
    # What the leader does after the result: evaluate the run it was notified about.
    await _pass(leader, r1.pk)
    assert (await runs.get_run(engine, "single", "r1")).state == "success"
    assert await _occupying(engine) == [("single", "r2", "t")]


async def test_pools_are_independent(engine: Engine) -> None:
    await _pool(engine, "full", 1)
    await _pool(engine, "free", 3)
    await _dag(
        engine,
        "two_pools",
        _task("blocker", pool="full"),
        _task("waits", pool="full", priority_weight=50),
        *(_task(f"f{i}", pool="free") for i in range(3)),
    )
    run = await _run(engine, "two_pools", "r1")
    leader = await leading_loop(engine)
    assert await _pass(leader, run.pk) == 4
    held = {t for _, _, t in await _occupying(engine)}
    assert held >= {"f0", "f1", "f2"} and len(held & {"blocker", "waits"}) == 1


# --- priority and FIFO --------------------------------------------------------------------------------


async def test_higher_priority_dag_goes_first_across_dags(engine: Engine) -> None:
    await _pool(engine, "one", 1)
    absolute = pb.WEIGHT_RULE_ABSOLUTE
    await _dag(
        engine,
        "low",
        *(_task(f"l{i}", pool="one", priority_weight=1, weight_rule=absolute) for i in range(3)),
    )
    await _dag(
        engine,
        "high",
        *(_task(f"h{i}", pool="one", priority_weight=10, weight_rule=absolute) for i in range(3)),
    )
    low = await _run(engine, "low", "r1", minutes=0)
    high = await _run(engine, "high", "r1", minutes=5)  # later logical date: FIFO alone would favour low
    leader = await leading_loop(engine)
    await _pass(leader, low.pk)
    order = [t for _, _, t in await _occupying(engine)]
    assert len(order) == 1 and order[0].startswith("l")
    await _pass(leader, high.pk)
    assert len(await _occupying(engine)) == 1, "the pool is full: high's tasks must wait"
    for _ in range(10):
        if not await _finish(engine):
            break
        # Notified: the run whose task finished. Both are evaluated so each step admits something.
        await _pass(leader, low.pk, high.pk)
        order += [t for _, _, t in await _occupying(engine)]
    assert len(order) == 6, order
    assert [t[0] for t in order] == ["l", "h", "h", "h", "l", "l"], order


async def test_equal_priority_is_fifo_by_logical_date_not_by_arrival(engine: Engine) -> None:
    await _pool(engine, "one", 1)
    await _dag(engine, "blocker", _task("b", pool="one"))
    await _dag(engine, "fifo", _task("t", pool="one"))
    blocker = await _run(engine, "blocker", "r1")
    leader = await leading_loop(engine)
    await _pass(leader, blocker.pk)
    newer = await _run(engine, "fifo", "newer", minutes=60)
    older = await _run(engine, "fifo", "older", minutes=-60)  # created second, logically first
    await _pass(leader, newer.pk)
    await _pass(leader, older.pk)
    assert await _occupying(engine) == [("blocker", "r1", "b")]
    await _finish(engine)
    await _pass(leader, blocker.pk, newer.pk, older.pk)
    assert await _occupying(engine) == [("fifo", "older", "t")]
    await _finish(engine)
    await _pass(leader, newer.pk, older.pk)
    assert await _occupying(engine) == [("fifo", "newer", "t")]


@pytest.mark.parametrize(
    ("rule", "expected"),
    [
        (pb.WEIGHT_RULE_DOWNSTREAM, {"a": 6, "b": 5, "c": 3}),
        (pb.WEIGHT_RULE_UNSPECIFIED, {"a": 6, "b": 5, "c": 3}),
        (pb.WEIGHT_RULE_UPSTREAM, {"a": 1, "b": 3, "c": 6}),
        (pb.WEIGHT_RULE_ABSOLUTE, {"a": 1, "b": 2, "c": 3}),
    ],
)
async def test_weight_rule_sets_the_stored_priority(
    engine: Engine, rule: int, expected: dict[str, int]
) -> None:
    await _dag(
        engine,
        "weights",
        _task("a", priority_weight=1, weight_rule=rule),
        _task("b", "a", priority_weight=2, weight_rule=rule),
        _task("c", "b", priority_weight=3, weight_rule=rule),
    )
    run = await _run(engine, "weights", "r1")
    leader = await leading_loop(engine)
    await _pass(leader, run.pk)
    assert {r["task_id"]: r["priority_weight"] for r in await _rows(engine)} == expected


# --- DAG and task limits ---------------------------------------------------------------------------------


async def test_dag_max_active_tasks_holds_across_runs_and_passes(engine: Engine) -> None:
    await _dag(engine, "capped", *(_task(f"t{i}") for i in range(4)), max_active_tasks=2)
    r1 = await _run(engine, "capped", "r1")
    r2 = await _run(engine, "capped", "r2", minutes=1)
    leader = await leading_loop(engine)
    assert await _pass(leader, r1.pk, r2.pk) == 2
    assert await _pass(leader, r1.pk, r2.pk) == 0
    done = 0
    for _ in range(20):
        finished = await _finish(engine)
        if not finished:
            break
        done += len(finished)
        await _pass(leader, r1.pk, r2.pk)
        assert len(await _occupying(engine, dag_id="capped")) <= 2
    assert done == 8
    assert {(await runs.get_run(engine, "capped", r)).state for r in ("r1", "r2")} == {"success"}


async def test_task_max_active_instances_holds_across_runs(engine: Engine) -> None:
    await _dag(engine, "mai", _task("t", max_active_instances=1), _task("u"))
    r1 = await _run(engine, "mai", "r1")
    r2 = await _run(engine, "mai", "r2", minutes=1)
    leader = await leading_loop(engine)
    assert await _pass(leader, r1.pk, r2.pk) == 3
    assert sorted(await _occupying(engine)) == [("mai", "r1", "t"), ("mai", "r1", "u"), ("mai", "r2", "u")]
    assert (await _states(engine))[("mai", "r2", "t")] == "scheduled"
    state, why = await explaining.explain_task(engine, "mai", "r2", "t")
    assert state.value == "scheduled"
    assert "1 instances of this task run, its max_active_instances is 1" in why
    await _finish(engine, [("mai", "r1", "t")])
    await _pass(leader, r1.pk, r2.pk)
    assert ("mai", "r2", "t") in await _occupying(engine)


async def test_limit_held_tasks_do_not_block_their_pool(engine: Engine) -> None:
    await _pool(engine, "two", 2)
    await _dag(
        engine,
        "limited",
        *(_task(f"x{i}", pool="two", priority_weight=50) for i in range(3)),
        max_active_tasks=1,
    )
    await _dag(engine, "other", _task("y", pool="two", priority_weight=1))
    limited = await _run(engine, "limited", "r1")
    other = await _run(engine, "other", "r1", minutes=1)
    leader = await leading_loop(engine)
    await _pass(leader, limited.pk, other.pk)
    occupying = await _occupying(engine)
    assert len([o for o in occupying if o[0] == "limited"]) == 1
    assert ("other", "r1", "y") in occupying, "the DAG limit must not keep the other DAG out of the pool"


async def test_paused_dag_waiting_tasks_are_not_admitted(engine: Engine) -> None:
    await _pool(engine, "one", 1)
    await _dag(engine, "blocker", _task("b", pool="one"), _task("after", "b"))
    await _dag(engine, "sleepy", _task("t", pool="one", priority_weight=100))
    blocker = await _run(engine, "blocker", "r1")
    sleepy = await _run(engine, "sleepy", "r1")
    leader = await leading_loop(engine)
    await _pass(leader, blocker.pk)
    await _pass(leader, sleepy.pk)
    await _pass(leader, sleepy.pk)  # the leader has read back what it wrote: it holds t as scheduled
    assert (await _states(engine))[("sleepy", "r1", "t")] == "scheduled"
    await control.set_paused(engine, "sleepy", True)
    # Out of the pool's wait while paused (a waiting one would hold back every hand-off in the pool).
    assert (await _states(engine))[("sleepy", "r1", "t")] == "none"
    await _finish(engine)
    await _pass(leader, blocker.pk)  # 'after' is ready: admission looks at the waiting ones too
    assert (await _states(engine))[("sleepy", "r1", "t")] == "none"
    _, why = await explaining.explain_task(engine, "sleepy", "r1", "t")
    assert why[0] == "its DAG is paused"
    await control.set_paused(engine, "sleepy", False)
    await _finish(engine)
    # A pass told of no change in sleepy's run still reads it in full: the pause raised its control
    # version (a leader holding t as scheduled would never queue it again).
    await leader.loop.evaluate({blocker.pk: None, sleepy.pk: set()})
    await _assert_pools_hold(engine)
    assert (await _states(engine))[("sleepy", "r1", "t")] == "queued"


# --- retry times ----------------------------------------------------------------------------------------


async def _fail_running(engine: Engine) -> None:
    async with engine.connect() as conn:
        rows = (
            await conn.execute(
                Statement("SELECT id, attempt_id, try_number FROM task_instances WHERE state = 'running'")
            )
        ).all()
    statuses = await dispatch.apply_results(
        engine,
        [
            AttemptResult(
                worker_id="w",
                ti_id=r.id,
                attempt_id=str(r.attempt_id),
                try_number=r.try_number,
                succeeded=False,
                exit_code=1,
                error="boom",
                ended_at=datetime.now(UTC),
            )
            for r in rows
        ],
    )
    assert statuses and all(s is dispatch.ReportStatus.APPLIED for s in statuses)


async def _retry_in(engine: Engine) -> float:
    async with engine.connect() as conn:
        value = (
            await conn.execute(
                Statement(
                    "SELECT EXTRACT(EPOCH FROM next_retry_at - now()) FROM task_instances WHERE task_id = 't'"
                )
            )
        ).scalar_one()
    return float(value)


def _retrying(retries: int, **options: Any) -> pb.TaskSpec:
    spec = _task("t", retries=retries, retry_exponential_backoff=True, **options)
    spec.retry_delay.FromSeconds(10)
    spec.max_retry_delay.FromSeconds(60)
    return spec


async def test_the_leader_sets_exponential_capped_retry_times(engine: Engine) -> None:
    await _dag(engine, "backoff", _retrying(5))
    run = await _run(engine, "backoff", "r1")
    leader = await leading_loop(engine)
    waits = []
    for _ in range(4):
        await _pass(leader, run.pk)
        await dispatch.claim(engine, worker_id="w", queues=["default"], limit=10)
        await _fail_running(engine)
        await _pass(leader, run.pk)  # up_for_retry: the pass sets its retry time
        waits.append(await _retry_in(engine))
        # Make the retry due now, as the leader's timer would find it later.
        async with engine.begin() as conn:
            await conn.execute(
                Statement("UPDATE task_instances SET next_retry_at = now() WHERE task_id = 't'")
            )
    # 10s * 2**(n-1), capped at 60s, jittered into [0.75, 1.0] of that (minus the few ms the test took)
    for wait, base in zip(waits, (10, 20, 40, 60), strict=True):
        assert 0.75 * base - 1 <= wait <= base, waits
    async with engine.connect() as conn:
        tries = (await conn.execute(Statement("SELECT try_number FROM task_instances"))).scalar_one()
    assert tries == 4


async def test_a_capped_retry_after_very_many_tries_is_scheduled(engine: Engine) -> None:
    await _dag(engine, "many_tries", _retrying(5000))
    run = await _run(engine, "many_tries", "r1")
    leader = await leading_loop(engine)
    await _pass(leader, run.pk)
    await dispatch.claim(engine, worker_id="w", queues=["default"], limit=10)
    async with engine.begin() as conn:  # as if 1099 tries had failed before this one
        await conn.execute(Statement("UPDATE task_instances SET try_number = 1100 WHERE task_id = 't'"))
    await _fail_running(engine)
    await _pass(leader, run.pk)
    assert 0.75 * 60 - 1 <= await _retry_in(engine) <= 60
