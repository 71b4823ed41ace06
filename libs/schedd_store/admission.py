"""Admission inside a scheduling pass: which ready task instances queue now, under pools and limits.

Reads what the pure :func:`schedd_core.admission.admit` needs, inside the pass's fenced
transaction: the capacity of the pools involved (with their backfill shares), the task instances
already waiting in them (from any run, in admission order, page by page and no more than a few
times the free slots, for each lane: backfill runs' and the others', so a long queue of one
never hides the other), and the active counts behind DAG and task limits.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from schedd_core.admission import Candidate, Capacity, admit
from schedd_core.graph import DagGraph
from schedd_store import statements as sql
from schedd_store.fence import FencedConnection

#: Waiting task instances read per page when admitting from a pool.
WAITING_PAGE = 500


async def admit_ready(
    conn: FencedConnection,
    ready: list[Candidate],
    graphs_by_dag: dict[str, DagGraph],
    graph_of: Callable[[int], DagGraph] | None,
    load_graphs: Callable[[FencedConnection, set[int]], Any] | None,
) -> tuple[list[Candidate], dict[int, int]]:
    """Decide which ready task instances queue now. Task instances already waiting in the same pools
    (from any run) compete in the same order, so the oldest and most important go first. Returns the
    admitted candidates and, for those read from the pools' waiting lists, their runs (ti -> run)."""
    pools = sorted({c.pool for c in ready})
    rows = (await conn.execute(sql.POOL_CAPACITY, {"pools": pools})).all()
    capacity = Capacity(
        pool_slots={r.name: int(r.slots) for r in rows},
        pool_used={r.name: int(r.used) for r in rows},
        backfill_share={r.name: float(r.backfill_share) for r in rows},
        backfill_used={r.name: int(r.backfill_used) for r in rows},
    )
    candidates = list(ready)
    seen = {c.ti_id for c in candidates}
    waiting_version: dict[int, int] = {}
    waiting_run: dict[int, int] = {}
    for row in rows:
        free = int(row.slots) - int(row.used)
        if free <= 0:
            continue
        for backfill, waits in ((False, row.waiting), (True, row.backfills_waiting)):
            if waits:
                for w in await _waiting(conn, row.name, backfill, free):
                    if w.id not in seen:
                        seen.add(w.id)
                        waiting_version[w.id] = w.dag_version_id
                        waiting_run[w.id] = w.run_pk
                        candidates.append(
                            Candidate(
                                ti_id=w.id,
                                dag_id=w.dag_id,
                                task_id=w.task_id,
                                pool=w.pool,
                                pool_slots=w.pool_slots,
                                priority=w.priority_weight,
                                logical_date=w.logical_date,
                                backfill=w.backfill,
                            )
                        )
    waiting_versions = set(waiting_version.values())
    if waiting_versions and load_graphs is not None:
        await load_graphs(conn, waiting_versions)
    dag_limits: dict[str, int] = {}
    task_limits: dict[tuple[str, str], int] = {}
    for c in candidates:
        graph = graphs_by_dag.get(c.dag_id)
        if graph is None and graph_of is not None and c.ti_id in waiting_version:
            graph = graph_of(waiting_version[c.ti_id])
        if graph is None:
            continue
        if graph.max_active_tasks:
            dag_limits[c.dag_id] = graph.max_active_tasks
        node = graph.nodes.get(c.task_id)
        if node is not None and node.max_active_instances:
            task_limits[(c.dag_id, c.task_id)] = node.max_active_instances
    if dag_limits:
        active = {
            r.dag_id: int(r.active)
            for r in (await conn.execute(sql.ACTIVE_TASKS_OF_DAGS, {"dag_ids": sorted(dag_limits)})).all()
        }
        capacity.dag_tasks = {d: (limit, active.get(d, 0)) for d, limit in dag_limits.items()}
    if task_limits:
        rows2 = (
            await conn.execute(
                sql.ACTIVE_INSTANCES_OF_TASKS,
                {
                    "dag_ids": sorted({d for d, _ in task_limits}),
                    "task_ids": sorted({t for _, t in task_limits}),
                },
            )
        ).all()
        active2 = {(r.dag_id, r.task_id): int(r.active) for r in rows2}
        capacity.task_instances = {k: (limit, active2.get(k, 0)) for k, limit in task_limits.items()}
    return admit(candidates, capacity), waiting_run


async def _waiting(conn: FencedConnection, pool: str, backfill: bool, free: int) -> list[Any]:
    """Task instances of one lane waiting in ``pool``, in admission order, until they could fill the
    free slots several times over (some may be held back by DAG or task limits), page by page. Pages
    are sized to the free slots: a full pool with a long queue costs a few rows per pass."""
    found: list[Any] = []
    after: tuple[int, datetime, int] = (-(2**31), datetime(1, 1, 1, tzinfo=UTC), -1)
    slots_seen = 0
    page_size = min(WAITING_PAGE, max(4 * free, 32))
    while True:
        page = (
            await conn.execute(
                sql.WAITING_IN_POOL,
                {
                    "pool": pool,
                    "backfill": backfill,
                    "limit": page_size,
                    "after_priority": after[0],
                    "after_date": after[1],
                    "after_id": after[2],
                },
            )
        ).all()
        found += page
        slots_seen += sum(w.pool_slots for w in page)
        if len(page) < page_size or slots_seen >= 4 * free:
            return found
        last = page[-1]
        after = (-last.priority_weight, last.logical_date, last.id)
