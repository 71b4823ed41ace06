"""One scheduling pass against the real store: materialise, queue in dependency order, finish runs."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from schedd_core.errors import FencedOut
from schedd_store import dags, dispatch, runs
from schedd_store.database import Engine
from schedd_store.dispatch import AttemptResult
from schedd_store.fence import raise_fence
from schedd_store.named_sql import Statement

from .helpers import finish_all_running, leading_loop, registered_run, spec

pytestmark = pytest.mark.integration

DIAMOND = {"a": [], "b": ["a"], "c": ["a"], "d": ["b", "c"]}


async def _states(engine: Engine, dag_id: str, run_id: str = "r1") -> dict[str, str]:
    run = await runs.get_run(engine, dag_id, run_id)
    return {t.task_id: t.state for t in run.task_instances}


async def test_diamond_runs_in_dependency_order(engine: Engine) -> None:
    run = await registered_run(engine, spec("diamond", DIAMOND))
    loop = await leading_loop(engine)
    assert await loop.evaluate([run.pk]) == 1
    assert await _states(engine, "diamond") == {"a": "queued", "b": "none", "c": "none", "d": "none"}
    assert await finish_all_running(engine) == ["a"]
    assert await loop.evaluate([run.pk]) == 2
    assert await finish_all_running(engine) == ["b", "c"]
    assert await loop.evaluate([run.pk]) == 1
    assert await finish_all_running(engine) == ["d"]
    await loop.evaluate([run.pk])
    final = await runs.get_run(engine, "diamond", "r1")
    assert final.state == "success"
    assert final.ended_at is not None


async def test_failure_propagates_and_fails_the_run(engine: Engine) -> None:
    run = await registered_run(engine, spec("chain", {"a": [], "b": ["a"], "c": ["b"]}))
    loop = await leading_loop(engine)
    await loop.evaluate([run.pk])
    await finish_all_running(engine, succeed=False)
    await loop.evaluate([run.pk])
    assert await _states(engine, "chain") == {"a": "failed", "b": "upstream_failed", "c": "upstream_failed"}
    assert (await runs.get_run(engine, "chain", "r1")).state == "failed"


async def test_every_write_is_stamped_with_the_token(engine: Engine) -> None:
    run = await registered_run(engine, spec("diamond", DIAMOND))
    loop = await leading_loop(engine, token=42)
    await loop.evaluate([run.pk])
    async with engine.connect() as conn:
        stamped = (
            await conn.execute(
                Statement(
                    "SELECT DISTINCT fence_token FROM task_instances UNION SELECT fence_token FROM dag_runs"
                )
            )
        ).all()
    assert [r[0] for r in stamped] == [42]


async def test_a_deposed_leader_pass_changes_nothing(engine: Engine) -> None:
    run = await registered_run(engine, spec("diamond", DIAMOND))
    old = await leading_loop(engine, token=1)
    await raise_fence(engine, 2, "newer")
    with pytest.raises(FencedOut):
        await old.evaluate([run.pk])
    assert await _states(engine, "diamond") == {}
    assert (await runs.get_run(engine, "diamond", "r1")).state == "queued"


async def test_concurrent_claims_never_hand_out_one_attempt_twice(engine: Engine) -> None:
    wide: dict[str, list[str]] = {f"t{i:03d}": [] for i in range(300)}
    async with engine.begin() as conn:  # room for all of them at once
        await conn.execute(Statement("UPDATE pools SET slots = 1000 WHERE name = 'default_pool'"))
    run = await registered_run(engine, spec("wide", wide))
    loop = await leading_loop(engine)
    assert await loop.evaluate([run.pk]) == 300

    async def claimer(name: str) -> list[str]:
        got: list[str] = []
        while True:
            batch = await dispatch.claim(engine, worker_id=name, queues=["default"], limit=7)
            if not batch:
                return got
            got += [c.attempt_id for c in batch]

    results = await asyncio.gather(*(claimer(f"w{i}") for i in range(4)))
    everything = [a for r in results for a in r]
    assert len(everything) == 300
    assert len(set(everything)) == 300


async def test_results_are_attempt_conditional_and_idempotent(engine: Engine) -> None:
    run = await registered_run(engine, spec("one", {"a": []}))
    loop = await leading_loop(engine)
    await loop.evaluate([run.pk])
    (claimed,) = await dispatch.claim(engine, worker_id="w", queues=["default"], limit=5)
    now = datetime.now(UTC)
    ok = AttemptResult(
        worker_id="w",
        ti_id=claimed.ti_id,
        attempt_id=claimed.attempt_id,
        try_number=claimed.try_number,
        succeeded=True,
        exit_code=0,
        error="",
        ended_at=now,
    )
    stale = AttemptResult(
        worker_id="w",
        ti_id=claimed.ti_id,
        attempt_id="00000000-0000-0000-0000-000000000000",
        try_number=claimed.try_number,
        succeeded=False,
        exit_code=1,
        error="late",
        ended_at=now,
    )
    assert await dispatch.apply_results(engine, [ok]) == [dispatch.ReportStatus.APPLIED]
    assert await dispatch.apply_results(engine, [ok, stale]) == [
        dispatch.ReportStatus.DUPLICATE,
        dispatch.ReportStatus.STALE,
    ]
    # The contradicting report of the same attempt is stale too, and changes nothing.
    flipped = AttemptResult(
        worker_id="w",
        ti_id=ok.ti_id,
        attempt_id=ok.attempt_id,
        try_number=ok.try_number,
        succeeded=False,
        exit_code=1,
        error="x",
        ended_at=now,
    )
    assert await dispatch.apply_results(engine, [flipped]) == [dispatch.ReportStatus.STALE]
    assert await _states(engine, "one") == {"a": "success"}
    async with engine.connect() as conn:
        attempt = (await conn.execute(Statement("SELECT state, exit_code FROM task_attempts"))).one()
    assert tuple(attempt) == ("success", 0)


async def test_create_run_is_idempotent_per_request_id(engine: Engine) -> None:
    from schedd_core.errors import AlreadyExists
    from schedd_core.request_key import RequestKey
    from schedd_store import dags

    await dags.register_dag(engine, spec("one", {"a": []}))
    when = datetime.now(UTC)
    same = RequestKey("req-1", "hash-a")
    first = await runs.create_run(
        engine, dag_id="one", run_id="x1", run_type="manual", logical_date=when, conf={}, request=same
    )
    again = await runs.create_run(
        engine, dag_id="one", run_id="x1", run_type="manual", logical_date=when, conf={}, request=same
    )
    assert again.run_id == first.run_id == "x1"
    with pytest.raises(AlreadyExists, match="req-1"):
        await runs.create_run(
            engine,
            dag_id="one",
            run_id="x2",
            run_type="manual",
            logical_date=when,
            conf={},
            request=RequestKey("req-1", "hash-b"),
        )
    with pytest.raises(AlreadyExists, match="'x1' of dag 'one' exists already"):
        await runs.create_run(
            engine, dag_id="one", run_id="x1", run_type="manual", logical_date=when, conf={}
        )
    async with engine.connect() as conn:
        assert (await conn.execute(Statement("SELECT count(*) FROM dag_runs"))).scalar_one() == 1


async def test_cancelling_a_run_writes_its_failure_events_with_the_change(engine: Engine) -> None:
    from schedd.v1 import resources_pb2 as pb
    from schedd_store import control

    dag = spec("cb", {"a": []})
    hook = pb.Callback(webhook_url="http://127.0.0.1:9/hook")
    dag.tasks[0].on_failure.append(hook)
    dag.on_failure.append(hook)
    run = await registered_run(engine, dag)
    loop = await leading_loop(engine)
    await loop.evaluate([run.pk])
    (claimed,) = await dispatch.claim(engine, worker_id="w", queues=["default"], limit=5)
    await control.cancel_run(engine, "cb", "r1")
    async with engine.connect() as conn:
        events = (await conn.execute(Statement("SELECT topic, payload FROM outbox ORDER BY id"))).all()
    assert [(e.topic, e.payload["event"]) for e in events] == [
        ("task_callback", "failure"),
        ("run_callback", "failure"),
    ]
    assert events[0].payload["task_id"] == "a" and events[0].payload["ti_id"] == claimed.ti_id


async def test_a_report_with_another_try_number_is_stale_and_changes_nothing(engine: Engine) -> None:
    """A result or heartbeat must match the whole attempt: task instance, try number and attempt id."""
    run = await registered_run(engine, spec("tries", {"a": []}))
    await (await leading_loop(engine)).evaluate([run.pk])
    (claimed,) = await dispatch.claim(engine, worker_id="w", queues=["default"], limit=1)
    now = datetime.now(UTC)
    wrong_try = AttemptResult(
        worker_id="w",
        ti_id=claimed.ti_id,
        attempt_id=claimed.attempt_id,
        try_number=claimed.try_number + 1,
        succeeded=True,
        exit_code=0,
        error="",
        ended_at=now,
    )
    assert await dispatch.apply_results(engine, [wrong_try]) == [dispatch.ReportStatus.STALE]
    assert await _states(engine, "tries") == {"a": "running"}
    stale = await dispatch.record_worker_heartbeat(
        engine, "w", [dispatch.AttemptRef(claimed.ti_id, claimed.attempt_id, claimed.try_number + 1)]
    )
    assert stale == {claimed.attempt_id}
    right = dispatch.AttemptRef(claimed.ti_id, claimed.attempt_id, claimed.try_number)
    assert await dispatch.record_worker_heartbeat(engine, "w", [right]) == set()
    ok = AttemptResult(**{**wrong_try.__dict__, "try_number": claimed.try_number})
    assert await dispatch.apply_results(engine, [ok]) == [dispatch.ReportStatus.APPLIED]
    assert await dispatch.apply_results(engine, [wrong_try]) == [dispatch.ReportStatus.STALE]


async def test_depends_on_past_waits_for_the_previous_run_and_is_woken_by_it(engine: Engine) -> None:
    dag = spec("past", {"load": []})
    dag.tasks[0].depends_on_past = True
    await dags.register_dag(engine, dag)
    day = datetime(2026, 1, 1, tzinfo=UTC)
    made = []
    for n in (1, 2):
        made.append(
            await runs.create_run(
                engine,
                dag_id="past",
                run_id=f"r{n}",
                run_type="manual",
                logical_date=day + timedelta(days=n),
                conf={},
            )
        )
    first, second = made
    loop = await leading_loop(engine)
    await loop.evaluate([first.pk, second.pk])
    assert await _states(engine, "past", "r1") == {"load": "queued"}
    assert await _states(engine, "past", "r2") == {"load": "none"}  # the previous run's load is not done
    loop._pending.take(100)
    await finish_all_running(engine)
    await loop.evaluate([first.pk])
    _, woken = loop._pending.take(100)
    assert second.pk in woken  # the previous run's task ended: the next run is evaluated again
    await loop.evaluate([second.pk])
    assert await _states(engine, "past", "r2") == {"load": "queued"}
