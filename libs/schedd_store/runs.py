"""Creating and reading DAG runs with their task instances (the api's side)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from asyncpg import IntegrityConstraintViolationError

from schedd_core.errors import AlreadyExists, NotFound, quote
from schedd_core.graph import DagGraph
from schedd_core.mapping import UNMAPPED, split_key
from schedd_core.request_key import RequestKey
from schedd_store import statements as sql
from schedd_store.database import Engine
from schedd_store.instance_lookup import missing_instance
from schedd_store.records import RunRecord, TaskInstanceRecord, parse_spec
from schedd_store.requests import claim_request, constraint_error, record_resource

CREATE_RUN = "CreateRun"


def run_name(dag_id: str, run_id: str) -> str:
    return f"dags/{dag_id}/runs/{run_id}"


async def create_run(
    engine: Engine,
    *,
    dag_id: str,
    run_id: str,
    run_type: str,
    logical_date: datetime,
    conf: dict[str, Any],
    request: RequestKey | None = None,
    trace_context: str = "",
) -> RunRecord:
    """Insert a queued run pinned to the DAG's latest version and wake the scheduler.

    ``trace_context`` is the ``traceparent`` the spans of the run's tasks continue ("" for none).

    With ``request`` (a request id and a hash of the request's body), a retry returns the run the
    first call created, and the same request id with another body is refused (AlreadyExists).
    Raises NotFound for an unknown DAG and AlreadyExists for a taken run id or logical date.
    """
    try:
        # Without a request id the run's insert is the only statement: its own implicit transaction.
        async with engine.begin() if request is not None else engine.autocommit() as conn:
            earlier = None
            if request is not None:
                earlier = await claim_request(conn, CREATE_RUN, request.request_id, request.body_hash)
            if earlier is not None:
                run_id = earlier.rsplit("/", 1)[1]
            else:
                params = {
                    "dag_id": dag_id,
                    "run_id": run_id,
                    "run_type": run_type,
                    "logical_date": logical_date,
                    "conf": json.dumps(conf),
                    "trace_context": trace_context,
                }
                if (await conn.execute(sql.INSERT_RUN, params)).first() is None:
                    raise NotFound(f"dag {quote(dag_id)} not found")
                if request is not None:
                    await record_resource(conn, CREATE_RUN, request.request_id, run_name(dag_id, run_id))
    except IntegrityConstraintViolationError as exc:
        error = constraint_error(
            exc,
            {
                "dag_runs_dag_run_id_key": AlreadyExists(
                    f"run {quote(run_id)} of dag {quote(dag_id)} exists already"
                ),
                # The DAG was deleted between the insert's read and its foreign key check.
                "dag_runs_dag_id_fkey": NotFound(f"dag {quote(dag_id)} not found"),
                "dag_runs_dag_logical_date_key": AlreadyExists(
                    f"dag {quote(dag_id)} has a run for logical date {logical_date.isoformat()} already"
                ),
            },
        )
        if error is None:
            raise
        raise error from None
    return await get_run(engine, dag_id, run_id)


async def get_run(engine: Engine, dag_id: str, run_id: str) -> RunRecord:
    """The run with its task instances in dependency order (the order the run's first plan made them
    in), a mapped task's instances together at its place, by map index. Reads only: each statement
    on its own (read committed would give each its own snapshot inside a transaction too)."""
    async with engine.autocommit() as conn:
        row = (await conn.execute(sql.GET_RUN, {"dag_id": dag_id, "run_id": run_id})).first()
        if row is None:
            raise NotFound(f"run {quote(run_id)} of dag {quote(dag_id)} not found")
        tis = [_ti(t._mapping) for t in (await conn.execute(sql.LIST_TASK_INSTANCES, {"run_pk": row.id}))]
        if any(t.map_index != UNMAPPED for t in tis):
            version = (await conn.execute(sql.GET_VERSION_SPECS, {"ids": [row.dag_version_id]})).one()
            tis = _in_task_order(tis, DagGraph.from_spec(parse_spec(version.spec)).order)
    return _run(row._mapping, tis)


async def get_run_summary(engine: Engine, dag_id: str, run_id: str) -> RunRecord:
    """The run with how many of its task instances are in each state instead of the task instances:
    two small reads, whatever the size of the run."""
    async with engine.connect() as conn:
        row = (await conn.execute(sql.GET_RUN, {"dag_id": dag_id, "run_id": run_id})).first()
        if row is None:
            raise NotFound(f"run {quote(run_id)} of dag {quote(dag_id)} not found")
        counts = {c.state: c.n for c in await conn.execute(sql.COUNT_TASK_STATES, {"run_pk": row.id})}
    return replace(_run(row._mapping, []), task_state_counts=counts)


async def pinned_version(engine: Engine, dag_id: str, run_id: str) -> str:
    """The hash of the DAG version the run is pinned to now."""
    async with engine.connect() as conn:
        row = (await conn.execute(sql.GET_RUN, {"dag_id": dag_id, "run_id": run_id})).first()
    if row is None:
        raise NotFound(f"run {quote(run_id)} of dag {quote(dag_id)} not found")
    return str(row.version_hash)


def _in_task_order(tis: list[TaskInstanceRecord], order: Sequence[str]) -> list[TaskInstanceRecord]:
    """Task instances by their task's place in ``order`` (a task not in it last), then map index."""
    place = {task_id: i for i, task_id in enumerate(order)}
    return sorted(tis, key=lambda t: (place.get(t.task_id, len(place)), t.task_id, t.map_index))


#: The orders :func:`list_runs` knows (``create_time desc`` is the default).
RUN_ORDERS = tuple(sql.LIST_RUNS)


@dataclass(frozen=True)
class RunCursor:
    """Where a page of runs starts: after the run with this id (and, in a logical date order, this
    logical date)."""

    pk: int
    logical_date: datetime | None = None


async def list_runs(
    engine: Engine,
    *,
    dag_id: str | None,
    limit: int,
    after: RunCursor | None = None,
    order: str = "create_time desc",
    states: Sequence[str] = (),
    run_type: str | None = None,
    date_from: datetime | None = None,
    date_until: datetime | None = None,
) -> list[RunRecord]:
    """Runs in ``order`` (one of :data:`RUN_ORDERS`), after ``after`` (keyset pagination), in ``states``
    (any when empty), of ``run_type``, with logical dates in [``date_from``, ``date_until``); without
    task instances."""
    if after is None:
        after = RunCursor(pk=2**62 if order == "create_time desc" else 0)
    params = {
        "dag_id": dag_id,
        "after_pk": after.pk,
        "after_date": after.logical_date,
        "limit": limit,
        "states": list(states),
        "run_type": run_type,
        "date_from": date_from,
        "date_until": date_until,
    }
    async with engine.connect() as conn:
        rows = (await conn.execute(sql.LIST_RUNS[order], params)).all()
    return [_run(r._mapping, []) for r in rows]


@dataclass(frozen=True)
class TaskResult:
    state: str
    try_number: int
    #: Whether a value is stored; ``value`` may be None either way.
    stored: bool
    value: Any


async def task_result(engine: Engine, dag_id: str, run_id: str, task_key: str) -> TaskResult:
    """The value the successful attempt of the task instance ``task_key`` names (a task id, or
    ``task_id[map_index]``) returned, as stored. NotFound (saying why) when the key names none."""
    task_id, map_index = split_key(task_key)
    params = {"dag_id": dag_id, "run_id": run_id, "task_id": task_id, "map_index": map_index}
    async with engine.connect() as conn:
        row = (await conn.execute(sql.GET_TASK_RESULT, params)).first()
        if row is None:
            raise await missing_instance(conn, dag_id, run_id, task_key)
    return TaskResult(row.state, row.try_number, bool(row.has_result), row.result)


def _run(m: Any, tis: list[TaskInstanceRecord]) -> RunRecord:
    return RunRecord(
        pk=m["id"],
        dag_id=m["dag_id"],
        run_id=m["run_id"],
        run_type=m["run_type"],
        state=m["state"],
        logical_date=m["logical_date"],
        conf=m["conf"] or {},
        created_at=m["created_at"],
        started_at=m["started_at"],
        ended_at=m["ended_at"],
        version_hash=m["version_hash"],
        task_instances=tis,
        error=m["error"],
        data_interval_start=m["data_interval_start"],
        data_interval_end=m["data_interval_end"],
        backfill_id=m["backfill_id"],
        cancelled=m["cancelled"],
    )


def _ti(m: Any) -> TaskInstanceRecord:
    return TaskInstanceRecord(
        task_id=m["task_id"],
        map_index=m["map_index"],
        state=m["state"],
        try_number=m["try_number"],
        max_tries=m["max_tries"],
        attempt_id=str(m["attempt_id"]) if m["attempt_id"] else None,
        worker_id=m["worker_id"],
        queued_at=m["queued_at"],
        started_at=m["started_at"],
        ended_at=m["ended_at"],
        exit_code=m["exit_code"],
        error=m["error"],
        priority_weight=m["priority_weight"],
        pool=m["pool"],
        queue=m["queue"],
        version_hash=m["attempt_version"],
    )
