"""Applying a pass's writes (``schedd_store.scheduling.apply_writes``) against the real store: what
lands, and that a guarded write matching fewer rows than named rolls the whole pass back."""

from __future__ import annotations

import pytest

from schedd_core.errors import IllegalTransition
from schedd_core.pass_writes import NewInstance, PassWrites, Retry, RunFinish
from schedd_core.states import RunState, TaskState
from schedd_store import runs
from schedd_store.database import Engine
from schedd_store.fence import Fence, raise_fence
from schedd_store.named_sql import Statement
from schedd_store.scheduling import apply_writes

from .helpers import finish_all_running, leading_loop, registered_run, spec

pytestmark = pytest.mark.integration

T = TaskState
CHAIN = {"a": [], "b": ["a"], "c": ["b"]}


def new(run_pk: int, task_id: str, state: TaskState) -> NewInstance:
    return NewInstance(run_pk, task_id, -1, state, 1, 1, "default_pool", 1, "default", False, "")


async def _fence(engine: Engine, token: int = 1) -> Fence:
    await raise_fence(engine, token, f"test-{token}")
    return Fence(engine, token)


async def _rows(engine: Engine, run_pk: int) -> dict[str, tuple[int, str, int]]:
    """The run's task instances: task id -> (id, state, fence token)."""
    async with engine.connect() as conn:
        result = await conn.execute(
            Statement("SELECT task_id, id, state, fence_token FROM task_instances WHERE run_pk = :pk"),
            {"pk": run_pk},
        )
        return {r.task_id: (r.id, r.state, r.fence_token) for r in result}


async def _run_state(engine: Engine, run_pk: int) -> str:
    async with engine.connect() as conn:
        return str(
            (
                await conn.execute(Statement("SELECT state FROM dag_runs WHERE id = :pk"), {"pk": run_pk})
            ).scalar()
        )


async def _passes(engine: Engine) -> list[tuple[int, int, int]]:
    async with engine.connect() as conn:
        rows = (
            await conn.execute(Statement("SELECT token, runs, queued FROM scheduler_passes ORDER BY id"))
        ).all()
    return [(r.token, r.runs, r.queued) for r in rows]


async def test_writes_land_stamped_with_the_token_and_the_outcome_says_what_was_done(
    engine: Engine,
) -> None:
    run = await registered_run(engine, spec("chain", CHAIN))
    fence = await _fence(engine, 7)
    writes = PassWrites(
        create=[new(run.pk, "a", T.QUEUED), new(run.pk, "b", T.NONE), new(run.pk, "c", T.NONE)],
        start_runs=[run.pk],
        runs=1,
    )
    async with fence.transaction() as conn:
        outcome = await apply_writes(conn, fence.token, writes)
    rows = await _rows(engine, run.pk)
    assert {tid: (state, token) for tid, (_, state, token) in rows.items()} == {
        "a": ("queued", 7),
        "b": ("none", 7),
        "c": ("none", 7),
    }
    assert outcome.queued == 1
    assert outcome.written == {run.pk: {ti for ti, _, _ in rows.values()}}
    assert await _run_state(engine, run.pk) == "running"
    assert await _passes(engine) == [(7, 1, 1)]


async def test_existing_instances_move_and_the_run_finishes(engine: Engine) -> None:
    run = await registered_run(engine, spec("chain", CHAIN))
    fence = await _fence(engine)
    create = [new(run.pk, "a", T.NONE), new(run.pk, "b", T.NONE), new(run.pk, "c", T.NONE)]
    async with fence.transaction() as conn:
        await apply_writes(conn, fence.token, PassWrites(create=create, start_runs=[run.pk], runs=1))
    ids = {tid: ti for tid, (ti, _, _) in (await _rows(engine, run.pk)).items()}
    writes = PassWrites(skip=[ids["b"]], upstream_failed=[ids["c"]], queue=[ids["a"]], finish_runs=[], runs=1)
    async with fence.transaction() as conn:
        outcome = await apply_writes(conn, fence.token, writes)
    states = {tid: state for tid, (_, state, _) in (await _rows(engine, run.pk)).items()}
    assert states == {"a": "queued", "b": "skipped", "c": "upstream_failed"}
    assert outcome.queued == 1
    async with engine.begin() as conn:  # a finishes: the run can end
        await conn.execute(
            Statement("UPDATE task_instances SET state = 'success' WHERE id = :id"), {"id": ids["a"]}
        )
    async with fence.transaction() as conn:
        await apply_writes(
            conn, fence.token, PassWrites(finish_runs=[RunFinish(run.pk, RunState.SUCCESS)], runs=1)
        )
    assert await _run_state(engine, run.pk) == "success"


async def _assert_rolled_back(engine: Engine, fence: Fence, writes: PassWrites, message: str) -> None:
    before = await _passes(engine)
    with pytest.raises(IllegalTransition, match=message):
        async with fence.transaction() as conn:
            await apply_writes(conn, fence.token, writes)
    assert await _passes(engine) == before


