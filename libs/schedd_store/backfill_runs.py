"""Backfills, the leader's side: making each running backfill's runs as its strategy says, fenced.

:func:`advance` locks the running backfills it is given and, for each, repeats until nothing
changes (or ``MAX_ROUNDS``): settle the intervals whose runs ended (``succeeded``/``failed``),
ask :func:`schedd_core.backfill_plan.plan_backfill` which intervals to start, and start them:

- no scheduled or backfill run has the interval's logical date: a ``backfill__<logical date>``
  run of the DAG's latest version is made, linked to the backfill;
- a run exists and is still queued or running (a scheduled run in flight): the interval is
  skipped, noted "in flight", never doubled;
- a run exists and ended: ``skip_existing`` skips it (noted), ``rerun_failed`` clears it if it
  failed and skips it otherwise, ``rerun_all`` clears it; a cleared run runs again as the
  backfill's (its task instances take the backfill's share of the pools).

Everything a call decides commits together or not at all (it runs in the caller's fenced
transaction), so a fail-over in the middle of a backfill neither loses nor doubles a run: the next
leader starts from the same stored intervals, and the unique (dag, logical date) constraint
refuses a second run whatever happens.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from schedd_core.backfill_plan import (
    IntervalStatus,
    Reprocess,
    Strategy,
    WindowEntry,
    plan_backfill,
    window_size,
)
from schedd_core.states import BackfillState, RunState, RunType, TaskState
from schedd_core.timetables import DataInterval
from schedd_store import channels, statements as sql
from schedd_store.fence import FencedConnection
from schedd_store.run_versions import move_to_current_version, refresh_options
from schedd_store.schedules import NewRun, create_interval_runs
from schedd_store.versions import VersionCache

#: Rounds of settle-plan-start one call does per backfill; more are left for the next call.
MAX_ROUNDS = 50


@dataclass
class AdvanceOutcome:
    runs_made: int = 0
    runs_rerun: int = 0
    skipped: int = 0
    #: Backfills that ended: id -> final state.
    ended: dict[int, BackfillState] = field(default_factory=dict)
    #: Backfills with more to do than one call did: advance them again.
    unfinished: set[int] = field(default_factory=set)


async def running_backfills(conn: Any) -> list[int]:
    return [int(r.id) for r in (await conn.execute(sql.RUNNING_BACKFILLS)).all()]


async def advance(
    conn: FencedConnection, backfill_ids: Sequence[int], versions: VersionCache
) -> AdvanceOutcome:
    """Advance the running backfills among ``backfill_ids``; see the module docstring."""
    outcome = AdvanceOutcome()
    if not backfill_ids:
        return outcome
    rows = (await conn.execute(sql.LOCK_RUNNING_BACKFILLS, {"ids": sorted(set(backfill_ids))})).all()
    for row in rows:
        await _advance_one(conn, row, versions, outcome)
    return outcome


async def _advance_one(
    conn: FencedConnection, b: Any, versions: VersionCache, outcome: AdvanceOutcome
) -> None:
    strategy = Strategy(b.strategy)
    size = window_size(strategy, max_active_runs=b.max_active_runs, chunk_size=b.chunk_size)
    for _ in range(MAX_ROUNDS):
        window_rows = (await conn.execute(sql.BACKFILL_WINDOW, {"id": b.id, "window": size})).all()
        window = await _settle(conn, b.id, window_rows)
        failed = bool((await conn.execute(sql.BACKFILL_HAS_FAILED, {"id": b.id})).scalar())
        step = plan_backfill(strategy, window, failed=failed, max_active_runs=b.max_active_runs)
        if step.final is not None:
            await _finish(conn, b.id, step.final)
            outcome.ended[b.id] = step.final
            return
        if not step.start:
            return
        by_position = {r.position: r for r in window_rows}
        skipped = await _start(conn, b, [by_position[p] for p in step.start], versions, outcome)
        if not skipped:
            return  # everything asked for started; nothing more to decide until a run ends
    outcome.unfinished.add(b.id)


async def _settle(conn: FencedConnection, backfill_id: int, rows: Sequence[Any]) -> list[WindowEntry]:
    """Record the intervals whose runs ended; the window of the others."""
    settled: list[tuple[int, IntervalStatus, str]] = []
    window: list[WindowEntry] = []
    for r in rows:
        if r.status == IntervalStatus.CREATED:
            if r.run_pk is None:
                settled.append((r.position, IntervalStatus.FAILED, "its run was deleted"))
                continue
            if r.run_state in (RunState.SUCCESS, RunState.FAILED):
                status = (
                    IntervalStatus.SUCCEEDED if r.run_state == RunState.SUCCESS else IntervalStatus.FAILED
                )
                settled.append((r.position, status, ""))
                continue
        window.append(WindowEntry(r.position, r.chunk, IntervalStatus(r.status)))
    if settled:
        await conn.execute(
            sql.SETTLE_BACKFILL_INTERVALS,
            {
                "id": backfill_id,
                "positions": [p for p, _, _ in settled],
                "statuses": [s.value for _, s, _ in settled],
                "notes": [n for _, _, n in settled],
            },
        )
    return window


async def _start(
    conn: FencedConnection, b: Any, rows: Sequence[Any], versions: VersionCache, outcome: AdvanceOutcome
) -> int:
    """Start the intervals of ``rows``; returns how many were skipped instead."""
    existing = {
        r.logical_date: r
        for r in (
            await conn.execute(
                sql.RUNS_AT_LOGICAL_DATES, {"dag_id": b.dag_id, "dates": [r.logical_date for r in rows]}
            )
        ).all()
    }
    reprocess = Reprocess(b.reprocess)
    to_make: list[Any] = []
    to_rerun: list[tuple[Any, Any]] = []
    to_skip: list[tuple[int, str]] = []
    for r in rows:
        run = existing.get(r.logical_date)
        if run is None:
            to_make.append(r)
        elif run.state in (RunState.QUEUED, RunState.RUNNING):
            to_skip.append((r.position, f"run {run.run_id} of this interval is in flight"))
        elif reprocess is Reprocess.RERUN_ALL or (
            reprocess is Reprocess.RERUN_FAILED and run.state == RunState.FAILED
        ):
            to_rerun.append((r, run))
        else:
            to_skip.append((r.position, f"run {run.run_id} exists ({run.state})"))
    linked: list[tuple[int, int]] = []
    if to_make:
        version_id = (await conn.execute(sql.LATEST_VERSION_OF_DAG, {"dag_id": b.dag_id})).scalar_one()
        made = await create_interval_runs(
            conn,
            [
                NewRun(
                    b.dag_id,
                    int(version_id),
                    DataInterval(r.interval_start, r.interval_end, logical=r.logical_date),
                )
                for r in to_make
            ],
            run_type=RunType.BACKFILL,
            backfill_id=b.id,
        )
        linked += [(r.position, made[(b.dag_id, r.logical_date)]) for r in to_make]
        outcome.runs_made += len(made)
        if b.conf is not None:
            await conn.execute(
                sql.SET_RUNS_CONF, {"conf": json.dumps(b.conf), "run_pks": sorted(made.values())}
            )
    for r, run in to_rerun:
        await _rerun(conn, b, run, versions)
        linked.append((r.position, int(run.id)))
        outcome.runs_rerun += 1
    if linked:
        await conn.execute(
            sql.LINK_BACKFILL_INTERVALS,
            {"id": b.id, "positions": [p for p, _ in linked], "run_pks": [k for _, k in linked]},
        )
    if to_skip:
        await conn.execute(
            sql.SKIP_BACKFILL_INTERVALS,
            {"id": b.id, "positions": [p for p, _ in to_skip], "notes": [n for _, n in to_skip]},
        )
        outcome.skipped += len(to_skip)
    return len(to_skip)


async def _rerun(conn: FencedConnection, b: Any, run: Any, versions: VersionCache) -> None:
    """Clear a finished run (locked by RUNS_AT_LOGICAL_DATES) so that it runs again as the backfill's,
    on the DAG's current version when the backfill says so."""
    tasks = (await conn.execute(sql.LOCK_RUN_TASKS, {"run_pk": run.id})).all()
    if b.run_on_latest_version:
        graph, _ = await move_to_current_version(conn, b.dag_id, run.run_id, run.id, tasks)
    else:
        await versions.load(conn, {run.dag_version_id})
        graph = versions.graph(run.dag_version_id)
    clearable = [t for t in tasks if t.state != TaskState.NONE and t.task_id in graph.nodes]
    if clearable:
        await conn.execute(
            sql.CLEAR_TASK_INSTANCES,
            {
                "ids": [t.id for t in clearable],
                "tries": [graph.nodes[t.task_id].max_tries for t in clearable],
            },
        )
    if b.run_on_latest_version:
        await refresh_options(conn, graph, tasks)
    await conn.execute(sql.REOPEN_RUN, {"run_pk": run.id})
    await conn.execute(sql.BUMP_CONTROL_VERSION, {"run_pk": run.id})
    await conn.execute(sql.ADOPT_RUN, {"run_pk": run.id, "backfill_id": b.id, "token": conn.token})
    await conn.execute(sql.NOTIFY, {"channel": channels.RUNS, "payload": str(run.id)})


async def _finish(conn: FencedConnection, backfill_id: int, final: BackfillState) -> None:
    if final is BackfillState.SUCCEEDED:
        await conn.execute(sql.SUCCEED_BACKFILL, {"id": backfill_id})
        return
    first = (await conn.execute(sql.FIRST_FAILED_INTERVAL, {"id": backfill_id})).first()
    error = f"the run of {_iso(first.logical_date)} failed" if first is not None else "a run failed"
    await conn.execute(sql.FAIL_BACKFILL, {"id": backfill_id, "error": error})


async def fail(conn: FencedConnection, backfill_id: int, reason: str) -> None:
    """Fail a running backfill that cannot be advanced, saying why."""
    await conn.execute(sql.FAIL_BACKFILL, {"id": backfill_id, "error": reason})


def _iso(moment: datetime) -> str:
    return moment.isoformat()
