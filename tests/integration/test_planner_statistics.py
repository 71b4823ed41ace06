"""The leader analyzes ``task_instances`` once its passes have doubled it
(``schedd_store.planner_statistics``): the statistics the registries' statements are planned with
follow a burst within the burst, not at autovacuum's next round."""

from __future__ import annotations

import asyncio
import time

import pytest

from schedd_store.database import Engine
from schedd_store.named_sql import Statement
from schedd_store.planner_statistics import StatisticsKeeper

from .helpers import leading_loop, registered_run, spec

pytestmark = pytest.mark.integration

_COUNTED = Statement("SELECT reltuples FROM pg_class WHERE oid = 'task_instances'::regclass")


async def _counted(engine: Engine) -> float:
    async with engine.autocommit() as conn:
        return float((await conn.execute(_COUNTED)).one().reltuples)


async def test_a_pass_that_doubles_the_table_has_its_statistics_refreshed(engine: Engine) -> None:
    async with engine.autocommit() as conn:  # only the keeper may analyze it in this test
        await conn.execute(Statement("ALTER TABLE task_instances SET (autovacuum_enabled = false)"))
    keeper = StatisticsKeeper(engine, min_growth=100)
    analyzing = asyncio.create_task(keeper.run())
    try:
        run = await registered_run(engine, spec("wide", {f"t{i:03d}": [] for i in range(150)}))
        loop = await leading_loop(engine)
        loop.on_created = keeper.created
        await loop.evaluate([run.pk])
        deadline = time.monotonic() + 30
        while await _counted(engine) < 150:
            assert time.monotonic() < deadline, "task_instances was not analyzed after the pass created 150"
            await asyncio.sleep(0.05)
    finally:
        analyzing.cancel()
    assert keeper.analyzed == 1
    assert not keeper.due, "the next ANALYZE waits until the table doubles again"


def test_an_analyze_is_due_once_the_table_doubled_and_at_least_the_minimum_was_created() -> None:
    keeper = StatisticsKeeper(None, min_growth=1000)  # type: ignore[arg-type]
    keeper.created(999)
    assert not keeper.due
    keeper.created(1)
    assert keeper.due
    bigger = StatisticsKeeper(None, min_growth=1000)
    bigger._counted = 5000
    bigger.created(4999)
    assert not bigger.due, "a table of 5,000 rows is analyzed again once 5,000 more were created"
    bigger.created(1)
    assert bigger.due
