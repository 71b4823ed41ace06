"""A pass's full read of runs against the real store: the budget, and the runs it leaves for later."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from schedd_store import dags, planning_reads, runs, statements as sql
from schedd_store.database import Engine
from schedd_store.fence import Fence

from .helpers import leading_loop, spec

pytestmark = pytest.mark.integration


async def _six_runs_of_three_tasks(engine: Engine) -> list[int]:
    """Six runs (oldest logical date first) whose three task instances each exist."""
    await dags.register_dag(engine, spec("three", {"a": [], "b": ["a"], "c": ["b"]}))
    start = datetime(2026, 1, 1, tzinfo=UTC)
    pks = []
    for i in range(6):
        run = await runs.create_run(
            engine,
            dag_id="three",
            run_id=f"r{i}",
            run_type="manual",
            logical_date=start + timedelta(days=i),
            conf={},
        )
        pks.append(run.pk)
    loop = await leading_loop(engine)
    await loop.evaluate(pks)
    return pks


async def test_a_budget_reads_the_oldest_and_smallest_runs_and_defers_the_rest(engine: Engine) -> None:
    pks = await _six_runs_of_three_tasks(engine)
    async with Fence(engine, 1).transaction() as conn:
        loaded, deferred = await planning_reads.load_runs(conn, pks, budget=4)
    # The oldest run, then the others while fewer than 4 task instances were taken before each.
    assert sorted(r.pk for r in loaded) == pks[:3]
    assert all(sorted(r.tasks) == ["a", "b", "c"] for r in loaded)
    assert sorted(deferred) == pks[3:]


async def test_the_deferred_runs_come_once_not_on_every_row(engine: Engine) -> None:
    """Each row used to carry the whole list of deferred runs: a pass over 5,000 task instances with
    a thousand runs left decoded five million run ids, and the leader's memory stayed at that peak."""
    pks = await _six_runs_of_three_tasks(engine)
    async with Fence(engine, 1).transaction() as conn:
        rows = (await conn.execute(sql.LOCK_RUNS_AND_LOAD_TASKS, {"run_pks": pks, "budget": 4})).all()
    assert len(rows) == 9
    carrying = [r.deferred for r in rows if r.deferred is not None]
    assert len(carrying) == 1
    assert sorted(carrying[0]) == pks[3:]
