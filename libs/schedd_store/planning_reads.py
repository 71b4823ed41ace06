"""What a scheduling pass reads, inside its fenced transaction: the runs it evaluates (locked) with
the states of their task instances, and what limits and dependencies on past runs need.

Two ways to read a run:

- :func:`load_runs` reads every task instance of the runs (a new run, a manual change, a term's
  first pass, anything the leader was not told in detail), bounded by a budget of task instances;
- :func:`load_changes` reads only the task instances named (those a registry reported changed, and
  those the leader itself wrote last time), for runs whose other task instances the leader still
  knows; it also returns each run's ``control_version``, which manual control raises under the
  run's lock, so that a run a user changed is read in full instead.

Rows are turned into planner snapshots with as little Python per row as possible: a pass may read
thousands.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from schedd_core.graph import DagGraph
from schedd_core.planner import TaskSnapshot
from schedd_core.states import TaskState
from schedd_store import statements as sql
from schedd_store.database import Connection
from schedd_store.fence import FencedConnection

#: The snapshot of every (state, retry_due, retry_unscheduled) without branch choices, built once:
#: the leader keeps the task instances of the runs it knows (``schedd_scheduler.run_cache``), and
#: shared snapshots make each of them cost a dictionary entry instead of a tuple of its own.
_SNAPSHOTS = {
    (s.value, due, unscheduled): TaskSnapshot(s, due, unscheduled)
    for s in TaskState
    for due in (False, True)
    for unscheduled in (False, True)
}


@dataclass
class PlanningRun:
    pk: int
    version_id: int
    state: str
    dag_id: str = ""
    logical_date: datetime | None = None
    #: Seconds since the run started; None before it started.
    age: float | None = None
    paused: bool = False
    #: The backfill that made the run, if one did.
    backfill_id: int | None = None
    #: Raised by every manual change of the run (clear, mark, cancel, a backfill's rerun).
    control_version: int = 0
    #: By task instance key: the task id, or ``task_id[i]`` for a mapped task's instance.
    tasks: dict[str, TaskSnapshot] = field(default_factory=dict)
    ti_ids: dict[str, int] = field(default_factory=dict)
    tries: dict[str, int] = field(default_factory=dict)
    #: The tasks whose task instances were read again for an incremental evaluation; None when the run
    #: was read in full.
    changed: set[str] | None = None


def _run(r: Sequence[Any]) -> PlanningRun:
    pk, dag_id, version_id, state, logical_date, backfill_id, control_version, age, paused = r[:9]
    return PlanningRun(
        pk=pk,
        version_id=version_id,
        state=state,
        dag_id=dag_id,
        logical_date=logical_date,
        age=None if age is None else float(age),
        paused=paused,
        backfill_id=backfill_id,
        control_version=control_version,
    )


def _add_task(run: PlanningRun, t: Sequence[Any]) -> str:
    """Record one task instance row (``ti_id, task_key, state, follow, try_number, retry_due,
    retry_unscheduled``) on ``run``; returns its key (``schedd_core.mapping``)."""
    ti_id, task_id, state, follow, try_number, retry_due, retry_unscheduled = t
    key = sys.intern(task_id)  # one string per task id however many runs the leader knows
    snapshot = _SNAPSHOTS[state, bool(retry_due), bool(retry_unscheduled)]
    if follow is not None:
        snapshot = snapshot._replace(follow=frozenset(follow))
    run.tasks[key] = snapshot
    run.ti_ids[key] = ti_id
    run.tries[key] = try_number
    return key


async def unfinished_run_pks(conn: Connection) -> list[int]:
    return [int(r[0]) for r in (await conn.execute(sql.UNFINISHED_RUNS)).all()]


async def load_runs(
    conn: FencedConnection, run_pks: Sequence[int], *, budget: int
) -> tuple[list[PlanningRun], list[int]]:
    """Lock the unfinished runs among ``run_pks`` that this pass evaluates (the oldest one, plus the
    smallest others whose task counts add up to at most ``budget``) and read the states of all their
    task instances. Returns the runs and the unfinished runs left for a later pass."""
    runs: dict[int, PlanningRun] = {}
    deferred: list[int] = []
    result = await conn.execute(sql.LOCK_RUNS_AND_LOAD_TASKS, {"run_pks": list(run_pks), "budget": budget})
    rows = result.all()
    for r in rows:
        run = runs.get(r[0])
        if run is None:
            run = runs[r[0]] = _run(r)
            if not deferred and r[9]:
                deferred = [int(pk) for pk in r[9]]
        if r[11] is not None:
            _add_task(run, r[10:17])
    return list(runs.values()), deferred


async def load_changes(
    conn: FencedConnection, changes: Mapping[int, set[int]]
) -> tuple[list[PlanningRun], list[int]]:
    """Lock the unfinished runs of ``changes`` and read the task instances named for each (run pk ->
    task instance ids). Returns the runs, each holding only those task instances (``changed`` names
    their tasks), and the run pks that are no longer unfinished."""
    runs: dict[int, PlanningRun] = {}
    ti_ids = sorted({ti for named in changes.values() for ti in named})
    result = await conn.execute(sql.LOCK_RUNS_WITH_CHANGES, {"run_pks": sorted(changes), "ti_ids": ti_ids})
    rows = result.all()
    for r in rows:
        run = runs.get(r[0])
        if run is None:
            run = runs[r[0]] = _run(r)
            run.changed = set()
        if r[9] is not None:
            run.changed.add(_add_task(run, r[9:16]))  # type: ignore[union-attr]
    return list(runs.values()), [pk for pk in changes if pk not in runs]


async def past_states(
    conn: FencedConnection, run_pks: Sequence[int], task_ids: Sequence[str]
) -> dict[int, dict[str, TaskState]]:
    """For depends_on_past: by run, the state of each of ``task_ids`` in the DAG's previous run (see
    PAST_TASK_STATES); a task missing from a run's mapping is not held back."""
    if not run_pks or not task_ids:
        return {}
    params = {"run_pks": list(run_pks), "task_ids": sorted(set(task_ids))}
    result: dict[int, dict[str, TaskState]] = {}
    for r in (await conn.execute(sql.PAST_TASK_STATES, params)).all():
        result.setdefault(int(r.run_pk), {})[r.task_id] = TaskState(r.state)
    return result