async def test_starting_a_run_that_is_no_longer_queued_rolls_the_whole_pass_back(engine: Engine) -> None:
    run = await registered_run(engine, spec("chain", CHAIN))
    fence = await _fence(engine)
    async with engine.begin() as conn:  # another writer got there first
        await conn.execute(Statement("UPDATE dag_runs SET state = 'failed' WHERE id = :pk"), {"pk": run.pk})
    writes = PassWrites(create=[new(run.pk, "a", T.QUEUED)], start_runs=[run.pk], runs=1)
    await _assert_rolled_back(engine, fence, writes, rf"cannot start runs \[{run.pk}\]")
    assert await _rows(engine, run.pk) == {}  # the instance created before the shortfall is gone too
    assert await _run_state(engine, run.pk) == "failed"


async def test_a_shortfall_names_only_the_rows_that_moved(engine: Engine) -> None:
    run = await registered_run(engine, spec("chain", CHAIN))
    fence = await _fence(engine)
    create = [new(run.pk, "a", T.NONE), new(run.pk, "b", T.NONE), new(run.pk, "c", T.NONE)]
    async with fence.transaction() as conn:
        await apply_writes(conn, fence.token, PassWrites(create=create, start_runs=[run.pk], runs=1))
    ids = {tid: ti for tid, (ti, _, _) in (await _rows(engine, run.pk)).items()}
    async with engine.begin() as conn:  # a user marked b done between the pass's read and its write
        await conn.execute(
            Statement("UPDATE task_instances SET state = 'success' WHERE id = :id"), {"id": ids["b"]}
        )
    writes = PassWrites(skip=[ids["c"]], schedule=[ids["a"], ids["b"]], runs=1)
    await _assert_rolled_back(engine, fence, writes, rf"cannot schedule task instances \[{ids['b']}\]")
    states = {tid: state for tid, (_, state, _) in (await _rows(engine, run.pk)).items()}
    assert states == {"a": "none", "b": "success", "c": "none"}  # nothing of the pass landed


async def test_a_retry_time_for_an_instance_no_longer_waiting_to_retry_rolls_back(
    engine: Engine,
) -> None:
    run = await registered_run(engine, spec("chain", CHAIN))
    fence = await _fence(engine)
    async with fence.transaction() as conn:
        await apply_writes(conn, fence.token, PassWrites(create=[new(run.pk, "a", T.NONE)], runs=1))
    ((ti, _, _),) = (await _rows(engine, run.pk)).values()
    async with engine.begin() as conn:
        await conn.execute(
            Statement("UPDATE task_instances SET state = 'up_for_retry' WHERE id = :id"), {"id": ti}
        )
    async with fence.transaction() as conn:  # set once: fine
        await apply_writes(conn, fence.token, PassWrites(retries=[Retry(ti, 30.0)], runs=1))
    # set already (the state moved on from 'no retry time yet'): the pass rolls back
    await _assert_rolled_back(
        engine, fence, PassWrites(retries=[Retry(ti, 5.0)], runs=1), "cannot set the retry times"
    )


async def test_finishing_a_run_that_already_ended_rolls_back(engine: Engine) -> None:
    run = await registered_run(engine, spec("chain", CHAIN))
    fence = await _fence(engine)
    async with engine.begin() as conn:
        await conn.execute(Statement("UPDATE dag_runs SET state = 'success' WHERE id = :pk"), {"pk": run.pk})
    writes = PassWrites(finish_runs=[RunFinish(run.pk, RunState.FAILED)], runs=1)
    await _assert_rolled_back(engine, fence, writes, f"cannot finish run {run.pk}")


async def test_a_pass_whose_state_moved_underneath_rolls_back_and_plans_the_run_again_in_full(
    engine: Engine,
) -> None:
    run = await registered_run(engine, spec("fork", {"a": [], "b": ["a"], "c": ["a"]}))
    loop = await leading_loop(engine)
    assert await loop.evaluate([run.pk]) == 1
    assert await loop.evaluate({run.pk: set()}) == 0  # reads back what it wrote: the leader knows b, c
    ids = {tid: ti for tid, (ti, _, _) in (await _rows(engine, run.pk)).items()}
    async with engine.begin() as conn:  # b moves behind the leader's back: its cached state is stale
        await conn.execute(
            Statement("UPDATE task_instances SET state = 'skipped' WHERE id = :id"), {"id": ids["b"]}
        )
    assert await finish_all_running(engine) == ["a"]
    # Incrementally, only a is read again: the pass would queue b, whose guarded write finds it moved.
    assert await loop.evaluate({run.pk: {ids["a"]}}) == 0
    states = {tid: state for tid, (_, state, _) in (await _rows(engine, run.pk)).items()}
    assert states == {"a": "success", "b": "skipped", "c": "none"}  # nothing of that pass landed
    # The run was forgotten and is evaluated in full: c queues, b stays as it is.
    assert await loop.evaluate([run.pk]) == 1
    states = {tid: state for tid, (_, state, _) in (await _rows(engine, run.pk)).items()}
    assert states == {"a": "success", "b": "skipped", "c": "queued"}
    assert (await runs.get_run(engine, "fork", "r1")).state == "running"
