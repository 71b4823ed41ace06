"""The scheduler's writes, always inside a fenced transaction (see ``fence.py``).

``planning_reads`` locks the runs to evaluate and reads their task states; :func:`apply_plans`
admits the ready task instances under pools and limits (``admission``), has the pure
:func:`schedd_core.pass_writes.decide_writes` turn plans and admissions into writes, and
:func:`apply_writes` makes them, then wakes the registries.

Every guarded statement is checked against the rows it was meant to change: a shortfall means the
state moved under the pass (another writer changed a row between the pass's read and its write, or
the decision named a row it did not read) and raises :class:`IllegalTransition`, naming the
statement and the rows, which rolls the whole transaction back: either every decision of a pass
lands or none does. The leader then plans those runs again from fresh state.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from schedd_core.errors import IllegalTransition
from schedd_core.graph import DagGraph
from schedd_core.handoffs import Handoff
from schedd_core.pass_plan import PlannedRun
from schedd_core.pass_writes import PassOutcome, PassWrites, decide_writes, ready_candidates
from schedd_core.states import TaskState, allowed_run_sources, allowed_task_sources
from schedd_store import channels, statements as sql
from schedd_store.admission import admit_ready
from schedd_store.fence import FencedConnection
from schedd_store.handoffs import write_handoffs


async def apply_plans(
    conn: FencedConnection,
    token: int,
    plans: Sequence[PlannedRun],
    *,
    graph_of: Callable[[int], DagGraph] | None = None,
    load_graphs: Callable[[FencedConnection, set[int]], Any] | None = None,
    rng: random.Random | None = None,
    handoffs: Sequence[Handoff] = (),
    ti_ids: Mapping[int, Mapping[str, int]] | None = None,
) -> PassOutcome:
    """Write every plan of one scheduling pass, admitting ready task instances under pools and limits.

    ``graph_of(version_id)`` gives the graph of task instances waiting in other runs (for their
    DAG and task limits); ``load_graphs(conn, version_ids)`` makes sure those are available.
    Every pass admits, even with nothing newly ready: the runs it evaluates may have freed pool
    slots or limits that task instances of other runs wait for. ``handoffs``
    (``schedd_core.handoffs``; keys resolved with ``ti_ids`` by run, else those of ``plans``) are
    written after the task instances are created; the outcome says which (``PassOutcome.handoffs``).
    """
    ready = ready_candidates(plans)
    graphs_by_dag = {p.run.dag_id: p.graph for p in plans}
    admitted, waiting_run = await admit_ready(
        conn, [r.candidate for r in ready], graphs_by_dag, graph_of, load_graphs
    )
    writes = decide_writes(plans, ready, admitted, waiting_run, (rng or random.Random()).random)
    if ti_ids is None:
        ti_ids = {p.run.pk: p.run.ti_ids for p in plans}
    return await apply_writes(conn, token, writes, handoffs=handoffs, ti_ids=ti_ids)


async def apply_writes(
    conn: FencedConnection,
    token: int,
    writes: PassWrites,
    *,
    handoffs: Sequence[Handoff] = (),
    ti_ids: Mapping[int, Mapping[str, int]] | None = None,
) -> PassOutcome:
    """Make the writes of one pass, in their order, checking every guarded statement's row count
    (a shortfall raises :class:`IllegalTransition`; the caller's transaction then rolls back).
    Returns ``writes.outcome``, completed with what only the writes tell: the task instances queued
    and the ids of those created."""
    outcome = writes.outcome
    if writes.remove:
        rows = (await conn.execute(sql.REMOVE_PLACEHOLDERS, {"ids": writes.remove})).all()
        _expect("remove the placeholders of task instances", writes.remove, rows)
    created, queues = await _create(conn, token, writes)
    outcome.handoffs = await write_handoffs(conn, token, handoffs, ti_ids or {}, created)
    await _finish_unrun(conn, token, writes, created)
    if writes.retries:
        ids = [r.ti_id for r in writes.retries]
        params = {"ids": ids, "delays": [r.delay for r in writes.retries], "token": token}
        _expect(
            "set the retry times of task instances",
            ids,
            (await conn.execute(sql.SET_RETRY_TIMES, params)).all(),
        )
    await _runs(conn, token, writes)
    if writes.queue:
        # Last, and in one statement with the pass log and the registries' wake-up: the common pass
        # (a task finished, the next one queues) costs one round trip fewer.
        params = {
            "ids": writes.queue,
            "token": token,
            "runs": writes.runs,
            "queued_before": outcome.queued,
            "queues": sorted(queues),
        }
        rows = (await conn.execute(sql.QUEUE_AND_RECORD_PASS, params)).all()
        _expect("queue task instances", writes.queue, rows)
        outcome.queued += len(rows)
    elif writes.runs:
        params = {"token": token, "runs": writes.runs, "queued": outcome.queued, "queues": sorted(queues)}
        await conn.execute(sql.RECORD_PASS, params)
    return outcome


async def _create(
    conn: FencedConnection, token: int, writes: PassWrites
) -> tuple[dict[tuple[int, str], int], set[str]]:
    """Create the pass's new task instances; returns their ids by (run pk, key) and the queues of
    those created queued (counted in ``writes.outcome``)."""
    if not writes.create:
        return {}, set()
    columns = list(zip(*writes.create, strict=True))
    params = {
        "run_pks": columns[0],
        "task_ids": columns[1],
        "map_indexes": columns[2],
        "states": [s.value for s in columns[3]],
        "max_tries": columns[4],
        "weights": columns[5],
        "pools": columns[6],
        "slots": columns[7],
        "queues": columns[8],
        "branches": columns[9],
        "events": columns[10],
        "token": token,
    }
    rows = (await conn.execute(sql.INSERT_TASK_INSTANCES, params)).all()
    if len(rows) != len(writes.create):
        raise IllegalTransition(
            f"created {len(rows)} of {len(writes.create)} task instances: a run the pass locked is gone"
        )
    outcome = writes.outcome
    outcome.created += len(rows)
    created: dict[tuple[int, str], int] = {}
    queues: set[str] = set()
    for r in rows:
        if r.state == TaskState.QUEUED:
            queues.add(r.queue)
            outcome.queued += 1
        outcome.written.setdefault(r.run_pk, set()).add(r.id)
        created[(r.run_pk, r.task_key)] = r.id
    return created, queues


async def _finish_unrun(
    conn: FencedConnection, token: int, writes: PassWrites, created: dict[tuple[int, str], int]
) -> None:
    """Fail what cannot run, schedule what waits for a slot, skip and mark upstream_failed what will
    not run, and fail the running attempts of timed-out runs."""
    if writes.fail_unrun:
        ids = [f.ti_id or created[(f.run_pk, f.key)] for f in writes.fail_unrun]
        params = {"ids": ids, "errors": [f.error[:4000] for f in writes.fail_unrun], "token": token}
        _expect("fail task instances", ids, (await conn.execute(sql.FAIL_UNRUN_TASK_INSTANCES, params)).all())
    if writes.schedule:
        params = {"ids": writes.schedule, "token": token}
        _expect(
            "schedule task instances",
            writes.schedule,
            (await conn.execute(sql.SCHEDULE_TASK_INSTANCES, params)).all(),
        )
    for target, ids in (
        (TaskState.SKIPPED, writes.skip),
        (TaskState.UPSTREAM_FAILED, writes.upstream_failed),
    ):
        if ids:
            params = {
                "ids": ids,
                "target": target.value,
                "token": token,
                "allowed_from": allowed_task_sources(target),
            }
            rows = (await conn.execute(sql.FINISH_UNRUN_TASK_INSTANCES, params)).all()
            _expect(f"mark {target.value} task instances", ids, rows)
    if writes.fail_running:
        params = {"ids": writes.fail_running, "token": token, "error": "the run timed out"}
        rows = (await conn.execute(sql.FAIL_RUNNING_TASK_INSTANCES, params)).all()
        _expect("fail running task instances", writes.fail_running, rows)
        if any(r.events for r in rows):
            await conn.execute(sql.NOTIFY, {"channel": channels.OUTBOX, "payload": ""})


async def _runs(conn: FencedConnection, token: int, writes: PassWrites) -> None:
    """Start the queued runs, finish the finished ones and record their callback events."""
    if writes.start_runs:
        rows = (await conn.execute(sql.START_RUNS, {"run_pks": writes.start_runs, "token": token})).all()
        _expect("start runs", writes.start_runs, rows)
    for pk, run_state in writes.finish_runs:
        params = {
            "run_pk": pk,
            "target": run_state.value,
            "token": token,
            "allowed_from": allowed_run_sources(run_state),
        }
        if (await conn.execute(sql.FINISH_RUN, params)).first() is None:
            raise IllegalTransition(f"cannot finish run {pk} as {run_state.value}: its state changed")
    if writes.run_events:
        events, run_pks, dag_ids = (list(c) for c in zip(*writes.run_events, strict=True))
        await conn.execute(sql.RECORD_RUN_EVENTS, {"events": events, "run_pks": run_pks, "dag_ids": dag_ids})
        await conn.execute(sql.NOTIFY, {"channel": channels.OUTBOX, "payload": ""})


def _expect(action: str, ids: Sequence[int], rows: Sequence[Any]) -> None:
    """Raise IllegalTransition unless ``rows`` (each with an ``id``) are exactly as many as ``ids``."""
    if len(rows) != len(ids):
        moved = {r.id for r in rows}
        missing = [i for i in ids if i not in moved]
        raise IllegalTransition(f"cannot {action} {missing[:10]}: their state changed")


async def quarantine_run(conn: FencedConnection, token: int, run_pk: int, error: str) -> bool:
    """Fail a run that cannot be planned, saying why; returns whether it was still unfinished."""
    row = (
        await conn.execute(sql.QUARANTINE_RUN, {"run_pk": run_pk, "error": error[:4000], "token": token})
    ).first()
    if row is not None:
        await conn.execute(sql.RECORD_PASS, {"token": token, "runs": 1, "queued": 0, "queues": []})
    return row is not None