async def next_unfinished_runs(conn: FencedConnection, run_pks: Sequence[int]) -> list[int]:
    """The unfinished run after each of ``run_pks`` in its DAG, by logical date."""
    if not run_pks:
        return []
    rows = (await conn.execute(sql.NEXT_UNFINISHED_RUNS, {"run_pks": list(run_pks)})).all()
    return [int(r.id) for r in rows]


async def running_runs(conn: FencedConnection, dag_ids: Sequence[str]) -> dict[str, int]:
    rows = (await conn.execute(sql.RUNNING_RUNS_OF_DAGS, {"dag_ids": list(dag_ids)})).all()
    return {r.dag_id: int(r.running) for r in rows}


async def queued_runs_to_start(conn: FencedConnection, freed: dict[str, int]) -> list[int]:
    """The queued runs that may start now that ``freed`` runs of their DAGs ended (by DAG)."""
    if not freed:
        return []
    dag_ids = sorted(freed)
    params = {"dag_ids": dag_ids, "rooms": [freed[d] for d in dag_ids]}
    return [int(r.id) for r in (await conn.execute(sql.QUEUED_RUNS_TO_START, params)).all()]


async def expansion_lengths(
    conn: FencedConnection, wanted: Sequence[tuple[int, DagGraph, str]]
) -> dict[int, dict[str, list[tuple[str, int | None]]]]:
    """For mapped tasks ready to expand (``(run pk, graph, task id)``): by run and task, the name and
    list length of each argument it expands over (``planner.plan_run``'s ``map_lengths``). A literal
    list's length is the spec's; an upstream result that is not a list (or no result) has None; a
    mapped upstream task's results are as long as it has instances."""
    asked = sorted(
        {
            (pk, source.task_id, source.key)
            for pk, graph, tid in wanted
            for source in graph.nodes[tid].expand
            if source.literal_length is None
        },
        key=lambda q: (q[0], q[1], q[2] or ""),
    )
    found: dict[tuple[int, str, str | None], int | None] = {}
    if asked:
        params = {
            "run_pks": [q[0] for q in asked],
            "task_ids": [q[1] for q in asked],
            "keys": [q[2] for q in asked],
        }
        for r in (await conn.execute(sql.EXPANSION_SOURCES, params)).all():
            length = int(r.instances) if r.instances else (None if r.length is None else int(r.length))
            found[(int(r.run_pk), r.task_id, r.key)] = length
    result: dict[int, dict[str, list[tuple[str, int | None]]]] = {}
    for pk, graph, tid in wanted:
        result.setdefault(pk, {})[tid] = [
            (
                source.name,
                source.literal_length
                if source.literal_length is not None
                else found.get((pk, source.task_id, source.key)),
            )
            for source in graph.nodes[tid].expand
        ]
    return result
