"""Reading a try's log from the store: a log stored in many pieces is read whole up to the byte
bound; "the latest try" is the latest that started, so a retry queued but not started does not hide
the try before it; the try after the latest is "not started yet" while the task instance may still
run it and not found once it is in a final state. Rows are made by SQL, as workers leave them.
"""

from __future__ import annotations

from typing import Any

import pytest

from schedd.v1 import resources_pb2 as pb
from schedd_core.errors import NotFound
from schedd_core.spec import validate_spec
from schedd_core.states import TaskState
from schedd_store import logs
from schedd_store.database import Engine
from schedd_store.instance_lookup import NotStartedYet
from schedd_store.named_sql import Statement

from .helpers import registered_run

pytestmark = pytest.mark.integration


async def _sql(engine: Engine, statement: str, **params: Any) -> list[Any]:
    async with engine.begin() as conn:
        result = await conn.execute(Statement(statement), params)
        return result.all()


async def _task_instance(engine: Engine, state: str, try_number: int) -> int:
    """Run r1 of DAG ``logged`` with its task instance ``t`` in ``state`` at ``try_number``, of 2."""
    spec = pb.DagSpec(dag_id="logged", tasks=[pb.TaskSpec(task_id="t", shell=pb.ShellCommand(command="x"))])
    validate_spec(spec)
    run = await registered_run(engine, spec)
    [row] = await _sql(
        engine,
        "INSERT INTO task_instances (run_pk, dag_id, logical_date, task_id, map_index, state, try_number, "
        "max_tries, attempt_id) SELECT r.id, r.dag_id, r.logical_date, 't', -1, :state, :try, 2, "
        "gen_random_uuid() FROM dag_runs r WHERE r.id = :run_pk RETURNING id",
        run_pk=run.pk,
        state=state,
        **{"try": try_number},
    )
    return int(row.id)


async def _attempt(engine: Engine, ti_id: int, try_number: int, state: str, pieces: list[str]) -> None:
    """An attempt of try ``try_number`` that stored ``pieces`` of output, one row each."""
    [row] = await _sql(
        engine,
        "INSERT INTO task_attempts (attempt_id, ti_id, try_number, worker_id, state, started_at) "
        "VALUES (gen_random_uuid(), :ti, :try, 'w', :state, now()) RETURNING attempt_id",
        ti=ti_id,
        state=state,
        **{"try": try_number},
    )
    offsets = [sum(len(p.encode()) for p in pieces[:i]) for i in range(len(pieces))]
    await _sql(
        engine,
        "INSERT INTO task_logs (ti_id, try_number, attempt_id, byte_offset, data) "
        "SELECT :ti, :try, :attempt, o, d FROM unnest(CAST(:offsets AS bigint[]), CAST(:data AS text[])) "
        "AS p(o, d)",
        ti=ti_id,
        attempt=row.attempt_id,
        offsets=offsets,
        data=pieces,
        **{"try": try_number},
    )


async def _read(engine: Engine, try_number: int = 0, max_bytes: int = 1 << 20) -> logs.LogSlice:
    return await logs.read_logs(
        engine,
        dag_id="logged",
        run_id="r1",
        task_key="t",
        try_number=try_number,
        offset=0,
        max_bytes=max_bytes,
    )


async def test_a_log_stored_in_many_pieces_is_read_whole_up_to_the_bound(engine: Engine) -> None:
    ti_id = await _task_instance(engine, "success", 1)
    pieces = [f"line {i}\n" for i in range(2500)]  # more pieces than one page of rows
    await _attempt(engine, ti_id, 1, "success", pieces)
    whole = await _read(engine)
    assert whole.data == "".join(pieces) and whole.next_offset == len(whole.data.encode())
    assert (whole.complete, whole.state, whole.latest_try, whole.max_tries) == (
        True,
        TaskState.SUCCESS,
        1,
        2,
    )
    bounded = await _read(engine, max_bytes=20_000)
    assert bounded.data == "".join(pieces).encode()[:20_000].decode() and bounded.next_offset == 20_000


async def test_a_queued_retry_does_not_hide_the_try_before_it(engine: Engine) -> None:
    ti_id = await _task_instance(engine, "queued", 2)  # try 2 queued, not claimed yet
    await _attempt(engine, ti_id, 1, "failed", ["try 1\n", "[schedd] try 1 failed: exit code 1\n"])
    latest = await _read(engine)
    assert (latest.try_number, latest.data, latest.complete) == (
        1,
        "try 1\n[schedd] try 1 failed: exit code 1\n",
        True,
    )
    assert (latest.state, latest.latest_try) == (TaskState.QUEUED, 1)
    with pytest.raises(NotStartedYet, match="has not started try 2 yet"):
        await _read(engine, try_number=2)
    await _sql(engine, "UPDATE task_instances SET state = 'failed' WHERE id = :ti", ti=ti_id)
    with pytest.raises(NotFound, match=r"has no try 2 \(latest: 1\)") as caught:
        await _read(engine, try_number=2)
    assert not isinstance(caught.value, NotStartedYet)
