"""Deleting DAGs (with their history), finished runs and unused pools (the api's side).

Guaranteed: nothing in flight is deleted. Each deletion locks the row it deletes before it checks
what hangs below it, so a run cannot start under a DAG being deleted (the leader's schedule timer
and a trigger wait for the lock, then find no DAG), and a pool cannot be taken while it is deleted.
The refusals are FailedPrecondition naming what is in flight. With a request id, a retry of a
deletion that succeeded succeeds again instead of answering NotFound.
"""

from __future__ import annotations

from schedd_core.errors import FailedPrecondition, NotFound, quote
from schedd_core.request_key import RequestKey
from schedd_core.states import RunState
from schedd_store import channels, control, statements as sql
from schedd_store.database import Connection, Engine
from schedd_store.records import parse_spec
from schedd_store.requests import earlier_outcome, record_outcome

DELETE_DAG = "DeleteDag"
DELETE_RUN = "DeleteRun"
DELETE_POOL = "DeletePool"

#: The pool of tasks that name none; it always exists.
DEFAULT_POOL = "default_pool"

#: How many DAG specs are read at a time to find the DAGs that name a pool.
_SPEC_PAGE = 200
#: How many of the DAGs that name a pool a refusal lists.
_NAMED = 5


async def delete_dag(
    engine: Engine, dag_id: str, request: RequestKey | None = None, *, cancel_runs: bool = False
) -> None:
    """Delete the DAG and everything recorded under it. Refused while it has runs queued or
    running, a backfill running or paused, or task instances queued or running, unless
    ``cancel_runs``: then its backfills and runs in flight are cancelled first, in the same
    transaction (all or nothing). A worker still running an attempt of a deleted run is told to stop
    it at its next heartbeat, which finds no such attempt."""
    async with engine.begin() as conn:
        if await earlier_outcome(conn, DELETE_DAG, request) is not None:
            return
        if (await conn.execute(sql.LOCK_DAG, {"dag_id": dag_id})).first() is None:
            raise NotFound(f"dag {quote(dag_id)} not found")
        if cancel_runs:
            await _cancel_in_flight(conn, dag_id)
        busy = (await conn.execute(sql.DAG_IN_FLIGHT, {"dag_id": dag_id})).one()
        reasons = [
            f"{count} {what}"
            for count, what in (
                (busy.active_runs, "runs queued or running"),
                (busy.active_backfills, "backfills running or paused"),
                (busy.active_tasks, "task instances queued or running"),
            )
            if count
        ]
        if reasons:
            raise FailedPrecondition(
                f"dag {quote(dag_id)} has {', '.join(reasons)}: pause it and cancel them (or let them end) "
                "before deleting it"
            )
        await conn.execute(sql.DELETE_DAG, {"dag_id": dag_id})
        await conn.execute(sql.NOTIFY, {"channel": channels.DAGS, "payload": dag_id})
        await record_outcome(conn, DELETE_DAG, request, f"dags/{dag_id}")


async def _cancel_in_flight(conn: Connection, dag_id: str) -> None:
    """Cancel the (locked) DAG's running or paused backfills and its queued or running runs."""
    for backfill_id in (await conn.execute(sql.ACTIVE_BACKFILL_OF_DAG, {"dag_id": dag_id})).scalars():
        await conn.execute(sql.LOCK_BACKFILL, {"id": backfill_id})
        await conn.execute(sql.CANCEL_BACKFILL, {"id": backfill_id})
    for run_id in (await conn.execute(sql.UNFINISHED_RUN_IDS_OF_DAG, {"dag_id": dag_id})).scalars():
        await control.cancel_locked(conn, dag_id, run_id)


async def delete_run(engine: Engine, dag_id: str, run_id: str, request: RequestKey | None = None) -> None:
    """Delete a finished run with its task instances, attempts and logs."""
    async with engine.begin() as conn:
        if await earlier_outcome(conn, DELETE_RUN, request) is not None:
            return
        run = (await conn.execute(sql.LOCK_RUN, {"dag_id": dag_id, "run_id": run_id})).first()
        if run is None:
            raise NotFound(f"run {quote(run_id)} of dag {quote(dag_id)} not found")
        in_flight = (await conn.execute(sql.RUN_TASKS_IN_FLIGHT, {"run_pk": run.id})).scalar_one()
        if run.state in (RunState.QUEUED, RunState.RUNNING) or in_flight:
            raise FailedPrecondition(
                f"run {quote(run_id)} of dag {quote(dag_id)} is {run.state} with {in_flight} task "
                "instances queued or running: cancel it before deleting it"
            )
        await conn.execute(sql.DELETE_RUN, {"run_pk": run.id})
        await record_outcome(conn, DELETE_RUN, request, f"dags/{dag_id}/runs/{run_id}")


async def delete_pool(engine: Engine, name: str, request: RequestKey | None = None) -> None:
    """Delete a pool no task instance holds or waits for and no DAG's latest version names."""
    if name == DEFAULT_POOL:
        raise FailedPrecondition(f"pool {quote(DEFAULT_POOL)} cannot be deleted")
    async with engine.begin() as conn:
        if await earlier_outcome(conn, DELETE_POOL, request) is not None:
            return
        if (await conn.execute(sql.LOCK_POOL, {"name": name})).first() is None:
            raise NotFound(f"pool {quote(name)} not found")
        waiting = (await conn.execute(sql.POOL_TASKS_UNFINISHED, {"name": name})).scalar_one()
        if waiting:
            raise FailedPrecondition(
                f"pool {quote(name)} is held or awaited by {waiting} task instances that have not finished"
            )
        naming = await _dags_naming_pool(conn, name)
        if naming:
            shown = ", ".join(quote(d) for d in naming[:_NAMED])
            more = f" and {len(naming) - _NAMED} more" if len(naming) > _NAMED else ""
            raise FailedPrecondition(
                f"pool {quote(name)} is named by the latest version of dag {shown}{more}: "
                "register them without it first"
            )
        await conn.execute(sql.DELETE_POOL, {"name": name})
        await conn.execute(sql.DELETE_POOL_OCCUPANCY, {"name": name})
        await record_outcome(conn, DELETE_POOL, request, f"pools/{name}")


async def _dags_naming_pool(conn: Connection, pool: str) -> list[str]:
    """The DAGs whose latest version has a task in ``pool`` (the specs are read a page at a time)."""
    found: list[str] = []
    after = ""
    while True:
        rows = (await conn.execute(sql.LATEST_SPECS_AFTER, {"after": after, "limit": _SPEC_PAGE})).all()
        for row in rows:
            if any((task.pool or DEFAULT_POOL) == pool for task in parse_spec(row.spec).tasks):
                found.append(row.dag_id)
        if len(rows) < _SPEC_PAGE:
            return found
        after = rows[-1].dag_id
