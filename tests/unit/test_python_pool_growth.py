"""The warm Python pool grows under load and shrinks back when idle: real children of
``tests.unit.pypool_tasks``."""

from __future__ import annotations

import asyncio
import json

import pytest

from schedd_exec.python_pool import PythonPool
from tests.polling import wait_until_async
from tests.unit.test_python_pool import LIVENESS, run, wait_gone


async def test_an_idle_pool_keeps_its_warm_children_only() -> None:
    async with PythonPool(4, warm=1) as p:
        assert len(p.pids) == 1
        pids = {json.loads((await run(p, "pid")).result_json) for _ in range(5)}
        # One task at a time needs one child: the same one runs them all.
        assert pids == set(p.pids)


async def test_tasks_at_once_start_children_up_to_the_size_and_all_run_in_parallel() -> None:
    async with PythonPool(3, warm=1) as p:
        outs = await asyncio.gather(*(run(p, "sleep", seconds=1.0) for _ in range(5)))
        assert all(o.succeeded for o in outs), [o.error for o in outs]
        assert len({json.loads(o.result_json)["pid"] for o in outs}) == 3
        assert len(p.pids) == 3


async def test_children_beyond_the_warm_ones_go_after_idling() -> None:
    async with PythonPool(3, warm=1, retire_after=0.5) as p:
        await asyncio.gather(*(run(p, "sleep", seconds=0.5) for _ in range(3)))
        grown = p.pids
        assert len(grown) == 3
        await wait_until_async("the pool to shrink to its warm child", lambda: len(p.pids) == 1, LIVENESS)
        for pid in set(grown) - set(p.pids):
            await wait_gone(pid)
        # It still runs tasks, and grows again when it must.
        assert (await run(p, "noop")).succeeded
        outs = await asyncio.gather(*(run(p, "sleep", seconds=0.5) for _ in range(2)))
        assert len({json.loads(o.result_json)["pid"] for o in outs}) == 2


async def test_a_child_in_use_is_not_let_go() -> None:
    """Under a steady light load the child that keeps running tasks stays, however long ago it
    first idled; only the one left idle goes."""
    async with PythonPool(2, warm=1, retire_after=0.6) as p:
        await asyncio.gather(*(run(p, "sleep", seconds=0.3) for _ in range(2)))
        assert len(p.pids) == 2
        used = set()
        for _ in range(12):  # 1.2 s of one task every 0.1 s: twice the idle limit
            used.add(json.loads((await run(p, "pid")).result_json))
            await asyncio.sleep(0.1)
        assert len(used) == 1
        await wait_until_async("the idle child to go", lambda: p.pids == sorted(used), LIVENESS)


@pytest.mark.parametrize("warm", [0, 3])
def test_warm_must_be_between_one_and_the_size(warm: int) -> None:
    with pytest.raises(ValueError, match="warm"):
        PythonPool(2, warm=warm)
